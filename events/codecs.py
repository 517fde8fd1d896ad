"""JSON and msgpack codecs for envelopes, and the canonical JSON used for hashing."""

from __future__ import annotations

from typing import Any

import msgspec

from events.envelope import Envelope

__all__ = [
    "canonical_json",
    "decode_envelope_json",
    "decode_envelope_msgpack",
    "decode_envelopes_json",
    "encode_envelope_json",
    "encode_envelope_msgpack",
    "to_builtins",
]

_json_encoder = msgspec.json.Encoder(order="sorted")
_msgpack_encoder = msgspec.msgpack.Encoder()
_json_decoder = msgspec.json.Decoder(Envelope)
_json_list_decoder = msgspec.json.Decoder(list[Envelope])
_msgpack_decoder = msgspec.msgpack.Decoder(Envelope)


def canonical_json(value: Any) -> bytes:
    """Encode ``value`` as JSON with sorted keys: the same value always gives the same bytes."""
    return _json_encoder.encode(value)


def encode_envelope_json(envelope: Envelope) -> bytes:
    """Encode an envelope as canonical JSON."""
    return _json_encoder.encode(envelope)


def decode_envelope_json(raw: bytes | str) -> Envelope:
    """Decode an envelope from JSON (raises ``msgspec.ValidationError`` on a bad shape)."""
    return _json_decoder.decode(raw)


def decode_envelopes_json(raw: bytes | str) -> list[Envelope]:
    """Decode a JSON array of envelopes."""
    return _json_list_decoder.decode(raw)


def encode_envelope_msgpack(envelope: Envelope) -> bytes:
    """Encode an envelope as msgpack."""
    return _msgpack_encoder.encode(envelope)


def decode_envelope_msgpack(raw: bytes) -> Envelope:
    """Decode an envelope from msgpack."""
    return _msgpack_decoder.decode(raw)


def to_builtins(value: Any) -> Any:
    """Convert Structs (and nested values) to plain dicts and lists."""
    return msgspec.to_builtins(value)
