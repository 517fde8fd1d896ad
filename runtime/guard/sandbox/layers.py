"""The command sandbox's layers: which isolation layers work here, and their command prefixes.

Layers, strongest first (``docs/security-commands.md`` says what each enforces):

- **bubblewrap** (``bwrap``): new network, PID, IPC and UTS namespaces and the allowlisted
  filesystem view of :mod:`runtime.guard.sandbox.view` (the system read-only, the project root
  and a per-call scratch directory writable, nothing of ``$HOME``, ``ROOST_HOME`` or the
  host's Unix sockets); everything dies with the namespace's init. The command tool runs
  nothing without it (:func:`require_confinement`).
- **the kernel's guards**, inside bubblewrap: no capabilities, ``no_new_privs``, the seccomp
  filter of :mod:`runtime.guard.sandbox.seccomp` (``bwrap --seccomp FD``, from
  :func:`kernel_filter_fd`), the kernel's control files read-only or masked, and sized
  tmpfs for ``/tmp``, ``/var/tmp`` and ``/run``.
- **cgroups** (:mod:`runtime.guard.sandbox.cgroups`): at most ``Limits.max_processes`` tasks, and
  ``Limits.memory_bytes`` of memory and ``Limits.cpu_cores`` of CPU, per run.
- **freezer cgroup**: a long-lived tool process (an MCP stdio server) runs only while a
  call is in flight; its whole tree is frozen between calls.
- **unshare** (util-linux): new network and PID namespaces (through a user namespace when
  not root), a fresh ``/proc``; no filesystem confinement.
- **always**: ``stdin`` closed, a new session, rlimits (CPU, address space, file size,
  open files, no core dumps; via ``prlimit`` or, without it, in the child before exec),
  the parent-death signal (``setpriv --pdeathsig``), and a psutil walk that kills every
  descendant, ``setsid`` grandchildren included (:mod:`runtime.guard.sandbox.proctree`).

:func:`probe_layers` finds out, by trying, which layers work on this machine (cached per
process); ``ROOST_SANDBOX_DISABLE=bwrap,unshare`` (any of ``bwrap``, ``unshare``,
``prlimit``, ``setpriv``, ``openat2``, ``cgroups``, ``seccomp``, ``freezer``) switches layers
off so fallbacks can be exercised. Without a network namespace, a command that must not reach the
network is refused with ``isolation_unavailable``: the sandbox fails closed.

Every tool process starts through the one launcher, :mod:`runtime.guard.sandbox.launcher`; running
one command to completion is :mod:`runtime.guard.sandbox.run`, a long-lived server
:mod:`runtime.guard.sandbox.server_process`.
"""

from __future__ import annotations

import copy
import functools
import os
import shutil
import subprocess
from collections.abc import Callable

import msgspec

from runtime.errors import ToolError
from runtime.guard.paths import openat2
from runtime.guard.sandbox import kernel_guards, seccomp
from runtime.guard.sandbox.freezer import probe_freezer
from runtime.guard.sandbox.kernel_guards import Layers
from runtime.guard.sandbox.protected import PROTECTED_IN_WRITABLE, protected_mounts
from runtime.guard.sandbox.view import View, view_argv

__all__ = [
    "DISABLE_ENV",
    "FORCE_NO_OPENAT2_ENV",
    "PROTECTED_IN_WRITABLE",
    "View",
    "bwrap_argv",
    "disabled_layers",
    "executables",
    "kernel_filter_fd",
    "probe_layers",
    "protected_mounts",
    "require_confinement",
    "require_isolation",
]

DISABLE_ENV = "ROOST_SANDBOX_DISABLE"
"""Comma-separated layer names to switch off (``bwrap``, ``unshare``, ``prlimit``, ...)."""

FORCE_NO_OPENAT2_ENV = "ROOST_FORCE_NO_OPENAT2"
"""Set to ``1`` to switch ``openat2`` off (the workspace then uses the ``O_NOFOLLOW`` walk)."""

PROBE_TIMEOUT_S = 10.0
"""How long one probe command may take."""

_BASE_PATH = "/usr/local/bin:/usr/bin:/bin"


def disabled_layers() -> frozenset[str]:
    """Layer names switched off by ``ROOST_SANDBOX_DISABLE`` (and ``ROOST_FORCE_NO_OPENAT2``).

    The workspace (:class:`runtime.guard.workspace.Workspace`) reads the same set, so the
    layers a project reports are the layers its tools use.
    """
    raw = os.environ.get(DISABLE_ENV, "")
    names = {part.strip().lower() for part in raw.split(",") if part.strip()}
    if os.environ.get(FORCE_NO_OPENAT2_ENV) == "1":
        names.add("openat2")
    return frozenset(names)


def probe_layers() -> Layers:
    """Return which isolation layers work here, found by trying them (cached per process).

    ``{"bwrap": {"available", "detail"}, "unshare": {..., "user_namespace"},
    "netns": {"available", "via"}, "pidns": {...}, "mount_isolation": {...},
    "openat2": {...}, "rlimits": {"available", "via"}, "pdeathsig": {...},
    "process_group_kill": {...}, "process_tree_kill": {...}, "pids_limit": {...},
    "memory_limit": {...}, "cpu_limit": {...}, "seccomp": {...}, "no_new_privs": {...},
    "proc_masks": {...}, "tmpfs_size": {...}}``. An unavailable layer's ``detail`` says why
    and what a command may then do that it otherwise could not.
    """
    return copy.deepcopy(_probe(disabled_layers()))


def _run_probe(argv: list[str]) -> tuple[bool, str]:
    try:
        done = subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=PROBE_TIMEOUT_S,
            env={"PATH": _BASE_PATH, "LANG": "C.UTF-8"},
            cwd="/",
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as e:
        return False, f"{type(e).__name__}: {e}"
    if done.returncode == 0:
        return True, "ok"
    message = done.stderr.decode("utf-8", "replace").strip().splitlines()
    return False, (message[-1] if message else f"exit status {done.returncode}")[:200]


def _openat2() -> tuple[bool, str]:
    ok = openat2.available()
    return ok, "ok" if ok else "syscall refused"


def _absolute_path() -> str:
    entries = os.environ.get("PATH", "").split(os.pathsep)
    return os.pathsep.join(e for e in entries if os.path.isabs(e))


@functools.lru_cache(maxsize=8)
def executables() -> dict[str, str]:
    """Absolute paths of the helper programs (bwrap, unshare, ...), system directories first.

    Then the absolute entries of ``PATH``; never a relative one.
    """
    found: dict[str, str] = {}
    for name in ("bwrap", "unshare", "prlimit", "setpriv"):
        # The system's directories first, then only absolute PATH entries: a PATH entry
        # inside a project root (an activated project venv, "node_modules/.bin", ".")
        # would let a command plant the program the daemon runs outside every sandbox.
        path = shutil.which(name, path=_BASE_PATH) or shutil.which(name, path=_absolute_path())
        if path:
            found[name] = path
    return found


@functools.lru_cache(maxsize=4)
def _bwrap_options(bwrap: str) -> frozenset[str]:
    """The options ``bwrap --help`` lists (``--size`` came with 0.8.0)."""
    try:
        done = subprocess.run(
            [bwrap, "--help"], capture_output=True, text=True, timeout=PROBE_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return frozenset()
    return frozenset(w for w in done.stdout.split() if w.startswith("--"))


def kernel_filter_fd() -> int | None:
    """A memory file holding the seccomp program for ``bwrap --seccomp FD``, or ``None``.

    ``None`` where the ``seccomp`` layer is unavailable (:func:`probe_layers`). The caller
    passes the descriptor to bubblewrap and closes it once bubblewrap has started; the
    program applies for the life of the process, so a long-lived server takes it the same way.
    """
    if not probe_layers()["seccomp"]["available"]:
        return None
    return seccomp.program_fd()


def bwrap_argv(allow_network: bool, view: View) -> list[str]:
    """Build the bubblewrap prefix: namespaces and the filesystem view of ``view``.

    New PID, IPC and UTS namespaces (and a network one unless allowed), no capabilities, a
    new session, and the allowlisted view of :mod:`runtime.guard.sandbox.view`: the system's
    read-only runtime, the writable paths with their protected places read-only again, and
    nothing of ``$HOME``, ``ROOST_HOME``, ``/run`` or other users' files.
    """
    bwrap = executables()["bwrap"]
    if view.tmpfs_bytes and "--size" not in _bwrap_options(bwrap):
        view = msgspec.structs.replace(view, tmpfs_bytes=None)  # an older bwrap: unsized
    argv = [bwrap, "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
    argv += ["--unshare-pid", "--unshare-ipc", "--unshare-uts"]
    if not allow_network:
        argv.append("--unshare-net")
    argv += view_argv(view)
    return [*argv, "--chdir", view.cwd, "--"]


def unshare_argv(allow_network: bool, user_namespace: bool, drop_caps: bool) -> list[str]:
    """Build the unshare prefix: PID (and unless allowed, network) namespaces, a fresh /proc.

    With ``drop_caps``, ``setpriv`` then empties the capability sets and sets
    ``no_new_privs`` inside the namespaces, so a root command cannot unmount ``/proc`` or
    join the host's network namespace again.
    """
    argv = [executables()["unshare"]]
    if user_namespace:
        argv += ["--user", "--map-root-user"]
    if not allow_network:
        argv.append("--net")
    argv += ["--pid", "--fork", "--kill-child", "--mount-proc", "--"]
    if drop_caps:
        argv += [executables()["setpriv"], "--no-new-privs", "--bounding-set=-all"]
        argv += ["--inh-caps=-all", "--"]
    return argv


@functools.lru_cache(maxsize=8)
def _probe(disabled: frozenset[str]) -> Layers:
    exe = executables()
    layers: Layers = {}

    def entry(name: str, works: Callable[[], tuple[bool, str]], program: bool = True) -> bool:
        """``name``'s entry: off for the first refusal that holds, else what ``works`` finds."""
        refusals = (
            (name in disabled, f"disabled by {DISABLE_ENV}"),
            (program and name not in exe, f"{name} not found on PATH"),
        )
        for refused, why in refusals:
            if refused:
                layers[name] = {"available": False, "detail": why}
                return False
        ok, detail = works()
        layers[name] = {"available": ok, "detail": detail}
        return ok

    probe_view = View(writable=(), cwd="/")
    bwrap_ok = entry("bwrap", lambda: _run_probe([*bwrap_argv(False, probe_view), "/bin/true"]))
    user_ns = False

    drop_caps = "setpriv" in exe and "setpriv" not in disabled

    def try_unshare() -> tuple[bool, str]:
        nonlocal user_ns
        user_ns = os.geteuid() != 0  # root: no user namespace, capabilities dropped instead
        if not user_ns and not drop_caps:
            return False, "as root, unshare needs setpriv to drop capabilities"
        return _run_probe([*unshare_argv(False, user_ns, drop_caps), "/bin/true"])

    unshare_ok = entry("unshare", try_unshare)
    layers["unshare"]["user_namespace"] = user_ns and unshare_ok
    layers["unshare"]["drop_caps"] = drop_caps and unshare_ok
    via = "bwrap" if bwrap_ok else "unshare" if unshare_ok else None
    layers["netns"] = {"available": via is not None, "via": via}
    layers["pidns"] = {"available": via is not None, "via": via}
    layers["mount_isolation"] = {"available": bwrap_ok, "via": "bwrap" if bwrap_ok else None}
    entry("openat2", _openat2, program=False)
    prlimit = "prlimit" in exe and "prlimit" not in disabled
    layers["rlimits"] = {
        "available": True,
        "via": "prlimit" if prlimit else "preexec",
        "detail": "cpu, address space, file size, open files, no core dumps",
    }
    setpriv = "setpriv" in exe and "setpriv" not in disabled
    layers["pdeathsig"] = {"available": setpriv, "via": "setpriv" if setpriv else None}
    guard_view = View(writable=(), cwd="/", tmpfs_bytes=kernel_guards.PROBE_TMPFS_BYTES)
    prefix = bwrap_argv(False, guard_view) if bwrap_ok else None
    layers.update(kernel_guards.probe(disabled, f"disabled by {DISABLE_ENV}", prefix))
    if "cgroups" in disabled or "freezer" in disabled:
        layers["freezer"] = {
            "available": False,
            "via": None,
            "detail": f"disabled by {DISABLE_ENV}",
        }
    else:
        ok, detail, cg_via = probe_freezer()
        layers["freezer"] = {"available": ok, "via": cg_via, "detail": detail}
    layers["process_group_kill"] = {"available": True, "detail": "new session per command"}
    layers["process_tree_kill"] = {"available": True, "detail": "psutil descendant walk"}
    return layers


def require_isolation(layers: Layers, allow_network: bool) -> str | None:
    """Pick the namespace layer for a run; raise ``isolation_unavailable`` if none and needed."""
    via = layers["netns"]["via"]
    if via is None and not allow_network:
        raise ToolError(
            "isolation_unavailable",
            "no network namespace can be created here (bwrap: "
            f"{layers['bwrap']['detail']}; unshare: {layers['unshare']['detail']}); "
            "install bubblewrap, enable user namespaces, or set network_egress_policy=allow",
            layer="netns",
        )
    return str(via) if via else None


def require_confinement(layers: Layers) -> None:
    """Refuse a tool's command where bubblewrap's filesystem view cannot be built.

    Without it a command would see ``ROOST_HOME``, ``$HOME`` and the host's Unix sockets
    (the trust boundary of ``docs/security.md``), so it is not run at all:
    ``isolation_unavailable {layer: mount_isolation}``.
    """
    if not layers["mount_isolation"]["available"]:
        raise ToolError(
            "isolation_unavailable",
            "commands run only inside bubblewrap's filesystem view, which cannot be made "
            f"here (bwrap: {layers['bwrap']['detail']}); install bubblewrap and allow "
            "user namespaces",
            layer="mount_isolation",
        )
