"""The SQLite journal store: eventsourcing's SQLite recorder, made durable and batched.

What we add to ``eventsourcing.sqlite``:

- every connection runs in WAL mode with ``synchronous=FULL`` (a commit survives a crash);
- a batch of events is written with one ``executemany`` in one transaction, and its global
  positions are derived from ``last_insert_rowid()`` (the writer holds the write lock, so
  the rowids of one transaction are contiguous);
- a ``roost_batches`` table records each batch's idempotency key in the same transaction,
  so a retried batch is recognised instead of appended twice;
- reads of one stream that also return the global position (``rowid``);
- a project's deletion (``delete_stream``, ``drop_batches``, ``rewrite_batches`` of
  :meth:`RoostSQLiteRecorder.insert_events`) in the transaction of its deletion record.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

from eventsourcing.persistence import StoredEvent
from eventsourcing.sqlite import (
    SQLiteApplicationRecorder,
    SQLiteConnection,
    SQLiteConnectionPool,
    SQLiteCursor,
    SQLiteDatastore,
    SQLiteFactory,
)

__all__ = ["RoostSQLiteFactory", "RoostSQLiteRecorder", "StreamRow"]

StreamRow = tuple[int, int, bytes]
"""``(seq, originator_version, state)`` of one stored event."""


class _DurablePool(SQLiteConnectionPool):
    """Connections in WAL mode with ``synchronous=FULL``."""

    def _create_connection(self) -> SQLiteConnection:
        connection = super()._create_connection()
        if not self.is_sqlite_memory_mode:
            connection._sqlite_conn.execute("PRAGMA synchronous=FULL")
        return connection


class _DurableDatastore(SQLiteDatastore):
    """A datastore whose pool is :class:`_DurablePool`."""

    def __init__(self, db_name: str, *, lock_timeout: int | None = None) -> None:
        super().__init__(db_name, lock_timeout=lock_timeout)
        self.pool.close()
        self.pool = _DurablePool(db_name=db_name, lock_timeout=lock_timeout)


class RoostSQLiteRecorder(SQLiteApplicationRecorder):
    """Application recorder with batched inserts, idempotency keys and positioned reads."""

    def construct_create_table_statements(self) -> list[str]:
        """Add the batch-key table to eventsourcing's ``stored_events``."""
        statements = super().construct_create_table_statements()
        statements.append(
            "CREATE TABLE IF NOT EXISTS roost_batches ("
            "batch_key TEXT PRIMARY KEY, "
            "ranges BLOB NOT NULL)"
        )
        return statements

    def _insert_events(
        self,
        c: SQLiteCursor,
        stored_events: Sequence[StoredEvent],
        **kwargs: Any,
    ) -> Sequence[int] | None:
        batch_rows: Sequence[tuple[str, bytes]] = kwargs.get("batch_rows") or ()
        if batch_rows:
            c.executemany("INSERT INTO roost_batches VALUES (?, ?)", batch_rows)
        params = [
            (
                s.originator_id.hex if isinstance(s.originator_id, UUID) else s.originator_id,
                s.originator_version,
                s.topic,
                s.state,
            )
            for s in stored_events
        ]
        c.executemany(self.insert_events_statement, params)
        c.execute("SELECT last_insert_rowid()")
        last = int(c.fetchone()[0])
        first = last - len(params) + 1
        # A deletion goes after the insert: the table has no AUTOINCREMENT, so a rowid is
        # max(rowid) + 1, and the deletion record must take its place above the deleted
        # events, or the next events would reuse their global positions.
        _delete_project(c, self.events_table_name, kwargs)
        return list(range(first, last + 1))

    def select_all_batches(self) -> list[tuple[str, bytes]]:
        """Every ``(batch_key, ranges)`` (for a project's deletion)."""
        with self.datastore.transaction(commit=False) as c:
            c.execute("SELECT batch_key, ranges FROM roost_batches")
            return [(str(r[0]), bytes(r[1])) for r in c.fetchall()]

    def select_stream(self, originator_id: UUID, *, gt: int = 0) -> list[StreamRow]:
        """Return ``(seq, version, state)`` of a stream's events after version ``gt``."""
        with self.datastore.transaction(commit=False) as c:
            raw = c.sqlite_cursor
            raw.row_factory = None  # plain tuples: (int, int, bytes) as stored
            raw.execute(
                f"SELECT rowid, originator_version, state FROM {self.events_table_name} "
                "WHERE originator_id=? AND originator_version>? ORDER BY originator_version",
                (originator_id.hex, gt),
            )
            rows: list[StreamRow] = raw.fetchall()
            return rows

    def select_stream_range(self, originator_id: UUID, first: int, last: int) -> list[StreamRow]:
        """Return ``(seq, version, state)`` for versions ``first..last`` of a stream."""
        with self.datastore.transaction(commit=False) as c:
            c.execute(
                f"SELECT rowid, originator_version, state FROM {self.events_table_name} "
                "WHERE originator_id=? AND originator_version>=? AND originator_version<=? "
                "ORDER BY originator_version",
                (originator_id.hex, first, last),
            )
            return [(int(r[0]), int(r[1]), bytes(r[2])) for r in c.fetchall()]

    def select_batches(self, keys: Sequence[str]) -> dict[str, bytes]:
        """Return the stored ranges of those batch keys that were already committed."""
        if not keys:
            return {}
        with self.datastore.transaction(commit=False) as c:
            marks = ",".join("?" * len(keys))
            c.execute(
                f"SELECT batch_key, ranges FROM roost_batches WHERE batch_key IN ({marks})",
                list(keys),
            )
            return {str(r[0]): bytes(r[1]) for r in c.fetchall()}

    def integrity_check(self) -> str:
        """Run ``PRAGMA integrity_check`` and return its first line (``ok`` when sound)."""
        with self.datastore.transaction(commit=False) as c:
            c.execute("PRAGMA integrity_check")
            return str(c.fetchone()[0])


def _delete_project(c: SQLiteCursor, table: str, kwargs: dict[str, Any]) -> None:
    """Delete a stream's events and drop or rewrite its batch keys, if asked to."""
    stream: UUID | None = kwargs.get("delete_stream")
    if stream is None:
        return
    c.execute(f"DELETE FROM {table} WHERE originator_id=?", (stream.hex,))
    drop: Sequence[str] = kwargs.get("drop_batches") or ()
    if drop:
        c.executemany("DELETE FROM roost_batches WHERE batch_key=?", [(k,) for k in drop])
    rewrite: Sequence[tuple[str, bytes]] = kwargs.get("rewrite_batches") or ()
    if rewrite:
        c.executemany(
            "UPDATE roost_batches SET ranges=? WHERE batch_key=?", [(r, k) for k, r in rewrite]
        )


class RoostSQLiteFactory(SQLiteFactory):
    """eventsourcing factory for the durable SQLite store (``PERSISTENCE_MODULE``)."""

    application_recorder_class = RoostSQLiteRecorder

    def __init__(self, env: Any) -> None:
        super().__init__(env)
        db_name = self.datastore.pool.db_name
        lock_timeout = self.datastore.pool.lock_timeout
        self.datastore.close()
        self.datastore = _DurableDatastore(db_name, lock_timeout=lock_timeout)
