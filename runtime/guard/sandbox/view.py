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

What mounts cannot prevent (a new ``.git`` or bare-repository shape, set-id files, special
files, a new ``.roost``) is found after the run by :mod:`runtime.guard.review.leftovers`; the one
walk both need is :mod:`runtime.guard.review.rootscan`'s.
"""

from __future__ import annotations

import functools
import os
import re
import stat
import sys
import time
from collections.abc import Iterable, Sequence

import msgspec

from runtime.errors import ToolError
from runtime.guard.home import roost_home
from runtime.guard.paths.rules import SensitiveRules
from runtime.guard.paths.safe_read import read_regular
from runtime.guard.review.git_probe import GitProbeError, hooks_paths
from runtime.guard.review.rootscan import MAX_SCAN_ENTRIES, RootScan, scan_paths

__all__ = [
    "KERNEL_FILESYSTEMS",
    "MASKED_PATHS",
    "MAX_SCAN_ENTRIES",
    "PROC_READ_ONLY",
    "ROOST_STATE_ENV",
    "SYSTEM_PATHS",
    "SYSTEM_VISIBLE",
    "View",
    "etc_secrets",
    "git_places",
    "hidden_state",
    "hooks_dirs",
    "kernel_masks_argv",
    "kernel_mounts",
    "listening_sockets",
    "protected_mounts",
    "sensitive_files",
    "view_argv",
    "view_state",
]

ROOST_STATE_ENV = "ROOST_SANDBOX_HIDE"
"""``os.pathsep``-separated extra directories to hide from commands (operators, tests)."""

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

PROTECTED_IN_WRITABLE: tuple[str, ...] = (".roost",)
"""Places at the top of a writable path that are bound read-only again (besides ``.git``)."""

GITFILE_MAX_BYTES = 4096
"""Most of a gitfile (``gitdir: PATH``) read to find the git directory it names."""

_ETC_CACHE_S = 60.0


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


def hidden_state() -> list[str]:
    """Roost's state directories hidden from commands (``guard.home.roost_home``, the env)."""
    extra = [p for p in os.environ.get(ROOST_STATE_ENV, "").split(os.pathsep) if p]
    return sorted({*roost_home.hidden_places(), *(os.path.realpath(p) for p in extra)})


def _inside(path: str, parent: str) -> bool:
    return os.path.commonpath([path, parent]) == parent


def _under_any(path: str, parents: Iterable[str]) -> bool:
    return any(_inside(path, p) for p in parents)


@functools.lru_cache(maxsize=1)
def _etc_secrets_at(bucket: int) -> tuple[str, ...]:
    del bucket  # the cache key: the list is recomputed once a minute
    found: list[str] = []
    for top, dirs, files in os.walk("/etc", onerror=lambda e: None):
        keep: list[str] = []
        for name in dirs:
            path = os.path.join(top, name)
            if _hidden_from_others(path, directory=True):
                found.append(path)
            else:
                keep.append(name)
        dirs[:] = keep
        found.extend(
            os.path.join(top, name)
            for name in files
            if _hidden_from_others(os.path.join(top, name), directory=False)
        )
    return tuple(sorted(found))


def _hidden_from_others(path: str, *, directory: bool) -> bool:
    try:
        st = os.lstat(path)
    except OSError:
        return False
    if stat.S_ISLNK(st.st_mode):
        return False
    needed = (stat.S_IROTH | stat.S_IXOTH) if directory else stat.S_IROTH
    return (st.st_mode & needed) != needed


def etc_secrets() -> tuple[str, ...]:
    """Entries of ``/etc`` that other users cannot read (shadow, host keys, ...), cached 60 s."""
    return _etc_secrets_at(int(time.monotonic() // _ETC_CACHE_S))


def listening_sockets() -> list[str]:
    """Paths of the host's bound Unix sockets (``/proc/net/unix``), existing ones only."""
    try:
        with open("/proc/net/unix", encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()[1:]
    except OSError:
        return []
    paths: set[str] = set()
    for line in lines:
        fields = line.split(None, 7)
        if len(fields) == 8 and fields[7].startswith("/"):
            paths.add(fields[7])
    return sorted(p for p in paths if os.path.exists(p))


def sensitive_files(paths: Sequence[str], rules: SensitiveRules) -> list[str]:
    """Entries under ``paths`` whose names the sensitive-path rules match (not followed links).

    A matching directory is returned whole and not descended into. Raises ``OverflowError``
    past :data:`MAX_SCAN_ENTRIES` entries, so a run is refused rather than half-hidden.
    """
    return list(scan_paths(paths, rules).sensitive)


def _first_line(path: str) -> str:
    """The first line of a small regular file a tool could have written ("" if unreadable)."""
    try:
        head = read_regular(path, GITFILE_MAX_BYTES, truncate=True)
    except OSError:
        return ""
    lines = head.decode("utf-8", "replace").splitlines()
    return lines[0].strip() if lines else ""


def _gitfile_target(gitfile: str) -> str | None:
    """The git directory a gitfile (``gitdir: PATH``) names, resolved; None when unreadable."""
    line = _first_line(gitfile)
    if not line.startswith("gitdir:"):
        return None
    return os.path.realpath(os.path.join(os.path.dirname(gitfile), line[7:].strip()))


def git_places(writable: Sequence[str], gits: Sequence[str]) -> list[str]:
    """What to bind read-only for the ``.git`` entries ``gits`` found in ``writable``.

    Each ``.git`` itself (directory or gitfile, never a symlink), and for a gitfile the git
    directory it names and that directory's ``commondir`` when they are inside ``writable``
    (a linked worktree or a submodule whose git directory lives in the root).
    """
    found: list[str] = []
    for git in gits:
        if os.path.islink(git) or not os.path.lexists(git):
            continue
        found.append(git)
        if os.path.isdir(git):
            continue
        target = _gitfile_target(git)
        if target is None or not _under_any(target, writable) or not os.path.isdir(target):
            continue
        found.append(target)
        common = _gitfile_target_common(target)
        if common is not None and _under_any(common, writable) and os.path.isdir(common):
            found.append(common)
    return sorted(set(found))


def _gitfile_target_common(gitdir: str) -> str | None:
    """The ``commondir`` a linked worktree's git directory names, resolved."""
    line = _first_line(os.path.join(gitdir, "commondir"))
    return os.path.realpath(os.path.join(gitdir, line)) if line else None


def hooks_dirs(writable: Sequence[str]) -> list[str]:
    """Directories inside ``writable`` that git's ``core.hooksPath`` names (e.g. ``.husky``).

    Asked of git as the user's git reads it (system, global and the repository's own
    config), hermetically (:func:`runtime.guard.review.git_probe.hooks_paths`); a hooks directory
    in the work tree would otherwise let a command plant a hook that the user's next
    commit runs. When git cannot answer, raises ``ToolError("isolation_unavailable",
    layer="git_config")``: a hooks directory that is not known cannot be protected.
    """
    found: list[str] = []
    for path in writable:
        try:
            values = hooks_paths(path)
        except GitProbeError as e:
            raise ToolError(
                "isolation_unavailable",
                f"{e}; the hooks directory it names cannot be protected, so nothing that "
                "could write there runs",
                layer="git_config",
            ) from e
        for line in values:
            place = os.path.realpath(os.path.join(path, os.path.expanduser(line.strip())))
            if line.strip() and _inside(place, path) and place != path:
                found.append(place)
    return sorted(set(found))


def protected_mounts(
    writable: Sequence[str], hooks: Sequence[str] = (), gits: Sequence[str] | None = None
) -> list[str]:
    """The existing, real (not symlinked) protected places inside ``writable`` paths.

    ``hooks`` are the ``core.hooksPath`` directories (:func:`hooks_dirs`); ``gits`` the
    ``.git`` entries the walk found (default: those at the top of ``writable``).
    """
    found: list[str] = [h for h in hooks if os.path.isdir(h) and not os.path.islink(h)]
    if gits is None:
        gits = [os.path.join(path, ".git") for path in writable]
    found += git_places(writable, gits)
    for path in writable:
        for rel in PROTECTED_IN_WRITABLE:
            place = os.path.join(path, rel)
            if os.path.lexists(place) and not os.path.islink(place):
                found.append(place)
    return sorted(set(found))


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
        *(s for s in listening_sockets() if _under_any(s, bound)),
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
        if os.path.isdir(place) and not _under_any(place, [*visible, *found]):
            found.append(place)
    return found


def _system_argv(tmpfs_bytes: int | None) -> list[str]:
    argv: list[str] = []
    for path in SYSTEM_PATHS:
        if os.path.islink(path):
            argv += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            argv += ["--ro-bind", path, path]
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


def kernel_masks_argv() -> list[str]:
    """The arguments making :data:`PROC_READ_ONLY` read-only and :data:`MASKED_PATHS` empty.

    They follow ``--proc /proc`` and ``/sys``; only the paths this kernel has are named.
    """
    argv: list[str] = []
    for path in PROC_READ_ONLY:
        if os.path.lexists(path):
            argv += ["--ro-bind", path, path]
    for path in MASKED_PATHS:
        if os.path.lexists(path):
            argv += _mask(path)
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
        if os.path.isfile(target) and not _under_any(target, SYSTEM_VISIBLE):
            argv += ["--ro-bind", target, target]
    return argv


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
    if view.cwd != "/" and not _under_any(view.cwd, [*view.writable, *visible]):
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
        if _under_any(sock, [*bound, *visible]) and os.path.realpath(sock) not in allowed:
            argv += ["--ro-bind", "/dev/null", sock]
    for sock in sorted(allowed):
        if os.path.exists(sock):
            argv += ["--bind", sock, sock]
    for state in hidden_state():
        if _under_any(state, [*bound, *visible]) and os.path.isdir(state):
            argv += ["--tmpfs", state, "--remount-ro", state]
    # Last: the view's own root is a tmpfs of the kernel's default size (half the host's
    # memory) that a root command could otherwise fill past every sized tmpfs.
    return [*argv, "--remount-ro", "/"]
