"""The stored form of an envelope: the bytes in a journal row's ``state``, in two formats.

Format 1 (every journal written before format 2, still read): the envelope as a msgpack
map with its field names, ``seq`` 0, every id and hash as text. Format 2 (every row written
now): a version byte, then a msgpack array of the fields in a fixed order, without what
the row already holds (``seq`` is the row's position, ``type`` its ``topic``), with
canonical UUIDs as 16 bytes, SHA-256 hashes as 32 bytes and ``at`` as milliseconds since
the epoch, each only where the text comes back exactly from the compact form (otherwise
it stays text); a state whose array is large enough that deflate makes it smaller is
stored deflated under version byte 3.

What is hashed does not change: the chain hashes the envelope's canonical JSON
(:func:`events.chain.chain_hash`), and decoding gives the envelope back field for field,
so a row verifies the same in either format. A format-1 state begins with a msgpack map
(``0x80`` to ``0x8f``, ``0xde``, ``0xdf``), never with byte 2 or 3.
"""

from __future__ import annotations

import functools
import zlib
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import msgspec

from events.envelope import Envelope

__all__ = ["FORMAT", "decode_rows", "decode_state", "encode_state", "state_keys"]

FORMAT = 2
"""The format every row is written in."""

_PLAIN = b"\x02"
_DEFLATED = b"\x03"
_DEFLATE_FROM = 512
"""Arrays shorter than this are stored as they are: deflate wins little on them (ids and
hashes do not compress) and costs more than the rest of the encoding."""


class _Compact(msgspec.Struct, array_like=True):
    """A format-2 array (ids, hashes and ``at`` in their compact form or as text)."""

    stream_version: int
    event_id: Any
    at: Any
    project_id: str
    conversation_id: str | None
    correlation_id: str
    causation_id: Any
    data: dict[str, Any]
    hash: Any
    prev_hash: Any


class _Keys2(msgspec.Struct, array_like=True):
    """The leading fields of a format-2 array, up to the indexed ones."""

    stream_version: int
    event_id: Any
    at: Any
    project_id: str
    conversation_id: str | None
    correlation_id: str


class _Keys1(msgspec.Struct):
    """The indexed fields of a format-1 map (the rest is skipped while decoding)."""

    conversation_id: str | None = None
    correlation_id: str | None = None


_encoder = msgspec.msgpack.Encoder()
_compact = msgspec.msgpack.Decoder(_Compact)
_keys2 = msgspec.msgpack.Decoder(_Keys2)
_keys1 = msgspec.msgpack.Decoder(_Keys1)
_format1 = msgspec.msgpack.Decoder(Envelope)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _pack_uuid(text: str | None) -> str | bytes | None:
    if text is None or len(text) != 36 or text[8] != "-" or text[13] != "-":
        return text
    digits = text[:8] + text[9:13] + text[14:18] + text[19:23] + text[24:]
    try:
        packed = bytes.fromhex(digits)
    except ValueError:
        return text
    if len(packed) != 16 or text[18] != "-" or text[23] != "-" or packed.hex() != digits:
        return text
    return packed


def _unpack_uuid(value: Any) -> Any:
    if isinstance(value, bytes):
        h = value.hex()
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
    return value


def _pack_hash(text: str) -> str | bytes:
    """A SHA-256 hash as its 32 bytes; any other text as it is."""
    try:
        packed = bytes.fromhex(text)
    except ValueError:
        return text
    if len(packed) != 32 or packed.hex() != text:
        return text
    return packed


def _unpack_hash(value: Any) -> Any:
    return value.hex() if isinstance(value, bytes) else value


_RECENT_SECONDS = 256
"""How many seconds' texts each cache below keeps: events are written and read close to
``now``, so a few minutes' worth serve nearly every call, and a daemon that runs for weeks
keeps no more than these (a cache of 4,096 grew by one entry per second for over an hour)."""


@functools.lru_cache(maxsize=_RECENT_SECONDS)
def _second_text(seconds: int) -> str:
    """``YYYY-MM-DDTHH:MM:SS.`` of a second since the epoch (UTC): what ``at`` begins with."""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S.")


def _format_ms(ms: int) -> str:
    seconds, millis = divmod(ms, 1000)
    return f"{_second_text(seconds)}{millis:03d}Z"


@functools.lru_cache(maxsize=_RECENT_SECONDS)
def _epoch_seconds(prefix: str) -> int | None:
    """Seconds since the epoch of a canonical ``YYYY-MM-DDTHH:MM:SS`` (UTC), else None."""
    try:
        moment = datetime.fromisoformat(prefix + "+00:00")
    except ValueError:
        return None
    delta = moment - _EPOCH
    seconds = delta.days * 86400 + delta.seconds
    if seconds < 0 or _format_ms(seconds * 1000)[:19] != prefix:
        return None
    return seconds


def _pack_at(at: str) -> str | int:
    """A canonical ``at`` (``YYYY-MM-DDTHH:MM:SS.mmmZ``) as milliseconds; other text as is."""
    millis = at[20:23]
    seconds = _epoch_seconds(at[:19])
    if (
        seconds is None
        or len(at) != 24
        or at[19] != "."
        or at[23] != "Z"
        or not (millis.isascii() and millis.isdigit())
    ):
        return at
    return seconds * 1000 + int(millis)


def _unpack_at(value: Any) -> Any:
    return _format_ms(value) if isinstance(value, int) else value


def encode_state(envelope: Envelope) -> bytes:
    """The format-2 state of ``envelope`` (its ``seq`` and ``type`` are not stored)."""
    body = _encoder.encode(
        (
            envelope.stream_version,
            _pack_uuid(envelope.event_id),
            _pack_at(envelope.at),
            envelope.project_id,
            envelope.conversation_id,
            envelope.correlation_id,
            _pack_uuid(envelope.causation_id),
            envelope.data,
            _pack_hash(envelope.hash),
            _pack_hash(envelope.prev_hash),
        )
    )
    if len(body) >= _DEFLATE_FROM:
        deflated = zlib.compress(body, 6, wbits=-15)
        if len(deflated) < len(body):
            return _DEFLATED + deflated
    return _PLAIN + body


class _Format1:
    """A format-1 state: the envelope as a msgpack map with its field names."""

    def envelope(self, state: bytes, topic: str, seq: int) -> Envelope:
        envelope = _format1.decode(state)
        msgspec.structs.force_setattr(envelope, "seq", seq)
        return envelope

    def keys(self, state: bytes) -> tuple[str | None, str | None]:
        keys = _keys1.decode(state)
        return keys.conversation_id, keys.correlation_id


class _Format2:
    """A format-2 state: a version byte, then the compact array, as it is or deflated."""

    def __init__(self, body: Callable[[bytes], bytes]) -> None:
        self.body = body
        """The array of a state of this version."""

    def envelope(self, state: bytes, topic: str, seq: int) -> Envelope:
        c = _compact.decode(self.body(state))
        return Envelope(
            seq=seq,
            stream_version=c.stream_version,
            event_id=_unpack_uuid(c.event_id),
            type=topic,
            at=_unpack_at(c.at),
            project_id=c.project_id,
            conversation_id=c.conversation_id,
            correlation_id=c.correlation_id,
            causation_id=_unpack_uuid(c.causation_id),
            data=c.data,
            hash=_unpack_hash(c.hash),
            prev_hash=_unpack_hash(c.prev_hash),
        )

    def keys(self, state: bytes) -> tuple[str | None, str | None]:
        keys = _keys2.decode(self.body(state))
        return keys.conversation_id, keys.correlation_id


_FORMAT_1 = _Format1()
_PLAIN_2 = _Format2(lambda state: state[1:])
_DEFLATED_2 = _Format2(lambda state: zlib.decompress(state[1:], wbits=-15))


def _format_of(state: bytes) -> _Format1 | _Format2:
    """The format of ``state``, by its first byte (a format-1 map never begins with 2 or 3)."""
    head = state[:1]
    if head == _PLAIN:
        return _PLAIN_2
    if head == _DEFLATED:
        return _DEFLATED_2
    return _FORMAT_1


def decode_state(state: bytes, topic: str, seq: int) -> Envelope:
    """The envelope stored as ``state`` in a row of ``topic`` at position ``seq``.

    Raises ``msgspec.DecodeError`` or ``msgspec.ValidationError`` on bytes of neither format.
    """
    return _format_of(state).envelope(state, topic, seq)


def decode_rows(rows: list[tuple[int, int, str, bytes]]) -> list[Envelope]:
    """Decode ``(seq, version, topic, state)`` rows: :func:`decode_state`, inlined for speed.

    Replay and every query decode row after row; the per-field conversions are written out
    here, and an id seen earlier in the rows (a causation is mostly an earlier event of the
    same turn) is reused instead of formatted again.
    """
    out: list[Envelope] = []
    append = out.append
    decode = _compact.decode
    second_text = _second_text
    ids: dict[bytes, str] = {}
    for seq, _version, topic, state in rows:
        if state[:1] != _PLAIN:
            append(decode_state(state, topic, seq))
            continue
        c = decode(memoryview(state)[1:])
        event_id = c.event_id
        if event_id.__class__ is bytes:
            h = event_id.hex()
            event_id = ids[c.event_id] = f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
        cause = c.causation_id
        if cause.__class__ is bytes:
            known = ids.get(cause)
            if known is None:
                h = cause.hex()
                known = f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
            cause = known
        at = c.at
        if at.__class__ is int:
            second, millis = divmod(at, 1000)
            at = f"{second_text(second)}{millis:03d}Z"
        digest = c.hash
        prev = c.prev_hash
        append(
            Envelope(
                seq=seq,
                stream_version=c.stream_version,
                event_id=event_id,
                type=topic,
                at=at,
                project_id=c.project_id,
                conversation_id=c.conversation_id,
                correlation_id=c.correlation_id,
                causation_id=cause,
                data=c.data,
                hash=digest.hex() if digest.__class__ is bytes else digest,
                prev_hash=prev.hex() if prev.__class__ is bytes else prev,
            )
        )
    return out


def state_keys(state: bytes) -> tuple[str | None, str | None]:
    """``(conversation_id, correlation_id)`` of a state of either format.

    Bytes that are no envelope (eventsourcing's own tests store such) give ``(None, None)``.
    """
    try:
        return _format_of(state).keys(state)
    except (msgspec.DecodeError, msgspec.ValidationError, zlib.error):
        return None, None
