"""The soak run's leak check: an always-on process must give back what the load took.

Every run reads the USS (memory unique to a process: ``psutil``'s
``memory_full_info().uss``) of the daemon and of each always-on process of its tree (the
Thespian admin and logger, the Supervisor, the Journal,
each project's host, where its Conversations, Policy and ToolRunner live) twice, each
time once every conversation has passivated (a host holds its live conversations):

- *before*, after a warm-up (``soak.steps.warm_up``), so what the first use of each code
  path, pool and allocator arena costs, and what fills up to a bound, is not counted as
  growth: one turn per conversation, and with ``--duration-s`` half the duration more
  (at most 300 s: each conversation's 256 recent turns and closed calls, each host's
  4,096 remembered tool calls and cached redacted ids fill at the turn rate, ~200 s at
  20 turns a second per host), then, once every conversation passivated, one more turn
  each, which rehydrates it as the load's first turns will (the Supervisor relays the
  snapshot and the events after it: a step of ~1.6 MiB of RSS once, flat after);
- *after*, once the load has stopped, every turn is over, and :data:`SETTLE_S` more
  seconds have passed.

A process whose USS grew by more than :data:`LIMIT_PCT` percent, and its RSS by as much,
fails the run (with the process, its pid and the figures in the reason): a parent's USS
also rises when pages it shared with the children it forked become its own (they wrote to
their copies, or exited), with no byte allocated; its RSS does not. A process that was not
there at both readings (killed by ``chaos``, restarted) is reported but not compared. The
decision is :func:`judge`, plain code with unit tests.

A leak is growth that goes on with the load; a process also grows in steps while its first
minutes of load fill what it keeps (a Supervisor relaying a larger history once, a Project
restarting killed children). So only a run whose load lasted :data:`MIN_JUDGED_LOAD_S`
between the readings is judged; a shorter one (the test suite's small runs) reports its
figures and passes. The warm-up comes before ``--duration-s``, not out of it: a process
that leaks per turn grows through the whole judged load as before.
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter

import msgspec
import psutil

from runtime.daemon import daemon_processes
from soak.report import LeakCheck, ProcessMemory

__all__ = [
    "LIMIT_PCT",
    "MIN_JUDGED_LOAD_S",
    "SETTLE_S",
    "Reading",
    "Watch",
    "judge",
    "leak_reasons",
    "read_always_on",
]

LIMIT_PCT = 10.0
"""Growth of one process's USS, in percent, beyond which the run fails."""
SETTLE_S = 3.0
"""Seconds to wait after the load stopped before the *after* reading."""
MIN_JUDGED_LOAD_S = 60.0
"""Seconds of load between the readings below which growth is reported, not judged."""

_MIB = 1024 * 1024


class Reading(msgspec.Struct, frozen=True, kw_only=True):
    """One process at one moment."""

    name: str
    """What it is: ``daemon``, ``supervisor``, ``journal``, ``project``, ``thespian``..."""
    pid: int
    created: float
    """Its start time (a pid reused by a new process is not the same process)."""
    uss: int
    """Bytes unique to the process."""
    rss: int = 0
    """Bytes resident (shared pages included)."""


def judge(
    before: list[Reading], after: list[Reading], limit_pct: float = LIMIT_PCT
) -> list[ProcessMemory]:
    """Compare the two readings process by process (same pid and start time).

    A process leaked when its USS grew by more than ``limit_pct`` and its RSS grew by as
    much: memory it allocated raises both, while pages it shared with the processes it
    forked become its own (USS up, RSS the same) as those children write to their copies
    or exit, which is no growth at all.
    """
    later = {(r.pid, r.created): r for r in after}
    out = []
    for first in before:
        last = later.get((first.pid, first.created))
        if last is None:
            out.append(
                ProcessMemory(
                    name=first.name,
                    pid=first.pid,
                    uss_before=first.uss,
                    uss_after=None,
                    rss_before=first.rss,
                    growth_pct=None,
                    leaked=False,
                )
            )
            continue
        growth = (last.uss - first.uss) / first.uss * 100 if first.uss else None
        grown = min(last.uss - first.uss, last.rss - first.rss)
        allocated = grown / first.uss * 100 if first.uss else None
        out.append(
            ProcessMemory(
                name=first.name,
                pid=first.pid,
                uss_before=first.uss,
                uss_after=last.uss,
                rss_before=first.rss,
                rss_after=last.rss,
                growth_pct=None if growth is None else round(growth, 2),
                leaked=allocated is not None and allocated > limit_pct,
            )
        )
    return out


def leak_reasons(check: LeakCheck | None) -> list[str]:
    """One reason per process that grew beyond the limit."""
    if check is None or not check.judged:
        return []
    return [
        f"leak: {p.name} (pid {p.pid}) USS grew {p.growth_pct:+.1f}% "
        f"({p.uss_before / _MIB:.1f} -> {(p.uss_after or 0) / _MIB:.1f} MiB; RSS "
        f"{p.rss_before / _MIB:.1f} -> {(p.rss_after or 0) / _MIB:.1f} MiB) between the "
        f"warm-up and {check.settle_s:g} s after the load stopped; the limit is "
        f"{check.limit_pct:g}%"
        for p in check.processes
        if p.leaked
    ]


def _roles(home: str, daemon_pid: int) -> dict[int, str]:
    """The name of each always-on process of the daemon of ``home``, by pid."""
    from soak.chaos import identify_roles

    roles = {
        pid: role for pid, role in identify_roles(home).roles.items() if role != "conversation"
    }
    admin = _admin_pid(home)
    names = {daemon_pid: "daemon"}
    for proc in daemon_processes(home):
        with contextlib.suppress(psutil.Error):
            if proc.pid == daemon_pid or proc.status() == psutil.STATUS_ZOMBIE:
                continue
            if proc.pid in roles:
                names[proc.pid] = roles[proc.pid]
            elif proc.pid == admin:
                names[proc.pid] = "thespian-admin"
            elif proc.ppid() == admin:
                names[proc.pid] = "thespian-logger"  # the admin's child that is no actor
            else:
                names[proc.pid] = _process_name(proc)
    counts = Counter(names.values())
    seen: Counter[str] = Counter()
    for pid in sorted(names):  # several projects: project-1, project-2...
        name = names[pid]
        if counts[name] > 1:
            seen[name] += 1
            names[pid] = f"{name}-{seen[name]}"
    return names


def _admin_pid(home: str) -> int | None:
    """Thespian's admin process (the daemon's ``status`` names it), or None."""
    from runtime.client import Client
    from runtime.errors import RoostError

    try:
        with Client.connect(home) as client:
            admin = client.status().get("admin_pid")
    except RoostError:
        return None
    return admin if isinstance(admin, int) else None


def _process_name(proc: psutil.Process) -> str:
    try:
        return proc.name() or "process"
    except psutil.Error:
        return "process"


def read_always_on(
    home: str, daemon_pid: int, names: dict[int, str] | None = None
) -> tuple[list[Reading], dict[int, str]]:
    """Read the USS of the daemon's always-on processes; return it and the names used.

    Pass the names of the first reading back in for the second, so each process keeps its
    name (and conversations started meanwhile are not read).
    """
    if names is None:
        names = _roles(home, daemon_pid)
    readings = []
    for pid, name in names.items():
        with contextlib.suppress(psutil.Error):
            proc = psutil.Process(pid)
            if proc.status() == psutil.STATUS_ZOMBIE:
                continue
            info = proc.memory_full_info()
            readings.append(
                Reading(
                    name=name,
                    pid=pid,
                    created=proc.create_time(),
                    uss=info.uss,
                    rss=info.rss,
                )
            )
    return readings, names


class Watch:
    """The two readings of a run: :meth:`before` after the warm-up, :meth:`after` at the end."""

    def __init__(self, home: str, daemon_pid: int, limit_pct: float = LIMIT_PCT) -> None:
        self.home = home
        self.daemon_pid = daemon_pid
        self.limit_pct = limit_pct
        self._before: list[Reading] = []
        self._after: list[Reading] = []
        self._names: dict[int, str] | None = None
        self._before_at = 0.0
        self._after_at = 0.0

    @property
    def names(self) -> dict[int, str] | None:
        """The always-on processes' names by pid, once named."""
        return self._names

    def name_processes(self) -> None:
        """Name the always-on processes: call it before any conversation starts."""
        self._names = _roles(self.home, self.daemon_pid)

    def before(self) -> None:
        """Take the *before* reading (call it after the warm-up)."""
        self._before, self._names = read_always_on(self.home, self.daemon_pid, self._names)
        self._before_at = time.monotonic()

    def after(self, settle_s: float = SETTLE_S) -> None:
        """Wait ``settle_s``, then take the *after* reading."""
        if self._names is None:
            return
        load_ended = time.monotonic()
        time.sleep(settle_s)
        self._after, _ = read_always_on(self.home, self.daemon_pid, self._names)
        self._after_at = load_ended

    def result(self, settle_s: float = SETTLE_S) -> LeakCheck | None:
        """The check, or None when either reading is missing (the run broke off)."""
        if not self._before or not self._after:
            return None
        return LeakCheck(
            limit_pct=self.limit_pct,
            settle_s=settle_s,
            processes=judge(self._before, self._after, self.limit_pct),
            load_s=round(self._after_at - self._before_at, 1),
            judged=self._after_at - self._before_at >= MIN_JUDGED_LOAD_S,
        )
