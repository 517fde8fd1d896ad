"""The wire protocol between client and daemon: length-prefixed JSON frames.

A frame is a 4-byte big-endian unsigned length and that many bytes of JSON. Frames::

    request   {"id": 1, "op": "list_projects", "args": {}}
    reply     {"id": 1, "ok": true, "result": ...}
    error     {"id": 1, "ok": false, "error": {"code": ..., "message": ..., "details": {}}}
    stream    {"id": 1, "event": {...}} ... then {"id": 1, "end": true} (or an error)

Both sides check the length against their maximum *before* reading the body. A request
the daemon cannot read gets an error frame (``id`` 0 when its id is unknown) with
``bad_request`` and a ``reason``: ``frame_too_large`` (then the connection closes),
``malformed_frame``, ``too_deeply_nested`` (objects and arrays nested deeper than
:data:`MAX_DEPTH`), ``duplicate_key`` (a key given twice in one object, at any depth:
JSON parsers disagree on which one wins, so none is chosen), ``unknown_op`` or
``invalid_args``. The frame errors (:class:`MalformedFrameError`,
:class:`TooDeeplyNestedError`, :class:`DuplicateKeyError`, :class:`FrameTooLargeError`) are
``RequestError`` siblings of ``BadRequestError`` with its code, ``bad_request``: a reader
of a request frame catches the three decoding ones by name.

The daemon's side is here, on msgspec (strict decoding of every request). The client's
(``encode_request``, ``decode_server_frame``, ``ServerFrame``, ``MalformedFrameError``) is
in :mod:`runtime.wire.client_codec`, on the standard library's ``json``, re-exported here.
"""

from __future__ import annotations

import itertools
import json
import re
from typing import Any

import msgspec

from runtime.errors import RequestError, RoostError, WireError
from runtime.wire.client_codec import (
    MalformedFrameError,
    ServerFrame,
    decode_server_frame,
    encode_request,
    int_id,
)
from runtime.wire.framing import (
    DEFAULT_MAX_FRAME_BYTES,
    HEADER_SIZE,
    FrameTooLargeError,
    TruncatedFrameError,
    frame,
    read_frame,
)

__all__ = [
    "DEFAULT_MAX_FRAME_BYTES",
    "HEADER_SIZE",
    "MAX_DEPTH",
    "DuplicateKeyError",
    "FrameTooLargeError",
    "IntegerOutOfRangeError",
    "MalformedFrameError",
    "RequestFrame",
    "ServerFrame",
    "TooDeeplyNestedError",
    "TruncatedFrameError",
    "decode_json_strict",
    "decode_request",
    "decode_server_frame",
    "encode_end",
    "encode_error",
    "encode_frame",
    "encode_reply",
    "encode_request",
    "encode_stream_event",
    "internal_error",
    "read_frame",
    "unstorable_int_path",
]

MAX_DEPTH = 64
"""Deepest nesting of objects and arrays a request may have (the top-level object is 1)."""

_encoder = msgspec.json.Encoder()
# A JSON string token (escapes included); outside strings, ':' only separates a key from
# its value, so the colons left after removing strings count the members of every object.
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKETS = bytes(sorted(set(range(256)) - set(b"[]{}")))
_BRACKET_STEP = [0] * 256
_BRACKET_STEP[ord("[")] = _BRACKET_STEP[ord("{")] = 1
_BRACKET_STEP[ord("]")] = _BRACKET_STEP[ord("}")] = -1


class TooDeeplyNestedError(RequestError):
    """Objects and arrays nested deeper than the limit; ``details`` ``{reason, max_depth}``."""

    def __init__(self, max_depth: int, request_id: int = 0) -> None:
        super().__init__(
            f"frame nested deeper than {max_depth} levels of objects and arrays",
            reason="too_deeply_nested",
            max_depth=max_depth,
        )
        self.request_id = request_id


INT_MIN = -(2**63)
INT_MAX = 2**64 - 1
"""The integers a request may carry: what the journal's msgpack stores (int64 to uint64)."""
_LONG_DIGITS = re.compile(rb"\d{19,}")
"""A run of digits long enough to hold an integer outside ``INT_MIN``..``INT_MAX``."""


class IntegerOutOfRangeError(RequestError):
    """An integer the journal cannot store; ``details`` ``{reason, path, min, max}``."""

    def __init__(self, path: str, request_id: int = 0) -> None:
        super().__init__(
            f"the integer at {path} is outside {INT_MIN}..{INT_MAX}, the range the journal "
            "stores; send it as a string",
            reason="integer_out_of_range",
            path=path,
            min=str(INT_MIN),
            max=str(INT_MAX),
        )
        self.request_id = request_id


class DuplicateKeyError(RequestError):
    """An object gives a key twice; ``details`` ``{reason, key, path}`` (the first found)."""

    def __init__(self, key: str, path: str, request_id: int = 0) -> None:
        super().__init__(
            f"key {key!r} appears more than once in the object at {path}",
            reason="duplicate_key",
            key=key,
            path=path,
        )
        self.request_id = request_id


class RequestFrame(msgspec.Struct, frozen=True, kw_only=True):
    """A decoded request frame."""

    id: int
    """Chosen by the client, increasing per connection; echoed in the reply."""
    op: str
    """Operation name (``runtime.wire.ops.OPS``)."""
    args: dict[str, Any] = {}
    """The op's arguments."""


def encode_frame(message: Any) -> bytes:
    """Encode ``message`` (JSON-able or Structs) as one frame: length prefix and body."""
    return frame(_encoder.encode(message))


def encode_reply(request_id: int, result: Any) -> bytes:
    """Encode a successful reply frame."""
    return encode_frame({"id": request_id, "ok": True, "result": result})


def encode_error(request_id: int, error: RoostError | WireError) -> bytes:
    """Encode an error frame from a ``RoostError`` or a wire error dict."""
    wire = error.to_wire() if isinstance(error, RoostError) else error
    return encode_frame({"id": request_id, "ok": False, "error": wire})


def encode_stream_event(request_id: int, event: Any) -> bytes:
    """Encode one event of a stream."""
    return encode_frame({"id": request_id, "event": event})


def encode_end(request_id: int) -> bytes:
    """Encode the frame that ends a stream."""
    return encode_frame({"id": request_id, "end": True})


def _depth(structure: bytes) -> int:
    """Deepest nesting of ``[``/``{`` in JSON text whose strings were removed."""
    brackets = structure.translate(None, _NOT_BRACKETS)
    return max(itertools.accumulate(map(_BRACKET_STEP.__getitem__, brackets)), default=0)


class _Pairs(list[tuple[str, Any]]):
    """An object's members in document order, duplicates kept."""


def _first_duplicate(body: bytes) -> tuple[str, str]:
    """``(key, path)`` of the first object (in document order) that repeats a key."""
    stack: list[tuple[Any, str]] = [(json.loads(body, object_pairs_hook=_Pairs), "$")]
    while stack:
        value, path = stack.pop()
        if isinstance(value, _Pairs):
            seen: set[str] = set()
            for key, _ in value:
                if key in seen:
                    return key, path
                seen.add(key)
            children = [(child, f"{path}.{key}") for key, child in value]
        elif isinstance(value, list):
            children = [(child, f"{path}[{i}]") for i, child in enumerate(value)]
        else:
            continue
        stack.extend(reversed(children))
    return "?", "$"


def unstorable_int_path(value: Any) -> str | None:
    """The path of the first integer outside ``INT_MIN``..``INT_MAX`` in ``value``, if any."""
    stack: list[tuple[Any, str]] = [(value, "$")]
    while stack:
        item, path = stack.pop()
        if isinstance(item, dict):
            stack.extend((v, f"{path}.{k}") for k, v in reversed(item.items()))
        elif isinstance(item, list):
            stack.extend((v, f"{path}[{i}]") for i, v in reversed(list(enumerate(item))))
        elif type(item) is int and not INT_MIN <= item <= INT_MAX:
            return path
    return None


def decode_json_strict(body: bytes, max_depth: int = MAX_DEPTH) -> Any:
    """Decode a JSON document, refusing deep nesting, duplicate keys and unstorable integers.

    Raises :class:`MalformedFrameError` (not JSON), :class:`TooDeeplyNestedError`,
    :class:`DuplicateKeyError` and :class:`IntegerOutOfRangeError` (their ``request_id``
    is 0: the caller knows the id). Integers are looked for only when the text outside
    strings has a run of 19 digits or more, so an ordinary frame pays one regex search.
    """
    try:
        raw = msgspec.json.decode(body)
    except msgspec.DecodeError as e:
        raise MalformedFrameError(f"not valid JSON ({e})") from e
    except RecursionError as e:  # deeper than msgspec's own limit
        raise TooDeeplyNestedError(max_depth) from e
    structure = _STRING.sub(b"", body)
    if _depth(structure) > max_depth:
        raise TooDeeplyNestedError(max_depth)
    # Decoding keeps one member per key: re-encoded, a body with a repeated key has fewer.
    if structure.count(b":") != _STRING.sub(b"", _encoder.encode(raw)).count(b":"):
        raise DuplicateKeyError(*_first_duplicate(body))
    if _LONG_DIGITS.search(structure) is not None:
        path = unstorable_int_path(raw)
        if path is not None:
            raise IntegerOutOfRangeError(path)
    return raw


def decode_request(body: bytes) -> RequestFrame:
    """Decode a request body; raise :class:`MalformedFrameError` on a wrong shape.

    Nesting deeper than :data:`MAX_DEPTH` and duplicate keys anywhere are refused
    (:func:`decode_json_strict`: :class:`TooDeeplyNestedError`, :class:`DuplicateKeyError`,
    with the request's id when it can be read). The op and its arguments are checked separately
    (``runtime.wire.ops.validate_args``).
    """
    try:
        raw = decode_json_strict(body)
    except (TooDeeplyNestedError, DuplicateKeyError, IntegerOutOfRangeError) as e:
        e.request_id = _readable_id(body, e)
        raise
    if not isinstance(raw, dict):
        raise MalformedFrameError(f"expected an object, got {type(raw).__name__}")
    request_id = int_id(raw.get("id"))
    if request_id is None or request_id < 0:
        raise MalformedFrameError("'id' must be a non-negative integer")
    op = raw.get("op")
    if not isinstance(op, str):
        raise MalformedFrameError("'op' must be a string", request_id)
    args = raw.get("args", {})
    if not isinstance(args, dict):
        raise MalformedFrameError("'args' must be an object", request_id)
    extra = sorted(set(raw) - {"id", "op", "args"})
    if extra:
        raise MalformedFrameError(f"unexpected keys {extra}", request_id)
    return RequestFrame(id=request_id, op=op, args=args)


_ABOUT_THE_ID = {("$", "id"), ("$.id", None)}
"""``(path, key)`` of a refusal that is about the id itself: it given twice, out of range."""


def _readable_id(
    body: bytes, error: TooDeeplyNestedError | DuplicateKeyError | IntegerOutOfRangeError
) -> int:
    """The request id of a refused body when it can be told for sure, else 0."""
    if (error.details.get("path"), error.details.get("key")) in _ABOUT_THE_ID:
        return 0
    try:
        raw = msgspec.json.decode(body)
    except (msgspec.DecodeError, RecursionError):
        return 0
    request_id = int_id(raw.get("id")) if isinstance(raw, dict) else None
    return request_id if request_id is not None and request_id >= 0 else 0


def internal_error(op: str, error: Exception) -> WireError:
    """The wire error for an unexpected exception while serving ``op`` (``internal_error``)."""
    return {
        "code": "internal_error",
        "message": f"internal error while serving {op}: {type(error).__name__}: {error}",
        "details": {"op": op},
    }
