"""The two table layouts of a SQLite journal: how stream ids, correlations, batch keys are kept.

A journal's layout is its ``PRAGMA user_version``: 2 for a journal created now, 0 (layout 1)
for one created before layout 2 existed, which keeps its layout. The stored envelope's
format is per row (:mod:`runtime.journal.stored`) and the same in both.

========================  =====================================  ==============================
                          layout 1                               layout 2
========================  =====================================  ==============================
``originator_id``         the stream's UUID, 32 hex digits       its number in ``roost_streams``
correlation, indexed      ``correlation_id`` (text), with the    ``correlation_key``: 64 bits of
                          stream: ``(originator_id,              BLAKE2b of the id, alone:
                          correlation_id)``                      ``(correlation_key)``
batch keys                ``roost_batches``: the key as text,    16 bytes of BLAKE2b of the
                          kept for good                          key, in two generations
                                                                 (``roost_batches`` is their
                                                                 union), kept 1 to 2 hours
========================  =====================================  ==============================

A stream's number is given, in the transaction of its first event, by the writer that
appends it (one writer per project); it is never reused, not even after the project's
deletion. A read finds it by a subquery on ``roost_streams``, so a read needs no cache.
Two correlations or two batch keys with the same digest are told apart where it matters:
a scope's rows are checked against their decoded ``correlation_id``
(:meth:`runtime.journal.store.Journal.read_scope`); a batch key collides with a chance of
2^-128.

A batch key only has to outlive every retry of its batch (a client's retry on a new
connection, the journal link's resend for up to 30 s, an actor's resend to a restarted
Journal), so layout 2 keeps each key for at least :data:`BATCH_KEY_RETENTION_S`: keys go into
the current generation; when it is that old, the first append with a key empties the
other generation (keys at least that old) and makes it the current one.
"""

from __future__ import annotations

import hashlib
import sqlite3
import time
from collections.abc import Callable
from typing import Any
from uuid import UUID

__all__ = [
    "BATCH_KEY_RETENTION_S",
    "LAYOUT",
    "Layout",
    "correlation_key",
    "layout_2_statements",
]

LAYOUT = 2
"""The table layout of a journal created now."""

BATCH_KEY_RETENTION_S = 3600
"""How long layout 2 keeps a batch key at least (at most twice as long)."""


def correlation_key(correlation_id: str | None) -> int | None:
    """The 64-bit digest of a correlation id that layout 2 indexes (signed, as SQLite's)."""
    if correlation_id is None:
        return None
    digest = hashlib.blake2b(correlation_id.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def _batch_digest(key: str) -> bytes:
    return hashlib.blake2b(key.encode(), digest_size=16).digest()


def layout_2_statements(table: str) -> list[str]:
    """The statements that create a journal of layout 2."""
    return [
        f"CREATE TABLE IF NOT EXISTS {table} (originator_id INTEGER, originator_version INTEGER, "
        "topic TEXT, state BLOB, conversation_id TEXT, correlation_key INTEGER, "
        "PRIMARY KEY (originator_id, originator_version))",
        "CREATE TABLE IF NOT EXISTS roost_streams (number INTEGER PRIMARY KEY, "
        "stream BLOB NOT NULL UNIQUE)",
        "CREATE INDEX IF NOT EXISTS roost_events_by_conversation "
        f"ON {table} (originator_id, conversation_id)",
        f"CREATE INDEX IF NOT EXISTS roost_events_by_correlation ON {table} (correlation_key)",
        *(
            f"CREATE TABLE IF NOT EXISTS roost_batches_{g} (batch_key BLOB PRIMARY KEY, "
            "ranges BLOB NOT NULL) WITHOUT ROWID"
            for g in (0, 1)
        ),
        "CREATE VIEW IF NOT EXISTS roost_batches AS SELECT * FROM roost_batches_0 "
        "UNION ALL SELECT * FROM roost_batches_1",
        "CREATE TABLE IF NOT EXISTS roost_batch_generation (current INTEGER NOT NULL, "
        "since INTEGER NOT NULL)",
        "INSERT INTO roost_batch_generation SELECT 0, CAST(strftime('%s') AS INTEGER) "
        "WHERE NOT EXISTS (SELECT 1 FROM roost_batch_generation)",
        f"PRAGMA user_version={LAYOUT}",
    ]


class Layout:
    """How one journal's layout stores what its queries look up."""

    def __init__(self, version: int) -> None:
        self.version = version
        """1 or 2."""
        self.correlation_column = "correlation_key" if version == 2 else "correlation_id"
        """The indexed correlation column."""
        self.stream_sql = (
            "(SELECT number FROM roost_streams WHERE stream=?)" if version == 2 else "?"
        )
        """What a query compares ``originator_id`` with; its parameter is :meth:`stream`."""
        self.clock: Callable[[], float] = time.time
        """The wall clock that ages batch-key generations."""
        self.batch_tables = (
            ("roost_batches_0", "roost_batches_1") if version == 2 else ("roost_batches",)
        )
        """The tables that hold batch keys (``roost_batches`` reads them all)."""
        self._numbers: dict[UUID, int] = {}
        self.streams: dict[int, UUID] = {}
        """The streams whose number this recorder has seen (committed), by number."""

    def stream(self, originator_id: UUID) -> str | bytes:
        """The parameter of :attr:`stream_sql` for a stream."""
        return originator_id.bytes if self.version == 2 else originator_id.hex

    def correlation(self, correlation_id: str | None) -> Any:
        """A correlation id as :attr:`correlation_column` holds it."""
        return correlation_key(correlation_id) if self.version == 2 else correlation_id

    def batch_key(self, key: str) -> str | bytes:
        """A batch key as ``roost_batches`` holds it."""
        return _batch_digest(key) if self.version == 2 else key

    def stored_key(self, stored: Any) -> str:
        """A key as ``roost_batches`` returns it, as text (hex digits in layout 2)."""
        return bytes(stored).hex() if self.version == 2 else str(stored)

    def key_of_text(self, text: str) -> str | bytes:
        """The stored key of :meth:`stored_key`'s text."""
        return bytes.fromhex(text) if self.version == 2 else text

    def batch_table_for_insert(self, c: sqlite3.Cursor) -> str:
        """The table a batch key goes into, in the inserting transaction ``c``.

        In layout 2, turns the generations over first when the current one is
        :data:`BATCH_KEY_RETENTION_S` old.
        """
        if self.version != 2:
            return "roost_batches"
        c.execute("SELECT current, since FROM roost_batch_generation")
        current, since = c.fetchone()
        now = int(self.clock())
        if now - int(since) >= BATCH_KEY_RETENTION_S:
            current = 1 - int(current)
            c.execute(f"DELETE FROM roost_batches_{current}")
            c.execute("UPDATE roost_batch_generation SET current=?, since=?", (current, now))
        return f"roost_batches_{int(current)}"

    def stream_for_insert(
        self, c: sqlite3.Cursor, originator_id: UUID, fresh: dict[UUID, int]
    ) -> str | int:
        """The ``originator_id`` of a row, in the inserting transaction ``c``.

        A stream without a number gets one; it is added to ``fresh`` and becomes known
        once the transaction is committed (:meth:`committed`).
        """
        if self.version != 2:
            return originator_id.hex
        number = self._numbers.get(originator_id) or fresh.get(originator_id)
        if number is None:
            c.execute("SELECT number FROM roost_streams WHERE stream=?", (originator_id.bytes,))
            row = c.fetchone()
            if row is not None:
                number = self._known(originator_id, int(row[0]))
            else:
                c.execute("INSERT INTO roost_streams (stream) VALUES (?)", (originator_id.bytes,))
                number = fresh[originator_id] = int(c.lastrowid or 0)
        return number

    def committed(self, fresh: dict[UUID, int]) -> None:
        """Remember the numbers given in a committed transaction."""
        for originator_id, number in fresh.items():
            self._known(originator_id, number)

    def _known(self, originator_id: UUID, number: int) -> int:
        self._numbers[originator_id] = number
        self.streams[number] = originator_id
        return number

    def number_of(self, c: sqlite3.Cursor, originator_id: UUID) -> int | None:
        """A stream's number in layout 2 (None: the stream has no event yet)."""
        number = self._numbers.get(originator_id)
        if number is None:
            c.execute("SELECT number FROM roost_streams WHERE stream=?", (originator_id.bytes,))
            row = c.fetchone()
            if row is not None:
                number = self._known(originator_id, int(row[0]))
        return number

    def load_streams(self, c: sqlite3.Cursor) -> None:
        """Learn every stream's number committed so far, if some are not known yet."""
        c.execute("SELECT max(number) FROM roost_streams")
        top = c.fetchone()[0]
        if top is None or top in self.streams:
            return
        c.execute("SELECT number, stream FROM roost_streams")
        for number, stream in c.fetchall():
            self._known(UUID(bytes=bytes(stream)), int(number))
