"""The msgspec mapper: how an envelope becomes an eventsourcing ``StoredEvent`` and back.

eventsourcing's default mapper reads ``vars(event)``, which msgspec Structs do not have.
Ours stores each envelope in its stored form (:mod:`runtime.journal.stored`: msgpack,
without its ``seq``, which only exists after commit, nor its type) in the project's stream:
``originator_id`` is the project's UUID, ``originator_version`` its position in the
project, ``topic`` the event type.
"""

from __future__ import annotations

import functools
import uuid
from datetime import datetime
from typing import Any

import msgspec
from eventsourcing.persistence import Mapper, StoredEvent, Transcoder

from events.envelope import Envelope
from runtime.journal.stored import decode_rows, decode_state, encode_state

__all__ = ["JournalRecord", "MsgpackTranscoder", "MsgspecMapper", "project_stream_id"]

_PROJECT_NAMESPACE = uuid.UUID("5b1d7c52-6f0e-4c57-9a2a-52a6f2b1c0de")


@functools.lru_cache(maxsize=4096)
def project_stream_id(project_id: str) -> uuid.UUID:
    """Return the eventsourcing originator id of a project's stream."""
    return uuid.uuid5(_PROJECT_NAMESPACE, project_id)


class JournalRecord(msgspec.Struct, frozen=True, kw_only=True):
    """An envelope at its place in a project stream (eventsourcing's domain event)."""

    originator_id: uuid.UUID
    """The project stream."""
    originator_version: int
    """Position in the project stream, from 1."""
    envelope: Envelope
    """The event; its ``seq`` is 0 until committed."""

    @property
    def timestamp(self) -> datetime:
        """The event's time (eventsourcing's protocol asks for one)."""
        return datetime.fromisoformat(self.envelope.at.replace("Z", "+00:00"))


class MsgpackTranscoder(Transcoder):
    """A transcoder that encodes plain values with msgspec msgpack."""

    def __init__(self) -> None:
        self._encoder = msgspec.msgpack.Encoder()
        self._decoder = msgspec.msgpack.Decoder()

    def encode(self, obj: Any) -> bytes:
        """Encode a plain value."""
        return self._encoder.encode(obj)

    def decode(self, data: bytes) -> Any:
        """Decode a plain value."""
        return self._decoder.decode(data)


class MsgspecMapper(Mapper[uuid.UUID]):
    """Maps :class:`JournalRecord` to ``StoredEvent`` in the stored form (~µs per event)."""

    def __init__(self) -> None:
        super().__init__(transcoder=MsgpackTranscoder())

    def to_stored_event(self, domain_event: Any) -> StoredEvent:
        """Encode a :class:`JournalRecord`."""
        record: JournalRecord = domain_event
        return StoredEvent(
            originator_id=record.originator_id,
            originator_version=record.originator_version,
            topic=record.envelope.type,
            state=encode_state(record.envelope),
        )

    def to_domain_event(self, stored_event: StoredEvent) -> Any:
        """Decode a ``StoredEvent`` into a :class:`JournalRecord` (seq unknown: 0)."""
        originator_id = stored_event.originator_id
        if not isinstance(originator_id, uuid.UUID):
            originator_id = uuid.UUID(str(originator_id))
        return JournalRecord(
            originator_id=originator_id,
            originator_version=stored_event.originator_version,
            envelope=decode_state(stored_event.state, stored_event.topic, 0),
        )

    def decode_envelope(self, state: bytes, topic: str, seq: int) -> Envelope:
        """Decode a row's stored bytes, with its topic and its committed ``seq``."""
        return decode_state(state, topic, seq)

    def decode_rows(self, rows: list[tuple[int, int, str, bytes]]) -> list[Envelope]:
        """Decode ``(seq, version, topic, state)`` rows (the replay hot path)."""
        return decode_rows(rows)
