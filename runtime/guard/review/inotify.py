"""Linux inotify through ctypes: watch directories during a run, read what changed after it.

Only what :mod:`runtime.guard.review.leftovers` needs: a non-blocking, close-on-exec instance,
one watch per directory, and a drain of the queued events into ``(directory, name, mask)``
triples. Inotify reports changes to the inodes it watches whatever mount or mount
namespace they were made through, so a watch on the host path sees a command's writes
through its bind mount.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import struct

__all__ = [
    "IN_ATTRIB",
    "IN_CREATE",
    "IN_DELETE",
    "IN_ISDIR",
    "IN_MODIFY",
    "IN_MOVED_FROM",
    "IN_MOVED_TO",
    "IN_Q_OVERFLOW",
    "WATCH_MASK",
    "Inotify",
    "NoInotify",
]

IN_MODIFY = 0x00000002
IN_ATTRIB = 0x00000004
IN_CLOSE_WRITE = 0x00000008
IN_MOVED_FROM = 0x00000040
IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
IN_DELETE = 0x00000200
IN_Q_OVERFLOW = 0x00004000
IN_ONLYDIR = 0x01000000
IN_DONT_FOLLOW = 0x02000000
IN_ISDIR = 0x40000000
IN_CLOEXEC = 0o2000000
IN_NONBLOCK = 0o4000

WATCH_MASK = (
    IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE
)
"""What a run's watch reports: content, mode, creation, deletion and renames of entries."""

_HEADER = struct.Struct("iIII")
_READ_BYTES = 65536


def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    try:
        return ctypes.CDLL(name or "libc.so.6", use_errno=True)
    except OSError:
        return None


_LIBC = _libc()


def _checked(result: int, *where: str) -> int:
    """``result`` of a libc call, or ``OSError`` with its errno (and ``where``) when negative."""
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), *where)
    return result


class Inotify:
    """One inotify instance (raises ``OSError`` when the kernel refuses one)."""

    watching = True
    """It reports what changes in the directories it watches."""

    def __init__(self) -> None:
        if _LIBC is None or not hasattr(_LIBC, "inotify_init1"):
            raise OSError(errno.ENOSYS, "inotify is not available")
        self.fd: int = _checked(_LIBC.inotify_init1(IN_CLOEXEC | IN_NONBLOCK))
        self.paths: dict[int, str] = {}
        """Watch descriptor -> the directory it was added for."""

    def watch(self, directory: str) -> None:
        """Watch ``directory`` (not following a symlink); raises ``OSError`` (ENOSPC, ...)."""
        assert _LIBC is not None
        wd = _LIBC.inotify_add_watch(
            self.fd, os.fsencode(directory), WATCH_MASK | IN_ONLYDIR | IN_DONT_FOLLOW
        )
        self.paths[_checked(wd, directory)] = directory

    def drain(self) -> tuple[list[tuple[str, str, int]], bool]:
        """Read every queued event: ``([(directory, name, mask), ...], overflowed)``.

        Events about a watched directory itself (no name) are left out.
        """
        found: list[tuple[str, str, int]] = []
        overflow = False
        while True:
            try:
                data = os.read(self.fd, _READ_BYTES)
            except BlockingIOError:
                break
            if not data:
                break
            offset = 0
            while offset + _HEADER.size <= len(data):
                wd, mask, _cookie, length = _HEADER.unpack_from(data, offset)
                raw = data[offset + _HEADER.size : offset + _HEADER.size + length]
                offset += _HEADER.size + length
                if mask & IN_Q_OVERFLOW:
                    overflow = True
                    continue
                directory = self.paths.get(wd)
                name = os.fsdecode(raw.split(b"\0", 1)[0])
                if directory is not None and name:
                    found.append((directory, name, mask))
        return found, overflow

    def close(self) -> None:
        """Close the instance (its watches go with it)."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> Inotify:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class NoInotify:
    """Where no inotify instance can be had (or it was closed): it watches and reports nothing.

    Its user walks instead (``watching`` is false).
    """

    watching = False
    """Nothing it reports can be relied on: its user must walk."""

    def watch(self, directory: str) -> None:
        """Watch nothing."""

    def drain(self) -> tuple[list[tuple[str, str, int]], bool]:
        """No event, no overflow."""
        return [], False

    def close(self) -> None:
        """Nothing to close."""
