"""Running one command inside the sandbox's layers, and what it did.

:func:`run_command` picks the strongest layers :func:`runtime.guard.sandbox.probe_layers` found
(bubblewrap with the view of :mod:`runtime.guard.sandbox_view`, else ``unshare``), puts the
command in a ``pids`` cgroup (:mod:`runtime.guard.cgroups`) under its rlimits and the
parent-death signal, runs it as the child of an init shell that counts what it leaves behind,
and kills every process of it at its timeout, on cancel, or when it exits leaving some
(:mod:`runtime.guard.proctree`). The project root is watched from before the process starts
and reviewed once it is gone (:mod:`runtime.guard.leftovers`). It returns a
:class:`CommandResult`.

Why this module is long: a run's set-up steps (cgroups, rlimits, the view and its filter,
the watch on the root) and their undoing share one ``try``/``finally``, so that whatever
fails, every step taken is undone and the root is still reviewed.
"""

from __future__ import annotations

import functools
import math
import os
import resource
import shutil
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import msgspec
import psutil

from runtime.errors import ToolError
from runtime.guard import cgroups, leftovers
from runtime.guard.leftovers import ChangeReport
from runtime.guard.pathrules import SensitiveRules
from runtime.guard.proctree import MARKER_ENV, ProcessTracker, supervise
from runtime.guard.rootscan import RootScan, scan_paths
from runtime.guard.run_ledger import RunLabel
from runtime.guard.sandbox import (
    View,
    bwrap_argv,
    executables,
    kernel_filter_fd,
    probe_layers,
    require_isolation,
    unshare_argv,
)
from runtime.guard.sandbox_view import PROTECTED_IN_WRITABLE, hooks_dirs
from runtime.guard.statedir import project_umask
from runtime.logging import get_logger

log = get_logger("runtime.guard.sandbox")

__all__ = [
    "INIT_NAME",
    "CommandResult",
    "Limits",
    "cgroup_layers",
    "cgroup_limits",
    "kernel_guard_layers",
    "run_command",
]

INIT_NAME = "roost-sandbox-init"
"""``$0`` of the shell that runs a command inside a namespace and counts its leftovers."""


# Runs "$@" as the namespace's first process, then counts what it left behind (every pid
# in the namespace's /proc except init and itself) into the status file, so the runtime
# can report leftovers that the kernel kills when the namespace goes away.
INIT_SCRIPT = (
    'status=$1; shift; "$@"; rc=$?; n=0; '
    "for p in /proc/[0-9]*; do case ${p#/proc/} in 1|$$) ;; *) n=$((n+1)) ;; esac; done; "
    'echo "$n" > "$status"; exit "$rc"'
)
"""The init shell's script (``sh -c INIT_SCRIPT roost-sandbox-init STATUS_FILE ARGV...``)."""


class Limits(msgspec.Struct, frozen=True, kw_only=True):
    """Resource limits applied to every process of a command (``setrlimit``)."""

    cpu_seconds: int | None = None
    """CPU seconds per process; ``None``: the timeout rounded up, plus one."""
    address_space_bytes: int = 2 * 1024**3
    """Virtual memory per process (``RLIMIT_AS``)."""
    file_size_bytes: int = 1024**3
    """Largest file a process may write (``RLIMIT_FSIZE``)."""
    open_files: int = 1024
    """Open file descriptors per process (``RLIMIT_NOFILE``)."""
    max_processes: int = 512
    """Tasks (processes and threads) of the whole command at once (``pids`` cgroup)."""
    memory_bytes: int | None = None
    """Memory of the whole command, tmpfs pages included (``memory`` cgroup); ``None``: none."""
    cpu_cores: float | None = None
    """CPU of the whole command, in cores (``cpu`` cgroup quota); ``None``: none."""


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


def rlimit_values(limits: Limits, timeout_s: float) -> dict[int, tuple[int, int]]:
    """Compute the ``setrlimit`` values for a run: resource -> (soft, hard)."""
    cpu = limits.cpu_seconds or math.ceil(timeout_s) + 1
    wanted = {
        resource.RLIMIT_CPU: (cpu, cpu + 1),
        resource.RLIMIT_AS: (limits.address_space_bytes, limits.address_space_bytes),
        resource.RLIMIT_FSIZE: (limits.file_size_bytes, limits.file_size_bytes),
        resource.RLIMIT_NOFILE: (limits.open_files, limits.open_files),
        resource.RLIMIT_CORE: (0, 0),
    }
    values: dict[int, tuple[int, int]] = {}
    for which, (soft, hard) in wanted.items():
        current = resource.getrlimit(which)[1]  # an unprivileged process cannot raise it
        top = hard if current == resource.RLIM_INFINITY else min(hard, current)
        values[which] = (min(soft, top), top)
    return values


def prlimit_argv(values: Mapping[int, tuple[int, int]]) -> list[str]:
    """Build the ``prlimit`` prefix applying ``values``."""
    names = {
        resource.RLIMIT_CPU: "--cpu",
        resource.RLIMIT_AS: "--as",
        resource.RLIMIT_FSIZE: "--fsize",
        resource.RLIMIT_NOFILE: "--nofile",
        resource.RLIMIT_CORE: "--core",
    }
    return [
        executables()["prlimit"],
        *(f"{names[r]}={soft}:{hard}" for r, (soft, hard) in values.items()),
        "--",
    ]


def cgroup_limits(limits: Limits, layers: Mapping[str, Any]) -> cgroups.CgroupLimits:
    """The cgroup limits of a run: ``limits``, less those whose layer is unavailable here."""
    return cgroups.CgroupLimits(
        max_pids=limits.max_processes,
        memory_bytes=limits.memory_bytes if layers["memory_limit"]["available"] else None,
        cpu_cores=limits.cpu_cores if layers["cpu_limit"]["available"] else None,
    )


def cgroup_layers(group: cgroups.ToolCgroup) -> list[str]:
    """The layer names a run's cgroup applies (``pids_limit``, ``memory_limit``, ...)."""
    return [cgroups.LAYER_NAMES[c] for c in cgroups.CONTROLLERS if c in group.dirs]


def kernel_guard_layers(layers: Mapping[str, Any], view: View) -> list[str]:
    """The kernel guards a bubblewrap run under ``view`` gets (see ``probe_layers``)."""
    names = ["seccomp", "no_new_privs", "proc_masks"]
    if view.tmpfs_bytes:
        names.append("tmpfs_size")
    return [name for name in names if layers[name]["available"]]


def _args_fd(args: Sequence[str]) -> int:
    """A memory file holding ``args`` NUL-separated, at offset 0 (for ``bwrap --args``)."""
    fd = os.memfd_create("roost-bwrap-args")
    data = b"".join(os.fsencode(a) + b"\0" for a in args)
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _apply_rlimits(values: Mapping[int, tuple[int, int]]) -> None:
    """Set rlimits in the child before exec (used only when ``prlimit`` is missing)."""
    for which, limit in values.items():
        resource.setrlimit(which, limit)


def _wrapper_test(root_pid: int) -> Callable[[psutil.Process], bool]:
    """Tell the sandbox's own processes (bwrap, its init, the init shell) from the command's."""

    def is_wrapper(proc: psutil.Process) -> bool:
        if proc.pid == root_pid or INIT_NAME in proc.cmdline()[:4]:
            return True
        return proc.ppid() == root_pid and proc.name() == "bwrap"

    return is_wrapper


def _command_umask() -> int:
    """The user's umask for the command (the daemon itself runs with 077), or -1: keep ours."""
    umask = project_umask()
    return -1 if umask is None else umask


def _read_leftovers(path: str) -> int:
    try:
        with open(path, encoding="ascii") as f:
            return max(0, int(f.read().strip() or 0))
    except (OSError, ValueError):
        return 0


def _rules(view: View) -> SensitiveRules:
    return SensitiveRules(view.sensitive_deny, view.sensitive_allow)


def _scan(view: View) -> RootScan:
    """The writable paths' one walk (for the view and the review), or ``isolation_unavailable``."""
    try:
        return scan_paths(view.writable, _rules(view))
    except OverflowError as e:
        raise ToolError(
            "isolation_unavailable",
            f"the command's view cannot be built: {e}; sensitive files could "
            "not all be hidden, so the command is not run",
            layer="mount_isolation",
        ) from e


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
    :mod:`runtime.guard.sandbox_view`). ``root`` (default: the first writable path) is
    reviewed after the run (:mod:`runtime.guard.leftovers`; ``label`` names the run's
    durable record). With a ``pids`` cgroup the command and all its descendants may have
    at most ``limits.max_processes`` tasks. On timeout or ``cancel``
    every process of the command is killed; processes left behind by a command that
    exited are killed too. Raises ``ToolError("isolation_unavailable")`` when the network
    must be denied and no namespace can be made, or when the view cannot be built.
    """
    layers = probe_layers()
    via = require_isolation(layers, allow_network)
    view = view or View(writable=tuple(writable_paths), cwd=cwd)
    limits = limits or Limits()
    argv = ["/bin/sh", "-c", command] if isinstance(command, str) else [str(a) for a in command]
    values = rlimit_values(limits, timeout_s)
    prefix: list[str] = []
    used = ["rlimits"]
    preexec = None
    group: cgroups.ToolCgroup | None = None
    if layers["pids_limit"]["available"]:
        try:
            group = cgroups.ToolCgroup.create(cgroup_limits(limits, layers))
        except OSError as e:
            log.warning("pids_cgroup_failed", error=str(e))
        else:
            prefix += cgroups.join_argv(group)
            used += cgroup_layers(group)
            if group.skipped:
                log.warning("cgroup_limits_skipped", skipped=group.skipped)
    if layers["rlimits"]["via"] == "prlimit":
        prefix += prlimit_argv(values)
    else:
        preexec = functools.partial(_apply_rlimits, values)
    if layers["pdeathsig"]["available"]:
        prefix += [executables()["setpriv"], "--pdeathsig", "KILL", "--"]
        used.append("pdeathsig")
    status_dir = tempfile.mkdtemp(prefix="roost-status-") if via else None
    args_fd: int | None = None
    watch: leftovers.RootWatch | None = None
    filter_fd: int | None = None
    try:
        hooks = tuple(hooks_dirs(view.writable))
        scan = _scan(view)
        review_root = root or (view.writable[0] if view.writable else None)
        if review_root is not None:
            protected = [*hooks, *(os.path.join(review_root, p) for p in PROTECTED_IN_WRITABLE)]
            watch = leftovers.begin(
                review_root, scan, protected=protected, rules=_rules(view), label=label
            )
        if via and status_dir:
            if via == "bwrap":
                staged = msgspec.structs.replace(
                    view, writable=(*view.writable, status_dir), hooks=hooks, scan=scan
                )
                bwrap = bwrap_argv(allow_network, staged)
                filter_fd = kernel_filter_fd()
                guards = [] if filter_fd is None else ["--seccomp", str(filter_fd)]
                # The view's arguments go through a file descriptor, so the command
                # cannot read which paths are hidden from /proc/1/cmdline (bwrap).
                args_fd = _args_fd([*guards, *bwrap[1:-1]])
                prefix += [bwrap[0], "--args", str(args_fd), "--"]
                used += ["bwrap", "mount_isolation", *kernel_guard_layers(layers, staged)]
            else:
                unshare = layers["unshare"]
                prefix += unshare_argv(
                    allow_network, bool(unshare["user_namespace"]), bool(unshare["drop_caps"])
                )
                used.append("unshare")
            used += ["pidns"] if allow_network else ["netns", "pidns"]
            prefix += ["/bin/sh", "-c", INIT_SCRIPT, INIT_NAME, os.path.join(status_dir, "left")]
        used += ["process_group_kill", "process_tree_kill"]
        result = _run(
            argv=argv,
            prefix=prefix,
            preexec=preexec,
            cwd=cwd,
            env=env,
            via=via,
            status_dir=status_dir,
            used=used,
            timeout_s=timeout_s,
            cancel=cancel,
            max_output_bytes=max_output_bytes,
            pass_fds=tuple(fd for fd in (args_fd, filter_fd) if fd is not None),
        )
        if group is not None and group.oom_kills():
            result = msgspec.structs.replace(result, killed_by="memory_limit")
        if watch is None:
            return result
        return msgspec.structs.replace(result, changes=watch.review())
    finally:
        if watch is not None:
            watch.review()  # a run that failed to start is reviewed too (once)
        for fd in (args_fd, filter_fd):
            if fd is not None:
                os.close(fd)
        if status_dir:
            shutil.rmtree(status_dir, ignore_errors=True)
        if group is not None:
            group.close()


def _run(
    *,
    argv: list[str],
    prefix: list[str],
    preexec: Callable[[], None] | None,
    cwd: str,
    env: Mapping[str, str],
    via: str | None,
    status_dir: str | None,
    used: list[str],
    timeout_s: float,
    cancel: threading.Event | None,
    max_output_bytes: int,
    pass_fds: tuple[int, ...],
) -> CommandResult:
    marker = uuid.uuid4().hex
    started = time.monotonic()
    try:
        proc = subprocess.Popen(
            [*prefix, *argv],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env={**env, MARKER_ENV: marker},
            umask=_command_umask(),
            start_new_session=True,
            pass_fds=pass_fds,
            preexec_fn=preexec,  # noqa: PLW1509  (only without prlimit; sets rlimits only)
        )
    except OSError as e:
        return CommandResult(
            exit_code=126 if isinstance(e, PermissionError) else 127,
            stdout="",
            stderr=f"{argv[0]}: {e.strerror or e}\n",
            duration_ms=int((time.monotonic() - started) * 1000),
            layers=used,
        )
    status_file = os.path.join(status_dir, "left") if status_dir else None
    run = supervise(
        proc,
        tracker=ProcessTracker(proc.pid, marker=None if via else marker),
        timeout_s=timeout_s,
        cancel=cancel,
        max_output_bytes=max_output_bytes,
        exclude=_wrapper_test(proc.pid) if via else None,
        leftovers=(lambda: _read_leftovers(status_file)) if status_file else None,
    )
    code = proc.returncode
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
        layers=used,
    )
