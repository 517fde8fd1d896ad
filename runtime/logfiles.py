"""The daemon's log file: shared by several processes, rotated by size, read by ``roost logs``.

Every process of a daemon (the daemon, Thespian's admin, each actor) appends its own lines
to ``ROOST_HOME/logs/daemon.log`` through a :class:`RotatingLogFile`. Each line is one
``write(2)`` on an ``O_APPEND`` descriptor, so lines of different processes never mix.
When a line would take the file past ``max_bytes``, the writer takes an exclusive
``flock`` on the file, checks that nobody rotated it meanwhile, and renames
``daemon.log.N-1`` → ``daemon.log.N`` ... ``daemon.log`` → ``daemon.log.1`` (keeping
``backups`` old files); every other process notices the new inode at its next line and
reopens. A process whose stdout/stderr is the old file (a detached daemon's) has them
pointed at the new one as well.

Reading: :func:`last_lines` (the end of the log, across one rotation) and
:func:`follow` (new lines as they come, across rotations), for ``roost logs``.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterator

import msgspec

__all__ = [
    "DEFAULT_BACKUPS",
    "DEFAULT_MAX_BYTES",
    "RotatingLogFile",
    "follow",
    "last_lines",
    "rotation_settings",
]

DEFAULT_MAX_BYTES = 10 * 1024 * 1024
"""``ROOST_LOG_MAX_BYTES`` when unset: rotate at 10 MiB."""
DEFAULT_BACKUPS = 5
"""``ROOST_LOG_BACKUPS`` when unset: keep ``daemon.log.1`` to ``daemon.log.5``."""


def _non_negative(environ: dict[str, str] | os._Environ[str], key: str, default: int) -> int:
    raw = environ.get(key, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if value < 0:
        raise ValueError(f"{key} must be a non-negative integer, got {raw!r}")
    return value


def rotation_settings(environ: dict[str, str] | os._Environ[str] | None = None) -> tuple[int, int]:
    """Return ``(max_bytes, backups)`` from ``ROOST_LOG_MAX_BYTES`` / ``ROOST_LOG_BACKUPS``.

    ``max_bytes`` 0 turns rotation off. A value that is not a non-negative integer raises
    ``ValueError`` naming the variable.
    """
    env = os.environ if environ is None else environ
    return (
        _non_negative(env, "ROOST_LOG_MAX_BYTES", DEFAULT_MAX_BYTES),
        _non_negative(env, "ROOST_LOG_BACKUPS", DEFAULT_BACKUPS),
    )


def _dropped_record(count: int) -> bytes:
    """The JSON line that says ``count`` log lines could not be written."""
    record = {
        "component": "roost.logging",
        "event": "log_lines_dropped",
        "count": count,
        "reason": "the log file could not be written (disk full?)",
        "level": "warning",
    }
    return msgspec.json.encode(record) + b"\n"


class RotatingLogFile:
    """A text sink (``write``/``flush``) appending whole lines to ``path``, rotated by size.

    Safe to share between threads (a lock) and between processes (``O_APPEND`` writes and
    an ``flock`` around rotation). ``max_bytes`` 0 never rotates.
    """

    _instances: weakref.WeakSet[RotatingLogFile] = weakref.WeakSet()

    def __init__(self, path: str, *, max_bytes: int, backups: int) -> None:
        self.path = path
        """The log file."""
        self.max_bytes = max_bytes
        """Size past which the file is rotated (0: never)."""
        self.backups = backups
        """How many rotated files (``path.1`` ...) are kept."""
        self._lock = threading.Lock()
        self._dropped = 0
        self._cut = False
        self._fd = -1
        self._id = (0, 0)
        self._pid = 0
        directory = os.path.dirname(path)
        if directory:
            os.makedirs(directory, mode=0o700, exist_ok=True)
        self._open()
        RotatingLogFile._instances.add(self)

    def _after_fork(self) -> None:
        """In a forked child: a lock another thread held at the fork would never be freed."""
        self._lock = threading.Lock()

    def _open(self) -> None:
        old_id = self._id
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        st = os.fstat(fd)
        if st.st_mode & 0o077 and st.st_uid == os.getuid():  # e.g. made by a shell redirect
            os.fchmod(fd, 0o600)
        if self._fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self._fd)
        self._fd, self._id, self._pid = fd, (st.st_dev, st.st_ino), os.getpid()
        if old_id not in ((0, 0), self._id):
            _repoint_std_streams(old_id, fd)

    def write(self, text: str) -> int:
        """Append ``text`` (whole lines) in one system call; return the characters taken.

        Never raises: a line the kernel refuses (no space, quota, I/O error) is dropped and
        counted, and the first line written afterwards is preceded by a
        ``log_lines_dropped`` record with the count, so a full disk cannot break what logs
        and the gap shows in the log.
        """
        data = text.encode("utf-8", errors="replace")
        with self._lock:
            if self._dropped:
                data = (b"\n" if self._cut else b"") + _dropped_record(self._dropped) + data
            written_any = False
            try:
                if self._fd < 0 or self._pid != os.getpid():
                    self._open()
                self._rotate_if_needed(len(data))
                view = memoryview(data)
                while view:
                    written = os.write(self._fd, view)
                    written_any = written_any or written > 0
                    view = view[written:]
            except OSError:
                self._dropped += max(1, text.count("\n"))
                self._cut = self._cut or written_any
                return len(text)
            self._dropped, self._cut = 0, False
        return len(text)

    def flush(self) -> None:
        """Nothing to flush: every line is written at once."""

    def isatty(self) -> bool:
        """A log file is never a terminal."""
        return False

    def fileno(self) -> int:
        """The current descriptor."""
        return self._fd

    def close(self) -> None:
        """Close the descriptor (the next write reopens it)."""
        with self._lock:
            if self._fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(self._fd)
            self._fd = -1

    def _path_id(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None
        return (st.st_dev, st.st_ino)

    def _rotate_if_needed(self, incoming: int) -> None:
        if self._path_id() != self._id:  # rotated (or removed) by another process
            self._open()
        size = os.fstat(self._fd).st_size
        # No rotation when it is off, when the line fits, or when the file is empty (a line
        # larger than the limit is written).
        if not self.max_bytes or size + incoming <= self.max_bytes or size == 0:
            return
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        try:
            if self._path_id() == self._id:  # else another process rotated while we waited
                self._shift()
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        self._open()

    def _shift(self) -> None:
        if self.backups == 0:
            os.unlink(self.path)
            return
        with contextlib.suppress(FileNotFoundError):
            os.unlink(f"{self.path}.{self.backups}")
        for n in range(self.backups - 1, 0, -1):
            with contextlib.suppress(FileNotFoundError):
                os.rename(f"{self.path}.{n}", f"{self.path}.{n + 1}")
        os.rename(self.path, f"{self.path}.1")


def _reset_after_fork() -> None:
    for log in list(RotatingLogFile._instances):
        log._after_fork()


os.register_at_fork(after_in_child=_reset_after_fork)


def _repoint_std_streams(old_id: tuple[int, int], new_fd: int) -> None:
    """Point stdout/stderr at the new file when they were the rotated one."""
    for fd in (1, 2):
        try:
            st = os.fstat(fd)
        except OSError:
            continue
        if (st.st_dev, st.st_ino) == old_id:
            with contextlib.suppress(OSError):
                os.dup2(new_fd, fd, inheritable=True)


def last_lines(path: str, count: int) -> list[str]:
    """The last ``count`` lines of the log (with ``path.1`` when the file has fewer)."""
    if count <= 0:
        return []
    lines = _tail_of(path, count)
    if len(lines) < count:
        lines = _tail_of(f"{path}.1", count - len(lines)) + lines
    return lines


def _tail_of(path: str, count: int) -> list[str]:
    try:
        with open(path, "rb") as f:
            end = f.seek(0, os.SEEK_END)
            chunk = 64 * 1024
            start = end
            data = b""
            while start > 0 and data.count(b"\n") <= count:
                start = max(0, start - chunk)
                f.seek(start)
                data = f.read(end - start)
    except FileNotFoundError:
        return []
    lines = data.decode("utf-8", errors="replace").splitlines()
    if start > 0:
        lines = lines[1:]  # the first one may be cut
    return lines[-count:]


def follow(
    path: str,
    *,
    from_end: bool = True,
    poll_s: float = 0.2,
    stop: Callable[[], bool] = lambda: False,
) -> Iterator[str]:
    """Yield lines appended to ``path`` until ``stop()``, following rotations.

    ``from_end``: start at the current end (``False``: from the beginning). A missing file
    is waited for. After a rotation the rest of the old file is read, then any file
    rotated since (when several rotations happened between two polls), then the new one
    from its start.
    """
    f = None
    current: tuple[int, int] = (0, 0)
    pending = b""
    try:
        while not stop():
            if f is None:
                try:
                    f = open(path, "rb")  # noqa: SIM115 - kept open while following
                except FileNotFoundError:
                    time.sleep(poll_s)
                    continue
                st = os.fstat(f.fileno())
                current = (st.st_dev, st.st_ino)
                if from_end:
                    f.seek(0, os.SEEK_END)
                from_end = False
            data = f.read()
            if data:
                pending += data
                *complete, pending = pending.split(b"\n")
                for line in complete:
                    yield line.decode("utf-8", errors="replace")
                continue
            try:
                st = os.stat(path)
                moved = (st.st_dev, st.st_ino) != current
            except FileNotFoundError:
                moved = False  # being rotated (or removed): wait for the new file
            if not moved:
                time.sleep(poll_s)
                continue
            rest = pending + f.read()  # what the old file got before it was renamed
            f.close()
            f, pending = None, b""
            for between in [rest, *_rotated_since(path, current)]:
                for line in between.splitlines():
                    yield line.decode("utf-8", errors="replace")
    finally:
        if f is not None:
            f.close()


def _rotated_since(path: str, old: tuple[int, int]) -> list[bytes]:
    """The contents of the files rotated after ``old`` (oldest first), when it is found."""
    n = 1
    while os.path.exists(f"{path}.{n}"):
        st = os.stat(f"{path}.{n}")
        if (st.st_dev, st.st_ino) == old:
            break
        n += 1
    else:
        return []  # the old file is gone (no backups): nothing to say about those between
    out = []
    for m in range(n - 1, 0, -1):
        with contextlib.suppress(FileNotFoundError), open(f"{path}.{m}", "rb") as f:
            out.append(f.read())
    return out
