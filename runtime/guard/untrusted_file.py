"""Reading a file a tool process could have touched, from the daemon's side.

A path inside a command's view (the project root, a scratch directory) can be replaced by
the command with a symlink to any host file, a FIFO that never answers, or ``/dev/zero``.
:func:`read_untrusted_file` is the only way the daemon reads such a path: it opens without
following a final symlink and without blocking on a FIFO (``O_NOFOLLOW | O_NONBLOCK |
O_CLOEXEC``), requires a regular file (``fstat`` on the descriptor it opened, so nothing can
be swapped in between), and reads at most ``max_bytes``: no host path read to its end, no
thread stuck, no memory grown by the tool.
"""

from __future__ import annotations

import os
import stat

__all__ = ["UntrustedFileError", "read_untrusted_file"]


class UntrustedFileError(OSError):
    """The path is not a regular file of at most ``max_bytes`` (why in ``reason``)."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        """The path that was refused."""
        self.reason = reason
        """``not_a_regular_file`` or ``too_large``."""


def read_untrusted_file(path: str, *, max_bytes: int) -> bytes:
    """The bytes of the regular file ``path`` (at most ``max_bytes``), never following a link.

    Raises ``OSError`` when it cannot be opened (``ELOOP`` for a symlink), and
    :class:`UntrustedFileError` when it is not a regular file (``not_a_regular_file``) or
    holds more than ``max_bytes`` (``too_large``).
    """
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UntrustedFileError(path, "not_a_regular_file")
        chunks: list[bytes] = []
        size = 0
        while size <= max_bytes:
            chunk = os.read(fd, max_bytes + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > max_bytes:
            raise UntrustedFileError(path, "too_large")
        return b"".join(chunks)
    finally:
        os.close(fd)
