"""Repeated map keys in a msgpack document, found without decoding it.

Decoders disagree on which of two equal keys wins, so a frame that repeats one can mean one
thing to its checker and another to its reader. :func:`duplicate_map_key` walks the
document's headers (no recursion, any depth) and names the first key a map repeats; the
journal link (:mod:`runtime.journal.link`) refuses such a frame with
``bad_request {reason: duplicate_key}``.
"""

from __future__ import annotations

from typing import Any

__all__ = ["duplicate_map_key"]

# msgpack header byte -> (bytes of its length field, bytes that always follow) for the
# types whose payload is skipped: str/bin/ext with a length field, fixed-size scalars.
_SIZED = {0xC4: 1, 0xC5: 2, 0xC6: 4, 0xD9: 1, 0xDA: 2, 0xDB: 4}
_EXT = {0xC7: 1, 0xC8: 2, 0xC9: 4}
_FIXED = {0xCA: 4, 0xCB: 8, 0xCC: 1, 0xCD: 2, 0xCE: 4, 0xCF: 8}
_FIXED |= {0xD0: 1, 0xD1: 2, 0xD2: 4, 0xD3: 8, 0xD4: 2, 0xD5: 3, 0xD6: 5, 0xD7: 9, 0xD8: 17}
_CONTAINERS = {0xDC: (2, False), 0xDD: (4, False), 0xDE: (2, True), 0xDF: (4, True)}


def _item(body: bytes, pos: int) -> tuple[int, int, bool]:
    """Read one msgpack header at ``pos``: ``(end, count, is_map)``; ``count`` -1: a scalar.

    For a scalar, ``end`` is past its payload; for a container, past its header.
    """
    b = body[pos]
    pos += 1
    if b <= 0x7F or b >= 0xE0 or b in (0xC0, 0xC2, 0xC3):
        return pos, -1, False
    if b <= 0x8F:
        return pos, b & 0x0F, True
    if b <= 0x9F:
        return pos, b & 0x0F, False
    if b <= 0xBF:
        return pos + (b & 0x1F), -1, False
    if b in _SIZED:
        width = _SIZED[b]
        return pos + width + int.from_bytes(body[pos : pos + width], "big"), -1, False
    if b in _EXT:
        width = _EXT[b]
        return pos + width + 1 + int.from_bytes(body[pos : pos + width], "big"), -1, False
    if b in _FIXED:
        return pos + _FIXED[b], -1, False
    if b in _CONTAINERS:
        width, is_map = _CONTAINERS[b]
        return pos + width, int.from_bytes(body[pos : pos + width], "big"), is_map
    raise ValueError(f"byte {b:#x} starts no msgpack item")


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
            pos, count, is_map = _item(body, pos)
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
