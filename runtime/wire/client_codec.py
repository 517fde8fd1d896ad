"""The client's side of the frames, on the standard library's ``json``: no msgspec.

Every client (``roost``'s commands, ``roost mcp serve``, ``roost a2a serve``, the soak
harness) encodes its requests and decodes the daemon's frames here, so a ``roost send``
loads no codec beyond ``json`` (``docs/performance.md``, "The thin client"). The daemon
keeps msgspec (:mod:`runtime.wire.protocol`): it validates every request it reads, strictly.

What a request encodes to is what msgspec's encoder would give, value for value: UTF-8
text as is, integers of any size, shortest round-trip floats (``1e16`` is spelt ``1e+16``,
the same number). The rarer values msgspec encodes its own way take its path, loaded then
only: a non-finite float (msgspec writes ``null``), bytes (base64), sets, dates and other
types ``json`` does not know (:func:`msgspec.to_builtins`). A string with a lone surrogate
(an argument the shell passed as undecodable bytes) raises ``UnicodeEncodeError``, as
msgspec does.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, Literal, NamedTuple

from runtime.errors import RequestError
from runtime.wire.framing import frame

__all__ = [
    "MalformedFrameError",
    "ServerFrame",
    "ServerFrameKind",
    "decode_server_frame",
    "encode_json",
    "encode_request",
    "int_id",
]


class MalformedFrameError(RequestError):
    """A frame body is not JSON or not the expected shape; ``request_id`` if it was readable."""

    def __init__(self, problem: str, request_id: int = 0) -> None:
        super().__init__(f"malformed frame: {problem}", reason="malformed_frame", problem=problem)
        self.request_id = request_id


ServerFrameKind = Literal["result", "error", "event", "end"]
"""What a frame from the daemon carries."""


class ServerFrame(NamedTuple):
    """A decoded frame from the daemon."""

    id: int
    """The request it answers (0: the daemon could not read the request)."""
    kind: ServerFrameKind
    """What the frame carries."""
    value: Any = None
    """The result, the wire error ``{code, message, details}``, or the event."""


def _msgspec_builtins(value: object) -> object:
    """A value ``json`` does not know, as msgspec's encoder would write it (bytes: base64)."""
    import msgspec  # noqa: PLC0415 - only for values plain JSON types do not cover

    return msgspec.to_builtins(value)


_COMPACT = json.JSONEncoder(
    ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=_msgspec_builtins
)
_INDENTED = json.JSONEncoder(
    ensure_ascii=False, indent=2, allow_nan=False, default=_msgspec_builtins
)


def encode_json(value: object, *, indent: bool = False) -> bytes:
    """``value`` as UTF-8 JSON, as msgspec's encoder would give it (see the module).

    Compact, or with ``indent`` two spaces a level, as ``msgspec.json.format(..., indent=2)``
    lays it out (``roost --json``).
    """
    try:
        return (_INDENTED if indent else _COMPACT).encode(value).encode()
    except ValueError:  # NaN or an infinity (msgspec writes null), or a lone surrogate
        import msgspec  # noqa: PLC0415 - the rare case only

        raw = msgspec.json.encode(value)
        return msgspec.json.format(raw, indent=2) if indent else raw


def encode_request(request_id: int, op: str, args: Mapping[str, object]) -> bytes:
    """Encode a request frame: length prefix and ``{"id", "op", "args"}``."""
    return frame(encode_json({"id": request_id, "op": op, "args": args}))


def int_id(value: object) -> int | None:
    """A frame's ``id``: an integer (not a bool), else None."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return None


def decode_server_frame(body: bytes) -> ServerFrame:
    """Decode a frame from the daemon; raise :class:`MalformedFrameError` on a wrong shape."""
    try:
        raw = json.loads(body)
    except (ValueError, RecursionError) as e:  # not JSON, not UTF-8, or absurdly deep
        raise MalformedFrameError(f"reply is not valid JSON ({e})") from e
    if not isinstance(raw, dict) or int_id(raw.get("id")) is None:
        raise MalformedFrameError("reply must be an object with an integer 'id'")
    frame_id = int(raw["id"])
    for kind, fits, value in _SERVER_FRAMES:
        if fits(raw):
            return ServerFrame(id=frame_id, kind=kind, value=value(raw))
    raise MalformedFrameError(f"unrecognised reply keys {sorted(raw)}", frame_id)


_SERVER_FRAMES: tuple[
    tuple[
        ServerFrameKind, Callable[[dict[str, object]], bool], Callable[[dict[str, object]], object]
    ],
    ...,
] = (
    ("result", lambda raw: raw.get("ok") is True and "result" in raw, lambda raw: raw["result"]),
    (
        "error",
        lambda raw: raw.get("ok") is False and isinstance(raw.get("error"), dict),
        lambda raw: raw["error"],
    ),
    ("event", lambda raw: "event" in raw, lambda raw: raw["event"]),
    ("end", lambda raw: raw.get("end") is True, lambda raw: None),
)
"""Each kind of frame the daemon sends (:data:`ServerFrame.kind`), first fit first: how it is
told from its keys, and the value it carries."""
