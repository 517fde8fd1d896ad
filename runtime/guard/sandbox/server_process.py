"""A long-lived tool process (an MCP stdio server), started by the one launcher.

:meth:`ServerProcess.start` prepares the process with :func:`runtime.guard.sandbox.launcher.prepare`
(``shape="serve"``): the same view, rlimits, parent-death signal and ``pids`` cgroup as a
command, plus a freezer cgroup of its own for its whole life. It is spawned with pipes for
stdin and stdout (the protocol's) and one for stderr, which a reader thread drains into a
bounded tail (:class:`StderrTail`, the last :data:`STDERR_TAIL_BYTES` bytes): when the
server fails, :meth:`ServerProcess.exit_report` gives its exit status and that tail (the
server's own words, untrusted: the caller redacts them).

Between calls its whole tree is frozen, so it runs only while a call is in flight, like a
command: :meth:`begin_call` takes the post-run check's baseline and thaws it, and
:meth:`end_call` freezes it again and runs the post-run check. :meth:`view_is_stale` tells
whether the view it was given still hides and protects what a command's view would now
(:func:`runtime.guard.sandbox.view.view_state`); the caller then restarts it with a fresh
one. :meth:`stop` kills the tree (its cgroups) and runs the post-run check a last time.

Where no freezer can be had, :attr:`frozen_between_calls` is false: the process runs
between calls too (``docs/security.md``, "Known limits").
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence

import psutil

from runtime.guard.review.leftovers import ChangeReport
from runtime.guard.review.run_ledger import RunLabel
from runtime.guard.sandbox.launcher import Launch, Limits, post_run_check, prepare
from runtime.guard.sandbox.layers import View
from runtime.guard.sandbox.proctree import MARKER_ENV, ProcessTracker
from runtime.guard.sandbox.view import view_state

__all__ = [
    "SERVER_CPU_SECONDS",
    "STDERR_TAIL_BYTES",
    "ServerProcess",
    "StderrTail",
    "written_files",
]

SERVER_CPU_SECONDS = 3600
"""CPU seconds each process of a server may use over its life (``RLIMIT_CPU``).

A command's CPU limit is its timeout; a server lives across calls, frozen between them, so
its CPU time is bounded per call by the call's timeout and over its life by this."""

_GRACE_S = 2.0

STDERR_TAIL_BYTES = 4096
"""Bytes of a server's stderr kept (the last ones): enough for a Python traceback's end."""


class StderrTail:
    """Drains a pipe on a daemon thread and keeps only its last ``limit`` bytes.

    The server may write without end; the reader keeps reading (so it never blocks on a
    full pipe) and holds at most ``limit`` bytes.
    """

    def __init__(self, fd: int, limit: int = STDERR_TAIL_BYTES) -> None:
        self.limit = limit
        self._fd = fd
        self._tail = bytearray()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._drain, name="roost-mcp-stderr", daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        try:
            while chunk := os.read(self._fd, 65536):
                with self._lock:
                    self._tail += chunk
                    del self._tail[: max(0, len(self._tail) - self.limit)]
        except OSError:
            return
        finally:
            with contextlib.suppress(OSError):
                os.close(self._fd)

    def text(self, wait_s: float = 0.0) -> str:
        """The tail as text (bad UTF-8 replaced), after waiting up to ``wait_s`` for EOF."""
        self._thread.join(wait_s)  # 0: no wait
        with self._lock:
            return bytes(self._tail).decode("utf-8", errors="replace")


class ServerProcess:
    """One running server: its process, pipes, cgroups and post-run baseline."""

    def __init__(self, launch: Launch, proc: subprocess.Popen[bytes]) -> None:
        self.launch = launch
        """What the launcher prepared (view, cgroups, baseline)."""
        self.proc = proc
        """The process started (bubblewrap, which runs the server)."""
        self._in_call = True  # it runs from its start until the first end_call
        self._stopped = False
        self._killed = False
        assert proc.stderr is not None
        # the reader owns the descriptor from now on (it closes it at EOF)
        self.stderr = StderrTail(os.dup(proc.stderr.fileno()))
        proc.stderr.close()

    @classmethod
    def start(
        cls,
        argv: Sequence[str],
        *,
        view: View,
        env: Mapping[str, str],
        allow_network: bool,
        limits: Limits,
        label: RunLabel | None = None,
    ) -> ServerProcess:
        """Start ``argv`` through the launcher; ``ToolError`` / ``OSError`` when it cannot.

        ``label`` names the durable record of the server's whole life (written before it
        starts, removed by the review at its stop): a daemon killed meanwhile leaves the
        record, and the next start reviews the root for everything since the server began.
        """
        launch = prepare(
            view=view,
            allow_network=allow_network,
            limits=limits,
            timeout_s=0.0,
            shape="serve",
            label=label,
        )
        try:
            proc = launch.spawn(
                argv,
                cwd=view.cwd,
                env={**env, MARKER_ENV: uuid.uuid4().hex},
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
        except BaseException:
            launch.close()
            raise
        return cls(launch, proc)

    @property
    def frozen_between_calls(self) -> bool:
        """Whether the server's tree is frozen while no call is in flight."""
        return self.launch.freezer is not None

    @property
    def stdin_fd(self) -> int:
        """The write end of the server's stdin."""
        assert self.proc.stdin is not None
        return self.proc.stdin.fileno()

    @property
    def stdout_fd(self) -> int:
        """The read end of the server's stdout."""
        assert self.proc.stdout is not None
        return self.proc.stdout.fileno()

    def alive(self) -> bool:
        """Whether the server's process is still running."""
        return not self._stopped and self.proc.poll() is None

    def view_is_stale(self) -> bool:
        """Whether what its view hides or protects changed since it was built.

        A sensitive file created, replaced or renamed over, a protected place that appeared
        (``.roost``, a git hooks directory) or was replaced: a command started now would not
        see it; this server would. ``OverflowError`` counts as stale (a fresh view refuses).
        """
        try:
            return view_state(self.launch.view) != self.launch.hidden
        except OverflowError:
            return True

    def begin_call(self) -> None:
        """Start the post-run check's new baseline (the server is frozen), then thaw it."""
        self._thaw()
        self._in_call = True

    def _thaw(self) -> None:
        """Thaw the server; first, if it was frozen, rebase the post-run check's watch.

        What changed in the root while it was frozen was not its doing.
        """
        if self.frozen_between_calls and not self._in_call and self.launch.before is not None:
            self.launch.before.rebase()
        if self.launch.freezer is not None:
            self.launch.freezer.thaw()

    def end_call(self) -> ChangeReport | None:
        """Freeze the server again and run the post-run check (the watch goes on).

        A server that cannot be frozen (a task stuck in the kernel) is stopped instead.
        """
        if self.launch.freezer is not None and not self.launch.freezer.freeze():
            return self.stop()
        self._in_call = False
        if self.launch.before is not None:
            self.launch.before.held_open(written_files(self.pids()))
        return post_run_check(self.launch.before, keep=True)

    def stop(self) -> ChangeReport | None:
        """Close stdin, let it exit (thawed) for a moment, kill its tree, check; the report."""
        if self._stopped:
            return None
        self._stopped = True
        before = self.launch.before
        self._thaw()
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        deadline = time.monotonic() + _GRACE_S
        while self.proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        self._killed = self.proc.poll() is None
        self._kill_tree()
        self.launch.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(5)
        return post_run_check(before)

    def exit_report(self, wait_s: float = 2.0) -> dict[str, object]:
        """``{exit_status, stderr_tail}`` once the server has exited (or ``{}`` while it runs).

        ``exit_status`` is the process's status (negative: the signal that ended it), or
        ``None`` when Roost stopped a server that was still running; ``stderr_tail`` is the
        last :data:`STDERR_TAIL_BYTES` of its stderr, raw (the caller redacts it).
        """
        status = self.proc.poll()
        if status is None and not self._stopped:
            return {}
        return {
            "exit_status": None if self._killed else status,
            "stderr_tail": self.stderr.text(wait_s),
        }

    def _kill_tree(self) -> None:
        tracker = ProcessTracker(self.proc.pid)
        tracker.add(self.launch.cgroup_pids())
        with contextlib.suppress(psutil.Error, OSError):
            tracker.kill_all(exclude=self.launch.is_wrapper(self.proc.pid))

    def pids(self) -> list[int]:
        """The processes of the server's tree now (its cgroups' members)."""
        return self.launch.cgroup_pids()


def written_files(pids: Iterable[int]) -> set[str]:
    """Files ``pids`` hold open for writing or map shared and writable (their paths).

    Writes through a mapping make no inotify event, and a file a process keeps open makes
    no close event: the post-run check of a process that lives on judges these too.
    """
    found: set[str] = set()
    for pid in pids:
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError, ValueError):
                    with open(f"/proc/{pid}/fdinfo/{fd}", encoding="ascii") as info:
                        flags = next(
                            int(line.split()[1], 8) for line in info if line.startswith("flags:")
                        )
                    if flags & (os.O_WRONLY | os.O_RDWR):
                        found.add(os.readlink(f"/proc/{pid}/fd/{fd}"))
        with contextlib.suppress(OSError), open(f"/proc/{pid}/maps", encoding="utf-8") as maps:
            for line in maps:
                fields = line.split(maxsplit=5)
                if len(fields) == 6 and fields[1][1] == "w" and fields[1][3] == "s":
                    found.add(fields[5].rstrip("\n"))
    return {p for p in found if p.startswith("/") and not p.endswith(" (deleted)")}
