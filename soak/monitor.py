"""What the harness watches the daemon with: its lifecycle and its memory.

:class:`DaemonSession` attaches to the daemon running on ``--home`` or spawns one (and
then stops it, and checks that no process of it is left). :class:`MemorySampler` sums the
RSS of the daemon's whole process tree (``runtime.daemon.processes.daemon_processes``: the
daemon, its actor processes, their children) every ~500 ms in a background thread, and
their PSS every ~2 s (``memory_full_info`` reads each process's ``smaps``: dearer).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections import Counter
from collections.abc import Callable

import psutil

from runtime.daemon import (
    daemon_pid,
    daemon_processes,
    reap_stragglers,
    start_daemon,
    stop_daemon,
)
from runtime.errors import RoostError
from soak.report import CpuPerTurn, Failure

__all__ = [
    "CpuClock",
    "DaemonSession",
    "Failures",
    "MemorySampler",
    "cpu_per_turn",
    "live",
    "wait_until",
]


class Failures:
    """Errors grouped by (stage, code), with one message each."""

    def __init__(self) -> None:
        self.counts: Counter[tuple[str, str]] = Counter()
        self.messages: dict[tuple[str, str], str] = {}

    def add(self, stage: str, code: str, message: str) -> None:
        """Count one error (the first message of each kind is kept, cut at 300 chars)."""
        self.counts[(stage, code)] += 1
        self.messages.setdefault((stage, code), message[:300])

    def items(self) -> list[Failure]:
        """The groups, sorted by stage and code."""
        return [
            Failure(stage=s, code=c, count=n, message=self.messages[(s, c)])
            for (s, c), n in sorted(self.counts.items())
        ]


class DaemonSession:
    """The daemon a run talks to: an already running one, or one spawned (and stopped)."""

    def __init__(
        self, home: str | None, workdir: str, *, faults: bool = False, clients: int = 0
    ) -> None:
        self.clients = clients
        """Clients that may wait at once (``slow-model``): the daemon started here serves
        twice as many requests and connections, its limits are raised to that."""
        self.faults = faults
        """Start the daemon with ``ROOST_FAULT_INJECTION=1`` (``chaos`` crashes entities)."""
        self.owned = False
        """True when this session started the daemon (and so stops it)."""
        self.home = os.path.abspath(home) if home else os.path.join(workdir, "home")
        """The daemon's ``ROOST_HOME``."""
        self.pid = 0
        """The daemon's pid."""

    def start(self) -> None:
        """Attach to a running daemon or start one; raises ``RoostError`` when neither works."""
        running = daemon_pid(self.home)
        if running:
            self.pid = running
            return
        env: dict[str, str] = {"ROOST_FAULT_INJECTION": "1"} if self.faults else {}
        if self.clients:
            limit = str(max(1024, 2 * self.clients))
            env |= {"ROOST_MAX_INFLIGHT": limit, "ROOST_MAX_CONNECTIONS": limit}
        self.pid = start_daemon(self.home, env=env or None)
        self.owned = True

    def stop(self, failures: Failures, timeout_s: float = 30.0) -> None:
        """Stop the daemon if it was spawned here, then check that no process is left."""
        if not self.owned:
            return
        try:
            stop_daemon(self.home, timeout_s=timeout_s)
        except RoostError as e:
            failures.add("cleanup", e.code, str(e))
        gone = wait_until(lambda: not live(daemon_processes(self.home)), 10.0)
        if not gone:
            pids = [p.pid for p in live(daemon_processes(self.home))]
            failures.add("cleanup", "processes_left", f"daemon processes left running: {pids}")
            reap_stragglers(self.home, timeout_s=1.0)


def live(procs: list[psutil.Process]) -> list[psutil.Process]:
    """The processes of ``procs`` still running (zombies count as gone)."""
    alive = []
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            if proc.status() != psutil.STATUS_ZOMBIE:
                alive.append(proc)
    return alive


def wait_until(predicate: Callable[[], bool], timeout_s: float, step_s: float = 0.05) -> bool:
    """Poll ``predicate`` every ``step_s`` until it is true (True) or ``timeout_s`` passed."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() >= deadline:
            return False
        time.sleep(step_s)
    return True


class CpuClock:
    """The CPU the daemon's tree and this process spend inside ``with clock:``.

    Reads every tree process's user + system time (``psutil``) and this process's
    (``time.process_time``, all its threads) on entry and on exit.
    """

    def __init__(self, home: str) -> None:
        self.home = home
        self._before: dict[int, float] = {}
        self._after: dict[int, float] | None = None
        self._client = 0.0

    def __enter__(self) -> CpuClock:
        self._before, self._client = tree_cpu_s(self.home), time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self._client = time.process_time() - self._client
        self._after = tree_cpu_s(self.home)

    def per_turn(self, turns: int) -> CpuPerTurn | None:
        """The CPU per turn of the block (None before it ended, or without turns)."""
        if self._after is None:
            return None
        return cpu_per_turn(self._before, self._after, self._client, turns)


def tree_cpu_s(home: str) -> dict[int, float]:
    """User + system CPU seconds of each process of the daemon's tree, by pid."""
    seconds: dict[int, float] = {}
    for proc in daemon_processes(home):
        with contextlib.suppress(psutil.Error):
            times = proc.cpu_times()
            seconds[proc.pid] = times.user + times.system
    return seconds


def cpu_per_turn(
    before: dict[int, float], after: dict[int, float], client_s: float, turns: int
) -> CpuPerTurn | None:
    """CPU ms per turn from two readings of :func:`tree_cpu_s` and the client's seconds.

    A process found only at the end (a host restarted, a tool) counts from zero; one gone
    by the end is not counted (its last seconds cannot be read).
    """
    if turns <= 0:
        return None
    tree = sum(seconds - before.get(pid, 0.0) for pid, seconds in after.items())
    return CpuPerTurn(
        tree_ms=round(tree * 1000 / turns, 3), client_ms=round(client_s * 1000 / turns, 3)
    )


class MemorySampler:
    """Samples the RSS of the daemon's whole process tree every ``interval_s``, in a thread.

    The process list is refreshed every ``list_interval_s`` (a scan of every process of the
    machine: the tree only changes when a host or the Journal restarts, or a tool runs);
    RSS every tick (500 ms by default), PSS every ``pss_interval_s`` (its
    ``smaps_rollup`` is dear). The harness shares the machine with the daemon: sampled
    more often, its ``/proc`` reads took a measurable share of a core from the load.
    """

    def __init__(
        self,
        home: str,
        interval_s: float = 0.5,
        pss_interval_s: float = 5.0,
        list_interval_s: float = 5.0,
    ) -> None:
        self.list_interval_s = list_interval_s
        self.home = home
        self.interval_s = interval_s
        self.pss_interval_s = pss_interval_s
        self.pss_peak = 0
        """Highest PSS sum seen (bytes), by :meth:`pss` (the thread calls it too)."""
        self.peak = 0
        """Highest RSS sum seen (bytes)."""
        self.peak_processes = 0
        """Most processes seen."""
        self.samples = 0
        """Samples taken."""
        self._procs: list[psutil.Process] = []
        self._listed = 0.0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="soak-memory", daemon=True)
        self.cpu = CpuClock(home)
        """The CPU clock of the measured load (the harness enters it around the workload)."""

    def start(self) -> None:
        """Start sampling."""
        self._thread.start()

    def stop(self) -> None:
        """Stop sampling."""
        self._stop.set()
        self._thread.join()

    def sample(self, refresh: bool = False) -> tuple[int, int]:
        """Take one sample now; return ``(rss bytes, processes)``."""
        with self._lock:
            now = time.monotonic()
            if refresh or now - self._listed >= self.list_interval_s:
                self._procs = daemon_processes(self.home)
                self._listed = now
            total, count = 0, 0
            for proc in self._procs:
                with contextlib.suppress(psutil.Error):
                    total += proc.memory_info().rss
                    count += 1
            self.samples += 1
            self.peak = max(self.peak, total)
            self.peak_processes = max(self.peak_processes, count)
            return total, count

    def pss(self, refresh: bool = False) -> int:
        """The tree's proportional set size now (bytes; 0 where the kernel hides it)."""
        with self._lock:
            if refresh or not self._procs:
                self._procs = daemon_processes(self.home)
                self._listed = time.monotonic()
            procs = list(self._procs)
        total = 0
        for proc in procs:
            with contextlib.suppress(psutil.Error, AttributeError):
                total += proc.memory_full_info().pss
        with self._lock:
            self.pss_peak = max(self.pss_peak, total)
        return total

    def _run(self) -> None:
        pss_at = time.monotonic() + self.pss_interval_s
        while not self._stop.wait(self.interval_s):
            self.sample()
            if time.monotonic() >= pss_at:
                self.pss()
                pss_at = time.monotonic() + self.pss_interval_s
