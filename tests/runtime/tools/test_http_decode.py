"""Bounded decoding of ``Content-Encoding`` (``runtime.tools.http_decode``)."""

from __future__ import annotations

import gzip
import zlib

import pytest

from runtime.tools.http_decode import BoundedDecoder, DecodeError

TEXT = b"hello, compressed world\n" * 100


def _decode_all(decoder: BoundedDecoder, raw: bytes, chunk: int = 7) -> bytes:
    out = bytearray()
    for i in range(0, len(raw), chunk):
        part = decoder.feed(raw[i : i + chunk])
        while True:
            assert len(part) <= decoder.room
            out += part
            if not decoder.pending():
                break
            part = decoder.feed(b"")
    return bytes(out)


@pytest.mark.parametrize(
    ("header", "raw"),
    [
        ("", TEXT),
        ("identity", TEXT),
        ("gzip", gzip.compress(TEXT, mtime=0)),
        ("x-gzip", gzip.compress(TEXT, mtime=0)),
        ("deflate", zlib.compress(TEXT)),
        ("GZIP, Identity", gzip.compress(TEXT, mtime=0)),
        ("deflate, gzip", gzip.compress(zlib.compress(TEXT), mtime=0)),
    ],
)
def test_each_known_coding_decodes_to_the_body(header: str, raw: bytes) -> None:
    assert _decode_all(BoundedDecoder(header, 1 << 20), raw) == TEXT


def test_an_unknown_coding_is_returned_as_it_came() -> None:
    raw = b"\x00not brotli really\xff"
    assert _decode_all(BoundedDecoder("gzip, br", 1 << 20), raw) == raw


def test_a_twice_gzipped_bomb_never_inflates_past_room_at_once() -> None:
    bomb = gzip.compress(gzip.compress(b"a" * (64 << 20)))
    decoder = BoundedDecoder("gzip, gzip", 4096)
    first = decoder.feed(bomb)
    assert 0 < len(first) <= 4096
    assert decoder.pending()


def test_garbage_under_a_coding_is_a_decode_error() -> None:
    with pytest.raises(DecodeError):
        BoundedDecoder("gzip", 1024).feed(b"this is not gzip at all")
