"""The state directory's modes: ``ROOST_HOME`` is 0700 and every file in it 0600 (SPEC §9).

:func:`secure_home` runs before anything is written into the home: in ``roost daemon
start`` before it spawns the daemon (it opens the daemon's log there) and again in the
daemon itself. In order:

1. a missing home is created (mode 0700, parents included);
2. a home that is a symlink, not a directory, or not owned by the daemon's user is
   refused (:class:`runtime.errors.ConfigError`, ``bad_config``, with a ``reason``);
3. the home is chmod-ed to 0700, so no one else can reach or change what is in it;
4. Roost's own entries in it (:data:`ROOST_ENTRIES`, and everything under ``logs/`` and
   ``mailbox/``) are walked without following symlinks: directories become 0700, the
   rest 0600; one owned by another user is refused like the home. Other entries are
   left as they are: the 0700 home already keeps everyone else out, and a ``--home``
   pointed by mistake at a directory full of someone's files must not rewrite their
   modes.

The daemon then runs with umask 077 (:func:`private_umask`), so what it and its actor
processes create later (the journal and its ``-wal``/``-shm``, logs, the pid file,
sockets, spilled mailbox files) is owner-only too. Files that tools create in a
*project* on the user's behalf keep the user's own umask: the one in force when the
daemon started is kept in ``ROOST_PROJECT_UMASK`` (:func:`project_mode`), which commands
and the ``fs`` tools apply.
"""

from __future__ import annotations

import contextlib
import functools
import os
import stat
from collections.abc import Callable

from runtime.errors import ConfigError

__all__ = [
    "PRIVATE_UMASK",
    "PROJECT_UMASK_ENV",
    "ROOST_ENTRIES",
    "private_umask",
    "project_mode",
    "project_umask",
    "secure_home",
]

PRIVATE_UMASK = 0o077
"""The daemon's umask: nothing it creates is readable by group or others."""

PROJECT_UMASK_ENV = "ROOST_PROJECT_UMASK"
"""The umask (octal) that files created in projects get; set by :func:`private_umask`."""

ROOST_ENTRIES = frozenset(
    {"roost.sock", "roost.pid", "logs", "mailbox", "journal.sock", "runs", "quarantine"}
    | {"journal.sqlite", "journal.sqlite-wal", "journal.sqlite-shm", "journal.sqlite-journal"}
)
"""What Roost keeps in ``ROOST_HOME`` (``logs`` and ``mailbox`` are directories)."""


def _refuse(reason: str, path: str, problem: str, **details: object) -> ConfigError:
    return ConfigError(
        f"ROOST_HOME {problem}: {path}; {_FIXES[reason]}", reason=reason, path=path, **details
    )


_FIXES = {
    "home_is_symlink": "point --home (or ROOST_HOME) at the real directory",
    "home_not_directory": "move it away or choose another --home",
    "home_not_owned": "use a directory of your own (the daemon's user) as --home",
    "entry_not_owned": "remove it or give it to the daemon's user (chown)",
}

_NOT_A_HOME: tuple[tuple[Callable[[int], bool], str, str], ...] = (
    (stat.S_ISLNK, "home_is_symlink", "is a symbolic link"),
    (lambda mode: not stat.S_ISDIR(mode), "home_not_directory", "is not a directory"),
)
"""A home that cannot be opened as a directory: the first test its mode passes, its refusal."""


def secure_home(home: str) -> list[str]:
    """Create or check ``home`` and make it and everything in it owner-only.

    Returns the paths whose mode was changed (the home first, if it was). Raises
    :class:`ConfigError` as described in the module docstring.
    """
    os.makedirs(os.path.dirname(home) or ".", exist_ok=True)
    with contextlib.suppress(FileExistsError):
        os.mkdir(home, 0o700)
    try:
        fd = os.open(home, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        mode = os.lstat(home).st_mode
        for refused, reason, problem in _NOT_A_HOME:
            if refused(mode):
                raise _refuse(reason, home, problem) from None
        raise
    try:
        return _secure(fd, home)
    finally:
        os.close(fd)


def _secure(fd: int, home: str) -> list[str]:
    uid = os.geteuid()
    st = os.fstat(fd)
    _owned(
        st, uid, lambda: _refuse("home_not_owned", home, f"belongs to uid {st.st_uid}, not {uid}")
    )
    changed: list[str] = []
    _tighten(st, 0o700, functools.partial(os.fchmod, fd), home, changed)
    for name in sorted(set(os.listdir(fd)) & ROOST_ENTRIES):
        entry = _fix(fd, name, os.path.join(home, name), uid, changed)
        if entry is not None and stat.S_ISDIR(entry.st_mode):
            sub_fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            try:
                for directory, dirs, files, dir_fd in os.fwalk(
                    ".", follow_symlinks=False, dir_fd=sub_fd
                ):
                    for inner in [*dirs, *files]:
                        path = os.path.normpath(os.path.join(home, name, directory, inner))
                        _fix(dir_fd, inner, path, uid, changed)
            finally:
                os.close(sub_fd)
    return changed


def _fix(dir_fd: int, name: str, path: str, uid: int, changed: list[str]) -> os.stat_result | None:
    """Make one entry owner-only (0700 or 0600); ``None`` for a symlink, left alone."""
    entry = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    if stat.S_ISLNK(entry.st_mode):
        return None  # its own mode means nothing; what it points to is not ours to fix
    _owned(
        entry,
        uid,
        lambda: _refuse("entry_not_owned", path, f"holds an entry of uid {entry.st_uid}", uid=uid),
    )
    wanted = 0o700 if stat.S_ISDIR(entry.st_mode) else 0o600
    # Not a symlink (checked above), in a directory only we can change now.
    _tighten(entry, wanted, lambda mode: os.chmod(name, mode, dir_fd=dir_fd), path, changed)
    return entry


def _owned(st: os.stat_result, uid: int, refusal: Callable[[], ConfigError]) -> None:
    """Raise ``refusal()`` unless the entry (``st``) belongs to ``uid``."""
    if st.st_uid != uid:
        raise refusal()


def _tighten(
    st: os.stat_result, wanted: int, chmod: Callable[[int], None], path: str, changed: list[str]
) -> None:
    """Give an entry (``st``) the mode ``wanted`` through ``chmod``, noting ``path`` if changed."""
    if stat.S_IMODE(st.st_mode) != wanted:
        chmod(wanted)
        changed.append(path)


def private_umask() -> int:
    """Set the umask to :data:`PRIVATE_UMASK`; return the previous one.

    The previous one is recorded in ``$ROOST_PROJECT_UMASK`` (unless already set), so
    this process's children can give project files the user's modes.
    """
    previous = os.umask(PRIVATE_UMASK)
    os.environ.setdefault(PROJECT_UMASK_ENV, f"{previous:03o}")
    return previous


def project_umask() -> int | None:
    """The umask files created in a project should get; ``None``: this process's own."""
    raw = os.environ.get(PROJECT_UMASK_ENV)
    if not raw:
        return None
    try:
        value = int(raw, 8)
    except ValueError:
        return None
    return value if 0 <= value <= 0o777 else None


def project_mode(fd: int, *, directory: bool = False) -> None:
    """Give the file (or directory) just created at ``fd`` the user's modes.

    ``0666`` (``0777`` for a directory) less :func:`project_umask`; nothing when the
    process runs with the user's umask anyway.
    """
    umask = project_umask()
    if umask is not None and umask != PRIVATE_UMASK:
        os.fchmod(fd, (0o777 if directory else 0o666) & ~umask)
