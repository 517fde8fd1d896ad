"""The daemon's pid file: an exclusive lock held for the daemon's whole life.

The lock, not the file's existence, says whether a daemon runs: a pid file whose lock is
free was left by a crash (stale) whatever pid it names, even one reused by another
process. The kernel drops the lock when the daemon dies, however it dies.

The lock is a POSIX record lock (``lockf``), not ``flock``: actor processes forked by the
daemon inherit its open files, and an inherited ``flock`` would keep a dead daemon's lock
alive; record locks belong to the process and are not inherited. Their one trap — closing
*any* descriptor of the file drops the process's lock — is why the daemon never opens the
file again once it holds it (:class:`PidFile` reads through its own descriptor).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
from typing import Any, ClassVar

from runtime.errors import RoostError

__all__ = ["DaemonAlreadyRunningError", "PidFile", "locked_pid", "read_pid"]


class DaemonAlreadyRunningError(RoostError):
    """Another daemon holds the pid file of this home; ``details`` ``{pid, home}``."""

    code: ClassVar[str] = "daemon_already_running"

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message, **details)


def _pid_from(raw: bytes) -> int | None:
    text = raw.decode("ascii", errors="replace").strip()
    return int(text) if text.isdigit() else None


def _held_elsewhere(e: OSError) -> None:
    """Raise ``e`` again unless it says another process holds the lock."""
    if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
        raise e


def read_pid(path: str) -> int | None:
    """Return the pid written in ``path``, or ``None`` when missing, empty or not a number.

    Never call it in the daemon process itself (it would drop the daemon's lock).
    """
    try:
        with open(path, "rb") as f:
            return _pid_from(f.read(64))
    except OSError:
        return None


def locked_pid(path: str) -> int | None:
    """Return the pid of the daemon holding the lock on ``path``; ``None`` when none does.

    Returns 0 when the lock is held but no pid has been written yet (a daemon starting).
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError as e:
            _held_elsewhere(e)
            return _pid_from(os.pread(fd, 64, 0)) or 0
        fcntl.lockf(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


class PidFile:
    """The lock a running daemon holds; :meth:`acquire` it, :meth:`release` at exit."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd: int | None = None
        self.stale_pid: int | None = None
        """The pid a crashed daemon left in the file, found by :meth:`acquire`."""

    def acquire(self) -> None:
        """Lock the pid file, or raise :class:`DaemonAlreadyRunningError`.

        A pid file left by a crash is taken over (its pid kept in :attr:`stale_pid`).
        """
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as e:
                pid = _pid_from(os.pread(fd, 64, 0)) or 0
                os.close(fd)
                _held_elsewhere(e)
                home = os.path.dirname(self.path)
                raise DaemonAlreadyRunningError(
                    f"daemon already running (pid {pid}) in {home}; "
                    "stop it with `roost daemon stop` first",
                    pid=pid,
                    home=home,
                ) from e
            # The file may have been unlinked by a daemon that was exiting: lock the live one.
            try:
                same = os.fstat(fd).st_ino == os.stat(self.path).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        self._fd = fd
        self.stale_pid = _pid_from(os.pread(fd, 64, 0))

    def write(self, pid: int) -> None:
        """Write ``pid`` into the locked file (replacing what was there) and fsync it."""
        if self._fd is None:
            raise RuntimeError("PidFile.write before acquire")
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, f"{pid}\n".encode("ascii"), 0)
        os.fsync(self._fd)

    def release(self) -> None:
        """Remove the file, then drop the lock (in that order: no window for a stale file)."""
        if self._fd is None:
            return
        with contextlib.suppress(FileNotFoundError):
            if os.fstat(self._fd).st_ino == os.stat(self.path).st_ino:
                os.unlink(self.path)
        os.close(self._fd)
        self._fd = None
