"""Decoding an HTTP body's ``Content-Encoding`` without ever inflating past a cap.

The server ``http.fetch`` talks to is chosen by the model, so it may be an attacker's: it
can ignore ``Accept-Encoding: identity`` and answer ``Content-Encoding: gzip, gzip``. An
HTTP client that decodes a network chunk at a time (``httpx``'s ``iter_bytes``) hands such
a chunk to ``zlib`` whole, and one 64 KiB chunk of a twice-gzipped body inflates to a
gigabyte inside a daemon process before any byte cap is looked at (the red team of issue
17 measured +806 MiB peak in the ToolRunner for a 400 MiB body). :class:`BoundedDecoder`
takes the raw bytes instead and asks each layer for at most ``room`` bytes per call
(``decompress(data, max_length)``), keeping what a layer has not consumed for the next
call, so no layer ever holds more than ``room`` bytes of output at once.

``gzip``, ``x-gzip`` and ``deflate`` (zlib or gzip framing) are decoded, in the reverse
of the order the header lists them; ``identity`` is skipped; a body with any other coding
(``br``, ``zstd``, ``compress``) is returned as it came, undecoded, as ``httpx`` does for
codings it does not know.
"""

from __future__ import annotations

import zlib

__all__ = ["BoundedDecoder", "DecodeError"]

_WBITS = {
    "gzip": 16 + zlib.MAX_WBITS,
    "x-gzip": 16 + zlib.MAX_WBITS,
    "deflate": 32 + zlib.MAX_WBITS,
}


class DecodeError(ValueError):
    """The body is not valid for the coding its ``Content-Encoding`` names."""


class BoundedDecoder:
    """Decodes one body, a raw chunk at a time, never producing more than ``room`` at once."""

    def __init__(self, content_encoding: str, room: int) -> None:
        codings = [c.strip().lower() for c in content_encoding.split(",")]
        codings = [c for c in codings if c and c != "identity"]
        known = all(c in _WBITS for c in codings)
        self.room = max(1, room)
        """Most bytes one layer produces per call."""
        self._layers = [zlib.decompressobj(_WBITS[c]) for c in reversed(codings)] if known else []

    def feed(self, data: bytes) -> bytes:
        """Decode the next raw bytes (``b""`` to drain); at most :attr:`room` bytes back."""
        try:
            for layer in self._layers:
                data = layer.decompress(layer.unconsumed_tail + data, self.room)
        except zlib.error as e:
            raise DecodeError(f"the body is not valid for its Content-Encoding: {e}") from e
        return data

    def pending(self) -> bool:
        """Whether a layer still holds input it has not decoded (call :meth:`feed` again)."""
        return any(layer.unconsumed_tail for layer in self._layers)
