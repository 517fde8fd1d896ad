"""Running one command inside the sandbox's layers to completion, and what it did.

:func:`run_command` is the run-to-completion shape of the one launcher
(:mod:`runtime.guard.sandbox.launcher`): the launcher builds the command's cgroup, rlimits,
parent-death signal and view, and the init shell that runs it; here the command is
started, its output captured, and every process of it killed at its timeout, on cancel, or
when it exits leaving some (:mod:`runtime.guard.sandbox.proctree`). The init shell tells the daemon
that the command exited by closing a pipe only it holds; the daemon then counts, stops and
kills what is left itself: nothing of the result comes from a file a command could write.
It returns a :class:`CommandResult`.
"""

from __future__ import annotations

import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Mapping, Sequence

import msgspec

from runtime.guard.review.leftovers import ChangeReport
from runtime.guard.review.run_ledger import RunLabel
from runtime.guard.sandbox.launcher import INIT_NAME, Launch, Limits, post_run_check, prepare
from runtime.guard.sandbox.layers import View
from runtime.guard.sandbox.proctree import MARKER_ENV, ProcessTracker, supervise

__all__ = ["INIT_NAME", "CommandResult", "Limits", "run_command"]


class CommandResult(msgspec.Struct, frozen=True, kw_only=True):
    """What a command did: its exit, its (capped) output, and how it was ended."""

    exit_code: int
    """Exit status; 128+N when killed by signal N (the shell convention)."""
    stdout: str
    """Standard output (UTF-8, invalid bytes replaced), at most ``max_output_bytes``."""
    stderr: str
    """Standard error, capped the same way."""
    stdout_truncated: bool = False
    """More stdout was produced than kept."""
    stderr_truncated: bool = False
    """More stderr was produced than kept."""
    timed_out: bool = False
    """The command was killed at its timeout."""
    cancelled: bool = False
    """The command was killed because the call was cancelled."""
    killed_processes: int = 0
    """Processes of the command killed by the runtime or with its namespace."""
    duration_ms: int = 0
    """Wall time from start to the last process gone."""
    layers: list[str] = []
    """Isolation layers used for this run, e.g. ``["bwrap", "netns", "pidns", ...]``."""
    changes: ChangeReport | None = None
    """What the run changed in the root and what the review quarantined (``leftovers``)."""
    killed_by: str | None = None
    """``"memory_limit"`` when the kernel killed a process of it for the memory limit."""


def _exit_status(reported: bytes) -> int | None:
    """The init shell's last line on the pipe, if it is an exit status (0-255)."""
    lines = reported.decode("ascii", "replace").split()
    if lines and lines[-1].isdigit() and int(lines[-1]) <= 255:
        return int(lines[-1])
    return None


def _not_started(layers: list[str], *, timed_out: bool = False) -> CommandResult:
    """The result of a run cancelled (or out of time) before its command was spawned.

    Nothing ran or was killed. Its exit status is a killed command's (``128 + SIGKILL``):
    the command never finished.
    """
    return CommandResult(
        exit_code=128 + signal.SIGKILL,
        stdout="",
        stderr="",
        cancelled=not timed_out,
        timed_out=timed_out,
        layers=layers,
    )


def run_command(
    command: str | Sequence[str],
    *,
    cwd: str,
    env: Mapping[str, str],
    timeout_s: float,
    allow_network: bool,
    cancel: threading.Event | None = None,
    max_output_bytes: int = 262144,
    limits: Limits | None = None,
    writable_paths: Sequence[str] = (),
    view: View | None = None,
    label: RunLabel | None = None,
    root: str | None = None,
) -> CommandResult:
    """Run ``command`` (a ``/bin/sh -c`` string or an argv) inside the best layers here.

    Under bubblewrap the command sees ``view`` (default: ``writable_paths`` writable, the
    system read-only, every ``.git`` read-only, nothing else;
    :mod:`runtime.guard.sandbox.view`). ``root`` (default: the first writable path) is
    reviewed after the run (:mod:`runtime.guard.review.leftovers`; ``label`` names the run's
    durable record). With a ``pids`` cgroup the command and all its
    descendants may have at most ``limits.max_processes`` tasks. On timeout or ``cancel``
    every process of the command is killed; processes left behind by a command that
    exited are killed too. ``cancel`` is also read before the sandbox is prepared and
    again before the spawn: a run cancelled by then starts nothing (``cancelled``, no
    process killed). Raises ``ToolError("isolation_unavailable")`` when the network
    must be denied and no namespace can be made, or when the view cannot be built.
    ``timeout_s`` counts from this call, preparing the sandbox included: the runner waiting
    on the tool keeps that clock too and gives up a grace after it, so the grace is left
    for the kill and its record however long the preparation took. A preparation that took
    the whole time starts nothing (``timed_out``, no process killed).
    """
    deadline = time.monotonic() + timeout_s  # one clock: preparing the sandbox is run time
    view = view or View(writable=tuple(writable_paths), cwd=cwd)
    argv = ["/bin/sh", "-c", command] if isinstance(command, str) else [str(a) for a in command]
    if cancel is not None and cancel.is_set():
        return _not_started([])
    launch = prepare(
        view=view,
        allow_network=allow_network,
        limits=limits or Limits(),
        timeout_s=timeout_s,
        root=root,
        label=label,
    )
    try:
        result = _run(
            launch,
            argv=argv,
            cwd=cwd,
            env=env,
            deadline=deadline,
            cancel=cancel,
            max_output_bytes=max_output_bytes,
        )
        if launch.pids is not None and launch.pids.oom_kills():
            result = msgspec.structs.replace(result, killed_by="memory_limit")
        return result
    finally:
        launch.close()


def _run(
    launch: Launch,
    *,
    argv: list[str],
    cwd: str,
    env: Mapping[str, str],
    deadline: float,
    cancel: threading.Event | None,
    max_output_bytes: int,
) -> CommandResult:
    marker = uuid.uuid4().hex
    started = time.monotonic()
    if cancel is not None and cancel.is_set():  # cancelled while the sandbox was prepared
        return _not_started(launch.layers)
    if started >= deadline:  # the preparation took the whole time: nothing starts
        return _not_started(launch.layers, timed_out=True)
    try:
        proc = launch.spawn(
            argv,
            cwd=cwd,
            env={**env, MARKER_ENV: marker},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
    except OSError as e:
        return CommandResult(
            exit_code=126 if isinstance(e, PermissionError) else 127,
            stdout="",
            stderr=f"{argv[0]}: {e.strerror or e}\n",
            duration_ms=int((time.monotonic() - started) * 1000),
            layers=launch.layers,
        )
    via = launch.via
    run = supervise(
        proc,
        tracker=ProcessTracker(proc.pid, marker=None if via else marker),
        timeout_s=max(0.0, deadline - time.monotonic()),
        cancel=cancel,
        max_output_bytes=max_output_bytes,
        exclude=launch.is_wrapper(proc.pid) if via else None,
        done_fd=launch.done_fd,
        init_finished=launch.init_finished(proc.pid),
        members=launch.cgroup_pids if launch.cgroup_complete else None,
        walk=not launch.cgroup_sealed,
    )
    reported = _exit_status(run.status) if run.reason is None else None
    code = proc.returncode if reported is None else reported
    return CommandResult(
        exit_code=128 - code if code < 0 else code,
        stdout=run.stdout.text(),
        stderr=run.stderr.text(),
        stdout_truncated=run.stdout.truncated,
        stderr_truncated=run.stderr.truncated,
        timed_out=run.reason == "timeout",
        cancelled=run.reason == "cancel",
        killed_processes=run.killed,
        duration_ms=int((time.monotonic() - started) * 1000),
        layers=launch.layers,
        changes=post_run_check(launch.before),
    )
