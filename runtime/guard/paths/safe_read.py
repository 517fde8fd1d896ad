"""Bounded reads of files a tool process can write, from the daemon's side.

Anything under the project root, a scratch directory or a shared ``/tmp`` may have been
made by a command, an asset command or an MCP server: a symlink to any host file, a FIFO
nobody writes (an ``open`` or ``read`` that never returns), a device such as
``/dev/zero`` (a read that never ends), or a regular file of a gigabyte. The daemon reads
such a path only through :func:`read_regular`: ``O_NOFOLLOW | O_NONBLOCK`` on the last
component (relative to ``dir_fd`` when given, so a caller that walked the parents with
``O_NOFOLLOW`` keeps that), ``fstat`` on the descriptor it opened (nothing can be swapped
in between), a regular file only, and never more than ``max_bytes + 1`` bytes read.

The same rule in a line reader (:func:`bounded_lines`) serves a file already opened and
checked (``fs.read``): a line longer than the cap is cut, never held whole. And for what a
child process prints (:func:`read_pipe`): at most ``max_bytes``, until a deadline.
"""

from __future__ import annotations

import errno
import os
import selectors
import stat
import time
from collections.abc import Iterator
from typing import BinaryIO

__all__ = ["UnsafeFileError", "bounded_lines", "read_pipe", "read_regular"]

_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_CHUNK = 64 * 1024
_SKIP = 1024 * 1024


class UnsafeFileError(OSError):
    """A path the daemon refused to read: ``reason`` says what it was."""

    def __init__(self, path: str, reason: str, detail: str) -> None:
        super().__init__(errno.EINVAL, f"{path}: {detail}")
        self.path = path
        """The path as given."""
        self.reason = reason
        """``symlink``, ``not_a_regular_file`` or ``too_large``."""


def read_regular(
    path: str, max_bytes: int, *, dir_fd: int | None = None, truncate: bool = False
) -> bytes:
    """The bytes of the regular file ``path``, at most ``max_bytes`` of them.

    Never follows a symlink in the last component, never blocks (a FIFO is refused
    before anything is read from it), never reads more than ``max_bytes + 1`` bytes.
    Raises :class:`UnsafeFileError` (``symlink``, ``not_a_regular_file``, or ``too_large``
    unless ``truncate``, which returns the first ``max_bytes`` instead), and ``OSError``
    when the file cannot be opened or read (missing, permission).
    """
    try:
        fd = os.open(path, _OPEN_FLAGS, dir_fd=dir_fd)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise UnsafeFileError(path, "symlink", "is a symlink; it is not followed") from e
        raise
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise UnsafeFileError(path, "not_a_regular_file", "is not a regular file")
        chunks: list[bytes] = []
        size = 0
        while size <= max_bytes:
            chunk = os.read(fd, min(_CHUNK, max_bytes + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if size > max_bytes:
        if not truncate:
            raise UnsafeFileError(path, "too_large", f"is larger than {max_bytes} bytes")
        return data[:max_bytes]
    return data


def bounded_lines(f: BinaryIO, max_line: int) -> Iterator[tuple[bytes, bool]]:
    """Yield ``(line, cut)`` for each line of ``f``; a line over ``max_line`` bytes is cut.

    A cut line yields its first ``max_line`` bytes and ``cut=True``; the rest of it is
    read and dropped a chunk at a time, so no line is ever held whole in memory.
    """
    while True:
        line = f.readline(max_line)
        if not line:
            return
        if len(line) < max_line or line.endswith(b"\n"):
            yield line, False
            continue
        while True:  # skip the rest of the long line, a chunk at a time
            rest = f.readline(_SKIP)
            if not rest or rest.endswith(b"\n"):
                break
        yield line, True


def read_pipe(fd: int, max_bytes: int, timeout_s: float) -> tuple[bytes, str | None]:
    """Read ``fd`` (a pipe from a child) to its end: ``(data, None)``, or ``(data, problem)``.

    Stops at ``max_bytes + 1`` bytes (``"too_large"``) or after ``timeout_s``
    (``"timeout"``); the caller then kills the child. Never blocks past the deadline.
    """
    deadline = time.monotonic() + timeout_s
    chunks: list[bytes] = []
    size = 0
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return b"".join(chunks), "timeout"
            if not sel.select(left):
                continue
            chunk = os.read(fd, min(_CHUNK, max_bytes + 1 - size))
            if not chunk:
                return b"".join(chunks), None
            chunks.append(chunk)
            size += len(chunk)
            if size > max_bytes:
                return b"".join(chunks), "too_large"
