"""Which of a project's events a query reads: one conversation's, by index, in a seq window.

Both stores keep each event's ``conversation_id`` and its ``correlation_id`` (or, in a
SQLite journal of layout 2, a 32-bit digest of it) in columns of their own next to the
stored envelope, indexed as ``(stream, conversation_id, seq)`` and ``(stream,
correlation_id, seq)`` (layout 2: ``(correlation digest, seq)``). A :class:`Scope` names the
rows a query wants in those terms, and each store turns it into one indexed ``SELECT``
whose ``ORDER BY seq`` and ``LIMIT`` the database applies, so a query reads the rows it
returns, not the project's history.

The columns are filled from the stored envelope itself (:func:`event_keys`), on insert and,
for a journal written before they existed, once when the journal is opened.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from runtime.journal.stored import state_keys

__all__ = ["INDEX_COLUMNS", "Condition", "Scope", "event_keys", "where"]

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


Condition = tuple[bool, str, Sequence[Any]]
"""An SQL condition of a query: whether it applies, its text, its parameters in order."""


def where(*conditions: Condition) -> tuple[str, list[Any]]:
    """The conditions that apply joined with ``AND``, and their parameters in order.

    A query's optional conditions are a table of :data:`Condition` rows, read here by one
    loop, rather than one branch per condition in each store.
    """
    applied = [(text, params) for applies, text, params in conditions if applies]
    return " AND ".join(text for text, _ in applied), [p for _, ps in applied for p in ps]


def event_keys(state: bytes) -> tuple[str | None, str | None]:
    """``(conversation_id, correlation_id)`` of a stored envelope (either stored format).

    Bytes that are no envelope (eventsourcing's own tests store such) give ``(None, None)``.
    """
    return state_keys(state)
