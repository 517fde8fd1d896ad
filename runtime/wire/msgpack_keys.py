"""Repeated map keys in a msgpack document, found without decoding it.

Decoders disagree on which of two equal keys wins, so a frame that repeats one can mean one
thing to its checker and another to its reader. :func:`duplicate_map_key` walks the
document's headers (no recursion, any depth) and names the first key a map repeats; the
journal link (:mod:`runtime.journal.link`) refuses such a frame with
``bad_request {reason: duplicate_key}``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["duplicate_map_key"]

Reader = Callable[[bytes, int], tuple[int, int, bool]]
"""Reads the rest of one item's header (``pos`` is past its first byte):
``(end, count, is_map)``; ``count`` -1: a scalar, whose ``end`` is past its payload; for a
container, ``end`` is past its header."""


def _scalar(skip: int, width: int = 0) -> Reader:
    """A scalar of ``skip`` bytes, then a ``width``-byte big-endian length and that many."""

    def read(body: bytes, pos: int) -> tuple[int, int, bool]:
        return pos + width + skip + int.from_bytes(body[pos : pos + width], "big"), -1, False

    return read


def _container(count: int, width: int, is_map: bool) -> Reader:
    """A map or array of ``count`` items, plus a ``width``-byte big-endian count."""

    def read(body: bytes, pos: int) -> tuple[int, int, bool]:
        return pos + width, count + int.from_bytes(body[pos : pos + width], "big"), is_map

    return read


def _invalid(body: bytes, pos: int) -> tuple[int, int, bool]:
    raise ValueError(f"byte {body[pos - 1]:#x} starts no msgpack item")


def _readers() -> list[Reader]:
    """The reader of each header byte (msgpack's format table), built once."""
    readers: list[Reader] = [_invalid] * 256
    for b in (*range(0x80), *range(0xE0, 0x100), 0xC0, 0xC2, 0xC3):  # fixint, nil, bool
        readers[b] = _scalar(0)
    for b in range(0x80, 0x90):
        readers[b] = _container(b & 0x0F, 0, True)  # fixmap
    for b in range(0x90, 0xA0):
        readers[b] = _container(b & 0x0F, 0, False)  # fixarray
    for b in range(0xA0, 0xC0):
        readers[b] = _scalar(b & 0x1F)  # fixstr
    for b, width in {0xC4: 1, 0xC5: 2, 0xC6: 4, 0xD9: 1, 0xDA: 2, 0xDB: 4}.items():
        readers[b] = _scalar(0, width)  # bin, str
    for b, width in {0xC7: 1, 0xC8: 2, 0xC9: 4}.items():
        readers[b] = _scalar(1, width)  # ext: its type byte, then the payload
    fixed = {0xCA: 4, 0xCB: 8, 0xCC: 1, 0xCD: 2, 0xCE: 4, 0xCF: 8, 0xD0: 1, 0xD1: 2}
    fixed |= {0xD2: 4, 0xD3: 8, 0xD4: 2, 0xD5: 3, 0xD6: 5, 0xD7: 9, 0xD8: 17}
    for b, size in fixed.items():
        readers[b] = _scalar(size)  # numbers, fixext
    for b, (width, is_map) in {
        0xDC: (2, False),
        0xDD: (4, False),
        0xDE: (2, True),
        0xDF: (4, True),
    }.items():
        readers[b] = _container(0, width, is_map)
    return readers


_READERS = _readers()


def duplicate_map_key(body: bytes) -> bytes | None:
    """The encoding of the first map key a msgpack document repeats, else ``None``.

    Keys are compared as encoded (a repeat spelled differently is the canonical check's
    business); a body that is not msgpack gives ``None``. No recursion: any depth.
    """
    stack: list[list[Any]] = []  # per open container: [items left, keys seen | None, key next]
    pos = 0
    try:
        while True:
            start = pos
            pos, count, is_map = _READERS[body[pos]](body, pos + 1)
            if pos > len(body):
                return None
            if count > 0:
                stack.append([count, set() if is_map else None, True])
                continue
            key: bytes | None = body[start:pos] if count < 0 else None
            while True:  # an item is complete: account for it in the containers above
                if not stack:
                    return None
                frame = stack[-1]
                if frame[1] is not None and frame[2]:
                    if key is not None:
                        if key in frame[1]:
                            return key
                        frame[1].add(key)
                    frame[2] = False
                    break
                frame[2] = True
                frame[0] -= 1
                if frame[0]:
                    break
                stack.pop()
                key = None
    except (IndexError, ValueError):
        return None
