"""Supervise a running command: capture its output, and kill every process it started.

A command may fork, daemonize (``setsid``, double fork) or re-parent its children to
init; killing the process group is not enough. :class:`ProcessTracker` remembers every
descendant it has seen (snapshots taken while the command runs, through a parent-pid map
so grandchildren re-parented to init stay known), and :meth:`ProcessTracker.kill_all`
adds the command's session and process group and, where asked, every process whose
environment carries the command's marker. It stops them all first (``SIGSTOP``, repeated
until no new child appears, so nothing can fork its way out) and then kills them
(``SIGKILL``). psutil compares start times, so a recycled pid is never signalled.

:func:`supervise` drives one run: it reads stdout and stderr concurrently (capped, the
excess read and dropped so the command never blocks on a full pipe), takes snapshots,
enforces the deadline and cancellation, and cleans up. In a namespace, the run ends when
the init shell reports on its pipe (``done_fd``) that the command exited; what it left is
still there, to be stopped, counted and killed by the daemon itself.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import psutil

__all__ = ["MARKER_ENV", "Capture", "ProcessTracker", "Supervised", "supervise"]

MARKER_ENV = "ROOST_COMMAND_ID"
"""Environment variable carrying a per-run marker, inherited by every descendant."""

_FREEZE_ROUNDS = 20
_CHUNK = 65536
_POLL_S = 0.05
_SNAPSHOT_S = 0.05
_DRAIN_S = 2.0


def _ppid_map() -> dict[int, list[psutil.Process]]:
    """Map each parent pid to its live child processes (one pass over ``/proc``)."""
    children: dict[int, list[psutil.Process]] = {}
    for proc in psutil.process_iter(["ppid"]):
        ppid = proc.info.get("ppid")
        if isinstance(ppid, int):
            children.setdefault(ppid, []).append(proc)
    return children


class ProcessTracker:
    """Every descendant of one command process seen so far, and the way to kill them."""

    def __init__(self, pid: int, *, marker: str | None = None) -> None:
        """Track the tree under ``pid`` (a session leader); ``marker`` enables env scans."""
        self.pid = pid
        self.marker = marker
        self.seen: dict[int, psutil.Process] = {}
        try:
            self.root: psutil.Process | None = psutil.Process(pid)
            self.seen[pid] = self.root
        except psutil.Error:
            self.root = None

    def add(self, pids: Iterable[int]) -> None:
        """Track ``pids`` too (the members of the command's cgroups)."""
        for pid in pids:
            if pid not in self.seen and pid != os.getpid():
                try:
                    self.seen[pid] = psutil.Process(pid)
                except psutil.Error:
                    continue

    def _alive(self) -> list[psutil.Process]:
        return [p for p in self.seen.values() if _running(p)]

    def snapshot(self) -> None:
        """Record the current descendants of the command and of every process seen before."""
        self._grow(_ppid_map(), [p.pid for p in self._alive()])

    def _grow(self, children: dict[int, list[psutil.Process]], starts: Iterable[int]) -> int:
        """Add every descendant of ``starts`` found in ``children``; return how many are new."""
        added = 0
        stack = list(starts)
        while stack:
            for child in children.get(stack.pop(), []):
                if child.pid not in self.seen and child.pid != os.getpid():
                    self.seen[child.pid] = child
                    stack.append(child.pid)
                    added += 1
        return added

    def _scan_session(self) -> None:
        """Add processes still in the command's session or process group."""
        me = os.getpid()
        for pid in psutil.pids():
            if pid in self.seen or pid in (me, 1):
                continue
            try:
                if os.getsid(pid) == self.pid or os.getpgid(pid) == self.pid:
                    self.seen[pid] = psutil.Process(pid)
            except (OSError, psutil.Error):
                continue

    def _scan_marker(self) -> None:
        """Add processes whose environment carries this run's marker."""
        if not self.marker:
            return
        me = os.getpid()
        for proc in psutil.process_iter():
            if proc.pid in self.seen or proc.pid in (me, 1):
                continue
            try:
                if proc.environ().get(MARKER_ENV) == self.marker:
                    self.seen[proc.pid] = proc
            except psutil.Error:
                continue

    def kill_all(self, *, exclude: Callable[[psutil.Process], bool] | None = None) -> int:
        """Stop, then kill, every tracked process; return how many were killed.

        The command's own process (``pid``) is killed but left for its parent to reap.
        Processes for which ``exclude`` is true (the sandbox's own wrappers) are killed
        too but not counted. Zombies are not counted: they had already exited.
        """
        self._scan_session()
        self._scan_marker()
        frozen: dict[int, psutil.Process] = {}
        for _ in range(_FREEZE_ROUNDS):
            fresh = [p for p in self._alive() if p.pid not in frozen]
            if not fresh:
                break
            for proc in fresh:
                frozen[proc.pid] = proc
                _signal(proc, signal.SIGSTOP)
            self._grow(_ppid_map(), [p.pid for p in fresh])
        # Everything is stopped now: count, then kill the command's processes before the
        # sandbox's wrappers (whose death would take the namespace, and the count, along).
        targets = [p for p in self._alive() if not _is_zombie(p)]
        wrappers = [p for p in targets if exclude is not None and _safe_exclude(exclude, p)]
        own = [p for p in targets if p not in wrappers]
        for proc in own + wrappers:
            _signal(proc, signal.SIGKILL)
        _wait_dead([p for p in targets if p.pid != self.pid], timeout=2.0)
        return len(own)


def _wait_dead(procs: list[psutil.Process], timeout: float) -> None:
    """Wait until each process is gone or a zombie (its reaping is its parent's business)."""
    deadline = time.monotonic() + timeout
    pending = procs
    while pending and time.monotonic() < deadline:
        pending = [p for p in pending if _running(p) and not _is_zombie(p)]
        if pending:
            time.sleep(0.005)


def _running(proc: psutil.Process) -> bool:
    try:
        return proc.is_running()
    except psutil.Error:
        return False


def _is_zombie(proc: psutil.Process) -> bool:
    try:
        return proc.status() == psutil.STATUS_ZOMBIE
    except psutil.Error:
        return True


def _safe_exclude(exclude: Callable[[psutil.Process], bool], proc: psutil.Process) -> bool:
    try:
        return exclude(proc)
    except psutil.Error:
        return False


def _signal(proc: psutil.Process, sig: int) -> None:
    """Send ``sig`` if ``proc`` is still the process we saw."""
    with contextlib.suppress(psutil.Error, OSError):
        proc.send_signal(sig)


class Capture:
    """One output stream, kept up to ``cap`` bytes; the rest is read and dropped."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.data = bytearray()
        self.truncated = False

    def feed(self, chunk: bytes) -> None:
        """Keep what fits of ``chunk``; mark what is dropped."""
        kept = chunk[: max(self.cap - len(self.data), 0)]
        self.data += kept
        if len(kept) < len(chunk):
            self.truncated = True

    def text(self) -> str:
        """Return the kept bytes as text (UTF-8, invalid bytes replaced)."""
        return self.data.decode("utf-8", "replace")


class _Tail(Capture):
    """The last ``cap`` bytes of a stream (the init shell's report of the exit status)."""

    def feed(self, chunk: bytes) -> None:
        """Keep the last bytes of what was read so far."""
        self.data = (self.data + chunk)[-self.cap :]


def _pump(sel: selectors.BaseSelector, timeout: float) -> None:
    """Read what is ready on the registered pipes, waiting at most ``timeout`` seconds."""
    if not sel.get_map():
        time.sleep(timeout)  # nothing left to read; just pace the wait loop
        return
    for key, _ in sel.select(timeout):
        try:
            chunk = os.read(key.fd, _CHUNK)
        except BlockingIOError:
            continue
        if chunk:
            key.data.feed(chunk)
        else:
            sel.unregister(key.fd)


@dataclass
class Supervised:
    """What :func:`supervise` observed: the output, why it stopped, what it killed."""

    stdout: Capture
    """Captured standard output."""
    stderr: Capture
    """Captured standard error."""
    reason: str | None
    """``"timeout"``, ``"cancel"``, or ``None`` when the command exited by itself."""
    killed: int
    """Processes killed (on timeout/cancel: the command's; on exit: what it left behind)."""
    status: bytes = b""
    """The last bytes the init shell wrote on its pipe (its report of the exit status)."""


def _end_in_cgroup(
    proc: subprocess.Popen[bytes],
    tracker: ProcessTracker,
    members: list[int],
    exclude: Callable[[psutil.Process], bool] | None,
) -> int:
    """End a run whose cgroup holds all its processes; return how many it left behind."""
    procs: list[psutil.Process] = []
    for pid in members:
        with contextlib.suppress(psutil.Error):
            procs.append(psutil.Process(pid))
    if exclude is None or not all(_safe_exclude(exclude, p) for p in procs):
        tracker.add(members)
        killed = tracker.kill_all(exclude=exclude)
        proc.wait()
        return killed
    for wrapper in procs:  # only the sandbox's own processes are left
        _signal(wrapper, signal.SIGKILL)
    proc.wait()
    return 0


def supervise(
    proc: subprocess.Popen[bytes],
    *,
    tracker: ProcessTracker,
    timeout_s: float,
    cancel: threading.Event | None,
    max_output_bytes: int,
    exclude: Callable[[psutil.Process], bool] | None = None,
    done_fd: int | None = None,
    init_finished: Callable[[], bool] | None = None,
    members: Callable[[], list[int]] | None = None,
    walk: bool = True,
) -> Supervised:
    """Read ``proc``'s output, enforce the deadline and ``cancel``, clean up every process.

    ``done_fd`` (namespace runs) is the read end of the init shell's pipe: a line on it
    means the command exited, once ``init_finished`` confirms it (a line a command forges
    is not enough); what it left behind is then stopped, counted and killed here
    (``exclude`` tells the sandbox's own processes, killed but not counted). ``members``
    lists the command's cgroup members (every process of it, when given): a run that left
    nothing but the sandbox's own processes then ends without a process walk. Without
    ``walk`` (a sandbox whose cgroup holds every process of it, and none can leave it), the
    snapshots while it runs read ``members`` only, not the whole ``/proc``. Waits for
    ``proc``; never leaves a process.
    """
    started = time.monotonic()
    deadline = started + timeout_s
    out, err = Capture(max_output_bytes), Capture(max_output_bytes)
    status = _Tail(64)
    sel = selectors.DefaultSelector()
    assert proc.stdout is not None and proc.stderr is not None
    for stream, capture in ((proc.stdout, out), (proc.stderr, err)):
        os.set_blocking(stream.fileno(), False)
        sel.register(stream.fileno(), selectors.EVENT_READ, capture)
    if done_fd is not None:
        os.set_blocking(done_fd, False)
        sel.register(done_fd, selectors.EVENT_READ, status)

    def reported() -> bool:
        return b"\n" in status.data

    def done() -> bool:
        return reported() and (init_finished is None or init_finished())

    def add_members() -> None:
        if members is not None:
            tracker.add(members())

    def track() -> None:
        if walk or members is None:
            tracker.snapshot()
        add_members()

    reason: str | None = None
    killed = 0
    try:
        # The first snapshot one period in, not at the start: just after the spawn the
        # process is still in the sandbox's prefix (the cgroup gate, bubblewrap), with no
        # process of the tool's own for a walk of /proc to find, and that walk (~5-10 ms,
        # every process of the host) would compete with the sandbox's start-up. What it
        # could see is covered by the later snapshots, the cgroup and the end's scans.
        next_snapshot = started + _SNAPSHOT_S
        while proc.poll() is None and not done():
            now = time.monotonic()
            if cancel is not None and cancel.is_set():
                reason = "cancel"
                break
            if now >= deadline:
                reason = "timeout"
                break
            if now >= next_snapshot:
                track()
                next_snapshot = now + _SNAPSHOT_S
            _pump(sel, min(0.001 if reported() else _POLL_S, deadline - now))
        if reason is None and done() and members is not None:
            killed = _end_in_cgroup(proc, tracker, members(), exclude)
        elif reason or done_fd is not None:
            add_members()
            killed = tracker.kill_all(exclude=exclude)
            proc.wait()
        else:
            killed = tracker.kill_all()
        drain_until = time.monotonic() + _DRAIN_S
        while sel.get_map() and time.monotonic() < drain_until:
            _pump(sel, _POLL_S)
    finally:
        if proc.poll() is None:
            tracker.kill_all(exclude=exclude)
            proc.wait()
        sel.close()
        proc.stdout.close()
        proc.stderr.close()
    return Supervised(
        stdout=out, stderr=err, reason=reason, killed=killed, status=bytes(status.data)
    )
