"""Which of a project's events a query reads: one conversation's, by index, in a seq window.

Both stores keep each event's ``conversation_id`` and ``correlation_id`` in columns of their
own next to the stored envelope, indexed with the project's stream: ``(stream,
conversation_id, seq)`` and ``(stream, correlation_id, seq)``. A :class:`Scope` names the
rows a query wants in those terms, and each store turns it into one indexed ``SELECT``
whose ``ORDER BY seq`` and ``LIMIT`` the database applies, so a query reads the rows it
returns, not the project's history.

The columns are filled from the stored envelope itself (:func:`event_keys`), on insert and,
for a journal written before they existed, once when the journal is opened.
"""

from __future__ import annotations

import msgspec

__all__ = ["INDEX_COLUMNS", "Scope", "event_keys"]

INDEX_COLUMNS = ("conversation_id", "correlation_id")
"""The columns the stores add to eventsourcing's ``stored_events``."""


class Scope(msgspec.Struct, frozen=True, kw_only=True):
    """A selection of one project's events, in terms the indexes answer."""

    conversation_id: str | None
    """This conversation's events; None: the project-level events (no conversation)."""
    correlation_id: str | None = None
    """Only the events of this correlation."""
    topics: tuple[str, ...] = ()
    """Only events of these types (empty: every type)."""
    after_seq: int = 0
    """Only events whose ``seq`` is greater than this."""
    before_seq: int | None = None
    """Only events whose ``seq`` is less than this (None: no upper bound)."""


class _Keys(msgspec.Struct):
    """The indexed fields of a stored envelope (the rest is skipped while decoding)."""

    conversation_id: str | None = None
    correlation_id: str | None = None


_KEYS = msgspec.msgpack.Decoder(_Keys)


def event_keys(state: bytes) -> tuple[str | None, str | None]:
    """``(conversation_id, correlation_id)`` of a stored envelope's msgpack bytes.

    Bytes that are no envelope (eventsourcing's own tests store such) give ``(None, None)``.
    """
    try:
        keys = _KEYS.decode(state)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None, None
    return keys.conversation_id, keys.correlation_id
