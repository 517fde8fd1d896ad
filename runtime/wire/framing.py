"""Length-prefixed frames: a 4-byte big-endian unsigned length, then that many bytes.

The one framing of every Roost socket: the client ↔ daemon protocol (JSON bodies,
:mod:`runtime.wire.protocol`) and the journal link (msgpack bodies,
:mod:`runtime.journal.link`). The body's encoding is the caller's business. Readers check
the announced length against their maximum *before* reading the body.
"""

from __future__ import annotations

import socket
import struct
import time

from runtime.errors import RequestError

__all__ = [
    "DEFAULT_MAX_FRAME_BYTES",
    "HEADER_SIZE",
    "FrameTooLargeError",
    "TruncatedFrameError",
    "frame",
    "read_exact",
    "read_frame",
    "take_frame",
]

_HEADER = struct.Struct(">I")
HEADER_SIZE = _HEADER.size
"""Bytes of the length prefix."""

DEFAULT_MAX_FRAME_BYTES = 8 * 1024 * 1024
"""Largest frame body either side of the client ↔ daemon protocol accepts (8 MiB)."""


class FrameTooLargeError(RequestError):
    """A frame's announced length exceeds the maximum; ``details`` ``{reason, size, max}``.

    Code ``bad_request`` (``RequestError``'s); a sibling of ``BadRequestError``, not a kind
    of it, so that Roost's error classes stay three levels deep.
    """

    def __init__(self, size: int, max_bytes: int) -> None:
        super().__init__(
            f"frame of {size} bytes exceeds the maximum of {max_bytes} bytes",
            reason="frame_too_large",
            size=size,
            max=max_bytes,
        )


class TruncatedFrameError(ConnectionError):
    """The peer closed the connection in the middle of a frame."""


def frame(body: bytes) -> bytes:
    """``body`` with its length prefix."""
    return _HEADER.pack(len(body)) + body


def read_exact(
    sock: socket.socket, size: int, *, at_boundary: bool, deadline: float | None = None
) -> bytes | None:
    """Read exactly ``size`` bytes; ``None`` when the peer closed first and ``at_boundary``.

    ``deadline`` (``time.monotonic()``): each read waits at most until then (a timeout is
    raised as ``TimeoutError``); without it the socket's own timeout applies. Raises
    :class:`TruncatedFrameError` when the peer closes part-way.
    """
    buf = bytearray(size)
    view = memoryview(buf)
    got = 0
    while got < size:
        if deadline is not None:
            sock.settimeout(max(0.001, deadline - time.monotonic()))
        n = sock.recv_into(view[got:], size - got)
        if n == 0:
            if got == 0 and at_boundary:
                return None
            raise TruncatedFrameError(f"connection closed after {got} of {size} bytes")
        got += n
    return bytes(buf)


def read_frame(
    sock: socket.socket, max_bytes: int, *, deadline: float | None = None
) -> bytes | None:
    """Read one frame body from a blocking socket; ``None``: the peer closed between frames.

    Raises :class:`FrameTooLargeError` (before reading the body) and
    :class:`TruncatedFrameError`; socket errors and timeouts propagate.
    """
    header = read_exact(sock, HEADER_SIZE, at_boundary=True, deadline=deadline)
    if header is None:
        return None
    (size,) = _HEADER.unpack(header)
    if size > max_bytes:
        raise FrameTooLargeError(size, max_bytes)
    body = read_exact(sock, size, at_boundary=False, deadline=deadline)
    return body if body is not None else b""


def take_frame(buffer: bytearray, max_bytes: int) -> bytes | None:
    """Remove the first whole frame from ``buffer`` and return its body (non-blocking readers).

    ``None``: no whole frame yet. Raises :class:`FrameTooLargeError` as soon as the length
    is known to exceed ``max_bytes``, without waiting for the body.
    """
    if len(buffer) < HEADER_SIZE:
        return None
    (size,) = _HEADER.unpack_from(buffer)
    if size > max_bytes:
        raise FrameTooLargeError(size, max_bytes)
    if len(buffer) < HEADER_SIZE + size:
        return None
    body = bytes(buffer[HEADER_SIZE : HEADER_SIZE + size])
    del buffer[: HEADER_SIZE + size]
    return body
