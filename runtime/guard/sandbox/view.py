"""What a command sees: the filesystem view bubblewrap builds for one run.

The view is an allowlist, not a read-only copy of the host (``docs/security.md``, "Trust
boundary"). It starts from an empty root and adds, in this order:

1. the system's read-only runtime: ``/usr`` (and the ``/bin``, ``/lib``, ... links or
   directories next to it) and ``/etc`` minus its secrets (every entry other users cannot
   read, such as ``/etc/shadow`` and SSH host keys, is hidden), plus ``/sys``; a fresh
   ``/proc`` and a minimal ``/dev``; private, empty ``/tmp``, ``/var/tmp`` and ``/run``;
2. read-only paths the project names (``command_read_paths``) and the runtime's own
   interpreter when it lives outside ``/usr`` (a virtual environment, pyenv);
3. the writable paths (the project root, the call's scratch home);
4. inside them, the protected places bound read-only again: every ``.git`` at any depth
   (a directory, or a gitfile and the git directory it names when that is inside a bound
   path), ``.roost``, and a work-tree directory that ``core.hooksPath`` names. A command
   reads git (``status``, ``log``, ``diff``) but cannot write it, as in Codex CLI;
5. hidden last, so nothing above can uncover them: sensitive files inside the bound paths
   (``sensitive_path_denylist`` names, shown as empty ``/dev/null``), every listening host
   Unix socket found inside them (unless ``command_socket_allowlist`` names it), and
   Roost's own state (``ROOST_HOME``: sockets, journal, logs, spill files);
6. the view's root itself made read-only: it is bubblewrap's tmpfs, of the kernel's
   default size, so only the sized private directories take what a command writes
   outside the bound paths.

Not there at all: ``$HOME`` and every other user's files, ``/var``, ``/opt``, ``/srv``,
``/mnt``, ``/media``, ``/run`` and ``/var/run`` (so no host Unix socket: PostgreSQL's,
Docker's, D-Bus's), and ``ROOST_HOME`` wherever it is. Abstract Unix sockets stay behind
the network namespace (when egress is denied).

Step 4's places are found by :mod:`runtime.guard.sandbox.protected`, what step 5 hides by
:mod:`runtime.guard.sandbox.hidden`. What mounts cannot prevent (a new ``.git``, set-id or
special files, a new ``.roost``) is found after the run (:mod:`runtime.guard.review`).
"""

from __future__ import annotations

import functools
import os
import re
import stat
import sys
from collections.abc import Callable, Sequence

import msgspec

from runtime.guard.paths.rules import SensitiveRules
from runtime.guard.review.rootscan import RootScan, scan_paths
from runtime.guard.sandbox.hidden import etc_secrets, hidden_state, listening_sockets
from runtime.guard.sandbox.protected import hooks_dirs, protected_mounts, under_any

__all__ = [
    "KERNEL_FILESYSTEMS",
    "MASKED_PATHS",
    "PROC_READ_ONLY",
    "SYSTEM_PATHS",
    "SYSTEM_VISIBLE",
    "View",
    "kernel_masks_argv",
    "kernel_mounts",
    "view_argv",
    "view_state",
]

SYSTEM_PATHS: tuple[str, ...] = (
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
)
"""The system's runtime, bound read-only (a symlink such as ``/bin -> usr/bin`` stays one)."""

SYSTEM_VISIBLE: tuple[str, ...] = ("/usr", "/etc", "/sys", "/proc", "/dev")
"""Where the view shows the host's own files (read-only; /proc and /dev made afresh)."""

PRIVATE_DIRS: tuple[str, ...] = ("/tmp", "/var/tmp", "/run")
"""Empty, private directories in every view."""

PROC_READ_ONLY: tuple[str, ...] = (
    "/proc/sys",
    "/proc/sysrq-trigger",
    "/proc/irq",
    "/proc/bus",
    "/proc/fs",
)
"""Kernel control files bound read-only in the view (runc's and containerd's read-only paths):
``/proc/sys`` is where a root command would set ``kernel.core_pattern`` and have the kernel
run its program as host root."""

MASKED_PATHS: tuple[str, ...] = (
    "/proc/kcore",
    "/proc/keys",
    "/proc/key-users",
    "/proc/timer_list",
    "/proc/latency_stats",
    "/proc/sched_debug",
    "/proc/scsi",
    "/proc/acpi",
    "/proc/asound",
    "/sys/firmware",
    "/sys/devices/virtual/powercap",
)
"""Kernel files shown empty (runc's and containerd's masked paths): the kernel's memory, the
keyrings of every user, timers and scheduler state, firmware tables, power counters."""

KERNEL_FILESYSTEMS: frozenset[str] = frozenset(
    {"debugfs", "tracefs", "securityfs", "pstore", "bpf", "configfs", "fusectl", "efivarfs"}
)
"""Filesystems mounted under the host's ``/sys`` that the view shows empty: ``/sys`` is the
host's, bound read-only, so without this its debug, tracing, security-module, crash-log, BPF
and EFI mounts would come with it (a container runtime mounts a fresh ``sysfs`` instead)."""


class View(msgspec.Struct, frozen=True, kw_only=True):
    """Everything that shapes one run's filesystem view."""

    writable: tuple[str, ...]
    """Paths bound read-write (the project root, the scratch home), real paths."""
    cwd: str
    """The command's working directory."""
    read_only: tuple[str, ...] = ()
    """Extra host paths bound read-only (``command_read_paths``)."""
    sockets: tuple[str, ...] = ()
    """Host Unix sockets bound in (``command_socket_allowlist``)."""
    sensitive_deny: tuple[str, ...] = ()
    """``sensitive_path_denylist`` patterns: matching files inside the bound paths are hidden."""
    sensitive_allow: tuple[str, ...] = ()
    """``sensitive_path_allowlist`` patterns (exceptions)."""
    hooks: tuple[str, ...] = ()
    """``core.hooksPath`` directories inside the writable paths (:func:`hooks_dirs`)."""
    scan: RootScan | None = None
    """The writable paths' walk when the caller made it already (else :func:`view_argv` does)."""
    tmpfs_bytes: int | None = None
    """Size of each of the private ``/tmp``, ``/var/tmp`` and ``/run``; ``None``: the
    kernel's default (half the host's memory each)."""


def _identity(path: str) -> tuple[str, int, int, int] | None:
    """``(path, device, inode, ctime)`` of an entry (ctime 0 for a directory), not followed."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    changed = 0 if stat.S_ISDIR(st.st_mode) else st.st_ctime_ns
    return (path, st.st_dev, st.st_ino, changed)


def view_state(view: View) -> frozenset[tuple[str, int, int, int]]:
    """What a view built now would hide or protect inside its bound paths, by identity.

    The ``.git`` entries at any depth, the protected places (with the ``core.hooksPath`` directories
    git names now), the sensitive files and the listening sockets inside the bound paths,
    each as :func:`_identity`. A view's mounts are made once, when its process starts; a
    long-lived process compares this with the state at its start to know whether its view
    still hides what a command's view would hide now (a file created, replaced or renamed
    over since is not covered by a mount made before). Raises ``OverflowError`` as
    :func:`sensitive_files` does.
    """
    hooks = hooks_dirs(view.writable)
    bound = [*view.writable, *view.read_only]
    rules = SensitiveRules(view.sensitive_deny, view.sensitive_allow)
    scan = scan_paths(view.writable, rules)
    places = [
        *protected_mounts(view.writable, hooks, scan.git),
        *scan.sensitive,
        *(s for s in listening_sockets() if under_any(s, bound)),
    ]
    found = (_identity(p) for p in places)
    return frozenset(i for i in found if i is not None)


@functools.lru_cache(maxsize=4)
def _interpreter_dirs(prefix: str, base_prefix: str, executable: str) -> tuple[str, ...]:
    """The real directories of a Python (its prefixes, its executable's), per process."""
    places = {prefix, base_prefix, os.path.dirname(os.path.realpath(executable))}
    return tuple(sorted({os.path.realpath(p) for p in places}))


def _interpreter_places(visible: Sequence[str]) -> list[str]:
    """The runtime's own Python installation, where the view would otherwise not show it."""
    found: list[str] = []
    real = _interpreter_dirs(sys.prefix, sys.base_prefix, sys.executable)
    for place in real:  # sorted: a parent comes before what it holds
        if os.path.isdir(place) and not under_any(place, [*visible, *found]):
            found.append(place)
    return found


def _system_argv(tmpfs_bytes: int | None) -> list[str]:
    argv: list[str] = []
    for path in SYSTEM_PATHS:
        argv += _SYSTEM_MOUNTS.get(_file_type(path), _absent)(path)
    argv += ["--ro-bind", "/etc", "/etc", "--ro-bind-try", "/sys", "/sys"]
    argv += ["--proc", "/proc", "--dev", "/dev"]
    argv += kernel_masks_argv()
    for path in PRIVATE_DIRS:
        argv += ["--size", str(tmpfs_bytes)] if tmpfs_bytes else []
        argv += ["--tmpfs", path]
    if tmpfs_bytes:  # /dev is a tmpfs too: read-only, with a sized /dev/shm
        argv += ["--size", str(tmpfs_bytes), "--tmpfs", "/dev/shm", "--remount-ro", "/dev"]
    if os.path.islink("/var/run"):
        argv += ["--symlink", "../run", "/var/run"]
    return argv


def _file_type(path: str) -> int:
    """``path``'s file type (``stat.S_IFMT``), not following a link; 0 when it is missing."""
    try:
        return stat.S_IFMT(os.lstat(path).st_mode)
    except OSError:
        return 0


def _absent(path: str) -> list[str]:
    return []


_SYSTEM_MOUNTS: dict[int, Callable[[str], list[str]]] = {
    stat.S_IFLNK: lambda path: ["--symlink", os.readlink(path), path],
    stat.S_IFDIR: lambda path: ["--ro-bind", path, path],
}
"""How a system path of each file type is shown: a link stays one (``/bin -> usr/bin``), a
directory is bound read-only, anything else (or nothing) is left out."""


def kernel_masks_argv() -> list[str]:
    """The arguments making :data:`PROC_READ_ONLY` read-only and :data:`MASKED_PATHS` empty.

    They follow ``--proc /proc`` and ``/sys``; only the paths this kernel has are named.
    """
    argv: list[str] = []
    for paths, mount in ((PROC_READ_ONLY, _read_only), (MASKED_PATHS, _mask)):
        for path in paths:
            if os.path.lexists(path):
                argv += mount(path)
    for path in kernel_mounts():
        argv += ["--tmpfs", path, "--remount-ro", path]
    return argv


def kernel_mounts() -> list[str]:
    """Mount points under ``/sys`` of the :data:`KERNEL_FILESYSTEMS` (from ``mountinfo``)."""
    found: list[str] = []
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return found
    for line in lines:
        left, _, right = line.partition(" - ")
        fields, fstype = left.split(), right.split(" ", 1)[0]
        if len(fields) < 5 or fstype not in KERNEL_FILESYSTEMS:
            continue
        point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4])
        if point.startswith("/sys/") and os.path.isdir(point) and point not in found:
            found.append(point)
    return found


def _etc_links() -> list[str]:
    """``/etc`` symlinks (``resolv.conf``) whose regular-file targets the view would hide."""
    argv: list[str] = []
    try:  # the directory's own entry types: no lstat for each of its ~150 names
        with os.scandir("/etc") as entries:
            links = sorted(e.path for e in entries if e.is_symlink())
    except OSError:
        return argv
    for link in links:
        target = os.path.realpath(link)
        if os.path.isfile(target) and not under_any(target, SYSTEM_VISIBLE):
            argv += ["--ro-bind", target, target]
    return argv


def _read_only(path: str) -> list[str]:
    return ["--ro-bind", path, path]


def _mask(path: str) -> list[str]:
    if os.path.isdir(path) and not os.path.islink(path):
        return ["--tmpfs", path, "--remount-ro", path]
    return ["--ro-bind", "/dev/null", path]


def view_argv(view: View) -> list[str]:
    """The bubblewrap mount arguments for ``view`` (see the module docstring for the order).

    Raises ``OverflowError`` when the bound paths are too large to scan for sensitive files.
    """
    argv = _system_argv(view.tmpfs_bytes)
    visible = list(SYSTEM_VISIBLE)
    for path in view.read_only:
        if os.path.exists(path):
            argv += ["--ro-bind", path, path]
            visible.append(path)
    argv += _etc_links()
    for place in _interpreter_places([*visible, *view.writable]):
        argv += ["--ro-bind", place, place]
        visible.append(place)
    for secret in etc_secrets():  # after the read paths: a listed /etc cannot uncover them
        argv += _mask(secret)
    for path in view.writable:
        argv += ["--bind", path, path]
    if view.cwd != "/" and not under_any(view.cwd, [*view.writable, *visible]):
        argv += ["--ro-bind", view.cwd, view.cwd]
        visible.append(view.cwd)
    rules = SensitiveRules(view.sensitive_deny, view.sensitive_allow)
    scan = view.scan if view.scan is not None else scan_paths(view.writable, rules)
    for place in protected_mounts(view.writable, view.hooks, scan.git):
        argv += ["--ro-bind", place, place]  # a mount point cannot be renamed or removed
    bound = [*view.writable, *view.read_only]
    for path in scan.sensitive:
        argv += _mask(path)
    allowed = {os.path.realpath(s) for s in view.sockets}
    for sock in listening_sockets():
        if under_any(sock, [*bound, *visible]) and os.path.realpath(sock) not in allowed:
            argv += ["--ro-bind", "/dev/null", sock]
    for sock in sorted(allowed):
        if os.path.exists(sock):
            argv += ["--bind", sock, sock]
    for state in hidden_state():
        if under_any(state, [*bound, *visible]) and os.path.isdir(state):
            argv += ["--tmpfs", state, "--remount-ro", state]
    # Last: the view's own root is a tmpfs of the kernel's default size (half the host's
    # memory) that a root command could otherwise fill past every sized tmpfs.
    return [*argv, "--remount-ro", "/"]
