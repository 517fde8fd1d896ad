"""The one launcher: every tool process starts here, with the same view, limits and checks.

Commands (``command.run``), asset commands (``command.run.<name>``) and MCP stdio servers
(``mcp_servers``) all start through :func:`prepare`, which builds everything one process
gets from the sandbox:

- its cgroups (:mod:`runtime.guard.sandbox.cgroups`), and for a long-lived process
  (``shape="serve"``) a freezer cgroup (:mod:`runtime.guard.sandbox.freezer`);
- its prefix: the cgroup join, the rlimits (the join shell's ``ulimit``, or ``prlimit`` for
  a value the shell cannot express exactly), the parent-death signal
  (bubblewrap's own ``--die-with-parent``; ``setpriv --pdeathsig`` where there is no
  bubblewrap), bubblewrap with the view of :mod:`runtime.guard.sandbox.view` passed
  through a memory file (``--args``), and for a run to completion (``shape="run"``) the
  init shell that runs the command and tells the daemon on a pipe that the command
  exited (:data:`INIT_SCRIPT`), so the daemon counts what is left itself;
- the descriptors it inherits (the ``--args`` memory file, the pipe);
- what the post-run check compares with (:func:`watch`), and the state of what the view
  hides (``view.view_state``): a long-lived process whose view went stale starts afresh.

Two shapes use it: :func:`runtime.guard.sandbox.run.run_command` (run to completion) and
:class:`runtime.guard.sandbox.server_process.ServerProcess` (long-lived, stdio pipes). Both end
with :func:`post_run_check`, the one place a check of what a tool process left in the
project plugs in (``docs/security.md``, "One launcher").
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, Any, Literal

import msgspec
import psutil

from runtime.errors import ToolError
from runtime.guard.home.statedir import project_umask
from runtime.guard.paths.rules import SensitiveRules
from runtime.guard.review import leftovers
from runtime.guard.review.leftovers import ChangeReport
from runtime.guard.review.rootscan import scan_paths
from runtime.guard.review.run_ledger import RunLabel
from runtime.guard.sandbox import cgroupfs, cgroups
from runtime.guard.sandbox.freezer import FreezerCgroup
from runtime.guard.sandbox.kernel_guards import Layers
from runtime.guard.sandbox.layers import (
    View,
    bwrap_argv,
    executables,
    kernel_filter_fd,
    probe_layers,
    require_isolation,
    unshare_argv,
)
from runtime.guard.sandbox.limits import (
    Limits,
    cgroup_layers,
    cgroup_limits,
    rlimit_steps,
    rlimit_values,
)
from runtime.guard.sandbox.protected import PROTECTED_IN_WRITABLE, hooks_dirs
from runtime.guard.sandbox.view import view_state
from runtime.logging import get_logger

log = get_logger("runtime.guard.sandbox.layers")

__all__ = [
    "INIT_NAME",
    "INIT_SCRIPT",
    "Launch",
    "Limits",
    "Shape",
    "kernel_guard_layers",
    "post_run_check",
    "prepare",
    "watch",
]

INIT_NAME = "roost-sandbox-init"
"""``$0`` of the shell that runs a command inside a namespace."""

# Its stdin is the pipe's write end: it moves it to fd 3 and gives the command /dev/null,
# runs "$@" without the pipe, reports the exit status on it (the daemon's signal that the
# command exited), then waits to be killed: the namespace, and whatever the command left
# in it, lives until the daemon has stopped and counted it.
INIT_SCRIPT = (
    'exec 3>&0 0</dev/null; "$@" 3>&-; rc=$?; echo "$rc" >&3; exec 3>&-; exec sleep infinity'
)
"""The init shell's script (``sh -c INIT_SCRIPT roost-sandbox-init ARGV...``)."""

_INIT_CHAIN: dict[str | None, tuple[int, ...]] = {"bwrap": (1, 2), "unshare": (1,), None: (1,)}
"""The namespace PIDs from the started process down to the init shell: under bubblewrap its
init (1), then the shell (2); under ``unshare`` the shell is PID 1 (no namespace: never asked)."""

Shape = Literal["run", "serve"]
"""``run``: to completion under the init shell; ``serve``: long-lived, frozen between calls."""


def kernel_guard_layers(layers: Layers, view: View) -> list[str]:
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


def _ns_pid(pid: int) -> int | None:
    """``pid``'s number in its innermost PID namespace (``NSpid``, the kernel's), or None."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"NSpid:"):
                    return int(line.split()[-1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def _children(pid: int) -> list[int]:
    """The children of ``pid``'s main thread (the kernel's list; bwrap is single-threaded)."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children", "rb") as f:
            return [int(x) for x in f.read().split()]
    except (OSError, ValueError):
        return []


def watch(
    view: View, root: str | None, label: RunLabel | None = None
) -> leftovers.RootWatch | None:
    """What the post-run check compares with: a watch on ``root`` from before the process starts.

    The watch (:func:`runtime.guard.review.leftovers.begin`) writes the run's durable record;
    ``view.scan`` is the walk the view is built from (made here when missing).
    """
    if root is None:
        return None
    rules = SensitiveRules(view.sensitive_deny, view.sensitive_allow)
    scan = view.scan if view.scan is not None else scan_paths(view.writable, rules)
    protected = [*view.hooks, *(os.path.join(root, p) for p in PROTECTED_IN_WRITABLE)]
    return leftovers.begin(root, scan, protected=protected, rules=rules, label=label)


def post_run_check(
    before: leftovers.RootWatch | None, *, keep: bool = False
) -> ChangeReport | None:
    """Review what the tool process changed in the root and quarantine what may not stay.

    ``keep`` for a long-lived process after one of its calls (the watch goes on);
    :meth:`runtime.guard.review.leftovers.RootWatch.review`.
    """
    return None if before is None else before.review(keep=keep)


def _command_umask() -> int:
    """The user's umask for the tool (the daemon itself runs with 077), or -1: keep ours."""
    umask = project_umask()
    return -1 if umask is None else umask


@dataclass
class Launch:
    """One prepared tool process: its prefix, descriptors, cgroups and post-run baseline."""

    shape: Shape
    """``run`` or ``serve``."""
    view: View
    """The view it sees (with the ``core.hooksPath`` directories filled in)."""
    via: str | None
    """The namespace layer (``bwrap``, ``unshare``) or None."""
    prefix: list[str] = field(default_factory=list)
    """What runs before the tool's own argv."""
    layers: list[str] = field(default_factory=list)
    """Layers applied, for the result."""
    pass_fds: tuple[int, ...] = ()
    """Descriptors the process inherits."""
    preexec: Callable[[], None] | None = None
    """Sets the rlimits in the child where ``prlimit`` is missing."""
    pids: cgroups.ToolCgroup | None = None
    """Its cgroups with limits (``pids``, and ``memory``/``cpu`` where they can be had)."""
    freezer: FreezerCgroup | None = None
    """Its freezer cgroup (``serve`` only)."""
    groups: list[cgroups.ToolCgroup | FreezerCgroup] = field(default_factory=list)
    """The cgroups it joins (of ``pids`` and ``freezer``, those made), in that order."""
    before: leftovers.RootWatch | None = None
    """The post-run check's watch (:func:`watch`), started before the process starts."""
    hidden: frozenset[tuple[str, int, int, int]] = frozenset()
    """What the view hides and protects, as it was when the view was built (``serve``)."""
    done_fd: int | None = None
    """The daemon's end of the init shell's pipe (``run`` in a namespace)."""
    init_stdin: int | None = None
    """The init shell's stdin: the pipe's write end (``run`` in a namespace)."""
    _child_fds: list[int] = field(default_factory=list)
    """Descriptors only the child needs: closed once it is spawned."""
    _own_fds: list[int] = field(default_factory=list)
    """The daemon's own ends (``done_fd``): closed by :meth:`close`."""
    _warm_stop: threading.Event = field(default_factory=threading.Event)
    """Ends the cgroup lock's warm-up (``cgroupfs.keep_warm``) if the join has not yet."""

    def spawn(
        self,
        argv: Sequence[str],
        *,
        cwd: str,
        env: Mapping[str, str],
        stdin: int | IO[Any] | None,
        stdout: int | IO[Any] | None,
        stderr: int | IO[Any] | None,
    ) -> subprocess.Popen[bytes]:
        """Start ``argv`` behind the prefix; the child's ends of the descriptors are closed.

        Under the init shell, ``stdin`` is replaced: the shell gets the pipe and gives the
        command ``/dev/null``.
        """
        try:
            return subprocess.Popen(
                [*self.prefix, *argv],
                stdin=stdin if self.init_stdin is None else self.init_stdin,
                stdout=stdout,
                stderr=stderr,
                cwd=cwd,
                env=dict(env),
                umask=_command_umask(),
                start_new_session=True,
                pass_fds=self.pass_fds,
                preexec_fn=self.preexec,  # noqa: PLW1509  (only without prlimit; rlimits only)
            )
        finally:
            self._close_child_fds()

    def init_finished(self, root_pid: int) -> Callable[[], bool]:
        """Whether the init shell has finished waiting for the command (it then runs sleep).

        A line on the pipe ends the run only then: a command that writes one itself (through
        ``/proc``) does not end its run early. The init shell is found by the kernel's
        numbers (PID 2 under bubblewrap, a child of the namespace's PID 1; PID 1 under
        unshare), and judged by its executable, which no other process can change.
        """
        found: list[int] = []

        def finished() -> bool:
            if not found:
                firsts = [root_pid]
                for ns_pid in _INIT_CHAIN[self.via]:
                    firsts = [c for f in firsts for c in _children(f) if _ns_pid(c) == ns_pid]
                if not firsts:
                    return True  # nothing left to wait for
                found.append(firsts[0])
            try:  # read afresh each time: it changes when the init shell execs sleep
                return os.path.basename(os.readlink(f"/proc/{found[0]}/exe")) == "sleep"
            except OSError:
                return True  # gone: the run is over anyway

        return finished

    def is_wrapper(self, root_pid: int) -> Callable[[psutil.Process], bool]:
        """Tell the sandbox's own processes (bwrap, its init, the init shell) from the tool's.

        Judged by the kernel's numbers, never by a command line a tool can set: the process
        that was started (``root_pid``), and PID 1 (and under bubblewrap PID 2, the init
        shell) of the namespace.
        """
        own = set(_INIT_CHAIN[self.via])

        def test(proc: psutil.Process) -> bool:
            if proc.pid == root_pid:
                return True
            return self.via is not None and _ns_pid(proc.pid) in own

        return test

    @property
    def cgroup_complete(self) -> bool:
        """Whether the ``pids`` cgroup holds every process of the tool (it joined before exec)."""
        return self.pids is not None

    @property
    def cgroup_sealed(self) -> bool:
        """Whether no process of the tool can leave the ``pids`` cgroup it joined before exec.

        Under bubblewrap: no capabilities, ``/sys`` (and the cgroup filesystem in it)
        read-only, every mount, ``unshare`` and ``setns`` refused by the seccomp filter; a
        process moves only by writing a ``cgroup.procs`` file, and none is writable there.
        The cgroup then lists every process of the tool, and a walk of ``/proc`` for its
        descendants finds nothing more.
        """
        return self.cgroup_complete and self.via == "bwrap" and "seccomp" in self.layers

    def cgroup_pids(self) -> list[int]:
        """Every process in the tool's cgroups now."""
        return sorted({pid for group in self.groups for pid in group.pids()})

    def _close_child_fds(self) -> None:
        """The child's ends (the ``--args`` and filter memory files, the init shell's stdin)."""
        _close_all(self._child_fds)

    def close(self) -> None:
        """Kill what is left in the cgroups, remove them, close every descriptor.

        A run whose post-run check has not run (it never started) is reviewed here.
        """
        self._warm_stop.set()
        self._close_child_fds()
        _close_all(self._own_fds)
        self.done_fd = None
        for group in reversed(self.groups):  # the freezer (thawing it) before the limits
            group.close()
        self.groups = []
        self.freezer = self.pids = None
        post_run_check(self.before)  # once: a second call returns the first report


def prepare(
    *,
    view: View,
    allow_network: bool,
    limits: Limits,
    timeout_s: float,
    shape: Shape = "run",
    root: str | None = None,
    label: RunLabel | None = None,
) -> Launch:
    """Build everything one tool process gets from the sandbox (see the module docstring).

    Raises ``ToolError("isolation_unavailable")`` when the network must be denied and no
    namespace can be made, or when the view cannot be built. The caller starts the process
    with :meth:`Launch.spawn` and always calls :meth:`Launch.close`. ``root`` (default: the
    first writable path) is watched for the post-run check; ``label`` names the run's
    durable record.
    """
    layers = probe_layers()
    via = require_isolation(layers, allow_network)
    launch = Launch(shape=shape, view=view, via=via, layers=["rlimits"])
    try:
        review_root = root or (view.writable[0] if view.writable else None)
        _prepare(launch, layers, allow_network, limits, timeout_s, root=review_root, label=label)
    except BaseException:
        launch.close()
        raise
    return launch


def _prepare(
    launch: Launch,
    layers: Layers,
    allow_network: bool,
    limits: Limits,
    timeout_s: float,
    *,
    root: str | None,
    label: RunLabel | None,
) -> None:
    groups = launch.groups
    if layers["pids_limit"]["available"]:
        try:
            launch.pids = cgroups.ToolCgroup.create(cgroup_limits(limits, layers))
        except OSError as e:
            log.warning("pids_cgroup_failed", error=str(e))
        else:
            groups.append(launch.pids)
            launch.layers += cgroup_layers(launch.pids)
            if launch.pids.skipped:
                log.warning("cgroup_limits_skipped", skipped=launch.pids.skipped)
    if launch.shape == "serve" and layers["freezer"]["available"]:
        try:
            launch.freezer = FreezerCgroup.create()
        except OSError as e:
            log.warning("freezer_cgroup_failed", error=str(e))
        else:
            groups.append(launch.freezer)
            launch.layers.append("freezer")
    if launch.pids is not None:  # after the cgroups' mkdir, which needs the lock's mutex
        cgroupfs.keep_warm(
            os.path.dirname(launch.pids.path), lambda: bool(launch.cgroup_pids()), launch._warm_stop
        )
    script, argv, launch.preexec = rlimit_steps(
        rlimit_values(limits, timeout_s), layers["rlimits"]["via"]
    )
    if groups or script is not None:
        launch.prefix += cgroupfs.join_argv(*groups, first=script)
    launch.prefix += argv
    _NAMESPACES[launch.via](launch, layers, allow_network, root, label)
    launch.layers += ["process_group_kill", "process_tree_kill"]


def _close_all(fds: list[int]) -> None:
    """Close each of ``fds`` (those already closed too) and forget them."""
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)
    fds.clear()


def _in_bwrap(
    launch: Launch, layers: Layers, allow_network: bool, root: str | None, label: RunLabel | None
) -> None:
    """Bubblewrap with the view passed through a memory file, and the kernel's guards."""
    # bubblewrap's own --die-with-parent (``bwrap_argv``) sets the same parent-death
    # SIGKILL on itself and on the namespace's init: a setpriv exec is not needed.
    launch.layers.append("pdeathsig")
    view = launch.view
    rules = SensitiveRules(view.sensitive_deny, view.sensitive_allow)
    try:
        scan = scan_paths(view.writable, rules)  # one walk: the view's and the review's
        view = launch.view = msgspec.structs.replace(
            view, hooks=tuple(hooks_dirs(view.writable)), scan=scan
        )
        launch.before = watch(view, root, label)
        if launch.shape == "serve":  # before the view is built: a later change shows
            launch.hidden = view_state(view)
        bwrap = bwrap_argv(allow_network, view)
        filter_fd = kernel_filter_fd()
        guards: list[str] = []
        if filter_fd is not None:
            launch._child_fds.append(filter_fd)
            guards = ["--seccomp", str(filter_fd)]
        # The view's arguments go through a file descriptor, so the tool cannot read
        # which paths are hidden from /proc/1/cmdline (bwrap).
        args_fd = _args_fd([*guards, *bwrap[1:-1]])
    except OverflowError as e:
        raise ToolError(
            "isolation_unavailable",
            f"the view cannot be built: {e}; sensitive files could not all be hidden, "
            "so the process is not started",
            layer="mount_isolation",
        ) from e
    launch._child_fds.append(args_fd)
    launch.prefix += [bwrap[0], "--args", str(args_fd), "--"]
    launch.layers += ["bwrap", "mount_isolation", *kernel_guard_layers(layers, view)]
    _in_namespace(launch, allow_network)


def _in_unshare(
    launch: Launch, layers: Layers, allow_network: bool, root: str | None, label: RunLabel | None
) -> None:
    """util-linux ``unshare``: network and PID namespaces, no filesystem view."""
    _pdeathsig(launch, layers)
    unshare = layers["unshare"]
    launch.prefix += unshare_argv(
        allow_network, bool(unshare["user_namespace"]), bool(unshare["drop_caps"])
    )
    launch.layers.append("unshare")
    _in_namespace(launch, allow_network)


def _no_namespace(
    launch: Launch, layers: Layers, allow_network: bool, root: str | None, label: RunLabel | None
) -> None:
    """No namespace could be made (the network is allowed): the parent-death signal only."""
    _pdeathsig(launch, layers)


def _pdeathsig(launch: Launch, layers: Layers) -> None:
    """``setpriv --pdeathsig``, where it can be had."""
    if layers["pdeathsig"]["available"]:
        launch.prefix += [executables()["setpriv"], "--pdeathsig", "KILL", "--"]
        launch.layers.append("pdeathsig")


def _in_namespace(launch: Launch, allow_network: bool) -> None:
    """The namespaces' layers, and for a run to completion the init shell and its pipe."""
    launch.layers += ["pidns"] if allow_network else ["netns", "pidns"]
    launch.pass_fds = tuple(launch._child_fds)  # the init shell's stdin is not among them
    if launch.shape == "run":
        read_end, write_end = os.pipe2(os.O_CLOEXEC)
        launch.done_fd, launch.init_stdin = read_end, write_end
        launch._own_fds.append(read_end)
        launch._child_fds.append(write_end)
        launch.prefix += ["/bin/sh", "-c", INIT_SCRIPT, INIT_NAME]


_NAMESPACES: dict[
    str | None, Callable[[Launch, Layers, bool, str | None, RunLabel | None], None]
] = {
    "bwrap": _in_bwrap,
    "unshare": _in_unshare,
    None: _no_namespace,
}
"""How a tool process is put in each namespace layer (``require_isolation``'s choice)."""
