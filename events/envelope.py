"""The event envelope, the identifiers it carries, and the clock format of ``at``."""

from __future__ import annotations

import secrets
import uuid
from datetime import UTC, datetime
from typing import Any

import msgspec

from events.catalog import Event, payload_to_data

__all__ = [
    "GENESIS_HASH",
    "Envelope",
    "NewEvent",
    "format_at",
    "new_call_id",
    "new_correlation_id",
    "new_event",
    "new_event_id",
]

GENESIS_HASH = "0" * 64
"""``prev_hash`` of the first event of a project."""


class NewEvent(msgspec.Struct, frozen=True, kw_only=True):
    """An event before commit: the journal assigns its seq, stream version and hash."""

    event_id: str
    """UUID of the event."""
    type: str
    """Dotted event type."""
    at: str
    """UTC time, ISO 8601 with milliseconds."""
    project_id: str
    """Owning project."""
    conversation_id: str | None = None
    """Owning conversation; null for project-level events."""
    correlation_id: str
    """Ties everything caused by one inbound message."""
    causation_id: str | None = None
    """``event_id`` of the event that caused this one; null for inbound events."""
    data: dict[str, Any] = {}
    """The type's payload."""


class Envelope(msgspec.Struct, frozen=True, kw_only=True):
    """A committed event, exactly as it appears on the wire and in projections."""

    seq: int
    """Global position in the journal, assigned at commit."""
    stream_version: int
    """Position within its stream (the project's or the conversation's), from 1."""
    event_id: str
    """UUID of the event."""
    type: str
    """Dotted event type."""
    at: str
    """UTC time, ISO 8601 with milliseconds."""
    project_id: str
    """Owning project."""
    conversation_id: str | None
    """Owning conversation; null for project-level events."""
    correlation_id: str
    """Ties everything caused by one inbound message."""
    causation_id: str | None
    """``event_id`` of the event that caused this one; null for inbound events."""
    data: dict[str, Any]
    """The type's payload."""
    hash: str
    """SHA-256 over this event's body and ``prev_hash``."""
    prev_hash: str
    """``hash`` of the project's previous event (``GENESIS_HASH`` for the first)."""


def format_at(moment: datetime) -> str:
    """Format a datetime as UTC ISO 8601 with milliseconds and a ``Z`` suffix."""
    zone = moment.tzinfo
    if zone is not UTC:  # the clock's own moments are UTC already: no conversion
        moment = moment.replace(tzinfo=UTC) if zone is None else moment.astimezone(UTC)
    return f"{moment.isoformat(timespec='milliseconds')[:-6]}Z"  # without "+00:00"


def new_event_id() -> str:
    """Return a fresh event id (UUID4 text)."""
    return str(uuid.uuid4())


def new_correlation_id() -> str:
    """Return a fresh correlation id: ``corr-`` and 20 hex digits."""
    return "corr-" + secrets.token_hex(10)


def new_call_id() -> str:
    """Return a fresh tool call id: ``call-`` and 16 hex digits."""
    return "call-" + secrets.token_hex(8)


def new_event(
    payload: Event,
    *,
    project_id: str,
    at: str,
    correlation_id: str,
    conversation_id: str | None = None,
    causation_id: str | None = None,
    event_id: str | None = None,
) -> NewEvent:
    """Build a :class:`NewEvent` from a typed payload."""
    return NewEvent(
        event_id=event_id or new_event_id(),
        type=payload.__struct_config__.tag,  # type: ignore[arg-type]
        at=at,
        project_id=project_id,
        conversation_id=conversation_id,
        correlation_id=correlation_id,
        causation_id=causation_id,
        data=payload_to_data(payload),
    )
