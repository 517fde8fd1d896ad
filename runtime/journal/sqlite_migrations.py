"""How a SQLite journal of an older shape is brought up to date, layout by layout.

A journal of layout 1 written before the index columns existed gets them, filled in from
each stored envelope, and their indexes; one of layout 2 was created with both
(:mod:`runtime.journal.sqlite_layout`). :data:`UPGRADES` holds each layout's check and
migration; :class:`runtime.journal.sqlite.RoostSQLiteRecorder` runs them when it opens
the file, the migration under the write lock.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from eventsourcing.sqlite import SQLiteCursor

from runtime.journal.scope import INDEX_COLUMNS, event_keys

__all__ = ["INDEXES", "UPGRADES"]

INDEXES = {
    "conversation_id": "roost_events_by_conversation",
    "correlation_id": "roost_events_by_correlation",
}
"""Index per column; each is ``(originator_id, column)`` and ends with the rowid (the seq)."""

_BACKFILL_PAGE = 20000


def _missing_columns(c: SQLiteCursor, table: str) -> list[str]:
    c.execute(f"PRAGMA table_info({table})")
    have = {str(row[1]) for row in c.fetchall()}
    return [column for column in INDEX_COLUMNS if column not in have]


def _backfill(c: SQLiteCursor, table: str) -> None:
    """Fill the index columns of every stored event from its envelope (one migration)."""
    last = 0
    while True:
        c.execute(
            f"SELECT rowid, state FROM {table} WHERE rowid>? ORDER BY rowid LIMIT ?",
            (last, _BACKFILL_PAGE),
        )
        rows = [(int(r[0]), bytes(r[1])) for r in c.fetchall()]
        if not rows:
            return
        c.executemany(
            f"UPDATE {table} SET conversation_id=?, correlation_id=? WHERE rowid=?",
            [(*event_keys(state), rowid) for rowid, state in rows],
        )
        last = rows[-1][0]


def _layout_1_lacks(c: SQLiteCursor, table: str) -> bool:
    """Whether a layout-1 journal lacks an index column or an index."""
    if _missing_columns(c, table):
        return True
    c.execute("SELECT name FROM sqlite_master WHERE type='index'")
    have = {str(row[0]) for row in c.fetchall()}
    return not set(INDEXES.values()) <= have


def _layout_1_migrate(c: SQLiteCursor, table: str) -> None:
    """Add a layout-1 journal's missing index columns (filled in) and indexes."""
    missing = _missing_columns(c, table)
    for column in missing:
        c.execute(f"ALTER TABLE {table} ADD COLUMN {column} TEXT")
    if missing:
        _backfill(c, table)
    for column, index in INDEXES.items():
        c.execute(f"CREATE INDEX IF NOT EXISTS {index} ON {table} (originator_id, {column})")


def _layout_2_lacks(c: SQLiteCursor, table: str) -> bool:
    """Nothing: a layout-2 journal is created with its index columns and indexes."""
    return False


def _layout_2_migrate(c: SQLiteCursor, table: str) -> None:
    """Nothing to add (see :func:`_layout_2_lacks`)."""


class _Upgrade(NamedTuple):
    """How a journal of one layout is brought up to date, beside the snapshots' table."""

    lacks: Callable[[SQLiteCursor, str], bool]
    """Whether it lacks something (a read)."""
    migrate: Callable[[SQLiteCursor, str], None]
    """Add what it lacks (under the write lock)."""


UPGRADES = {
    1: _Upgrade(lacks=_layout_1_lacks, migrate=_layout_1_migrate),
    2: _Upgrade(lacks=_layout_2_lacks, migrate=_layout_2_migrate),
}
"""Each layout's upgrade, by version."""
