"""The SQLite journal store: eventsourcing's SQLite recorder, made durable and batched.

It implements :mod:`runtime.journal.recorder` (``BACKEND``). What we add to
``eventsourcing.sqlite``:

- every connection runs in WAL mode with ``synchronous=FULL`` (a commit survives a crash);
- a batch of events is written with one ``executemany`` in one transaction, and its global
  positions are derived from ``last_insert_rowid()`` (the writer holds the write lock, so
  the rowids of one transaction are contiguous);
- a ``roost_batches`` table records each batch's idempotency key in the same transaction,
  so a retried batch is recognised instead of appended twice;
- reads of one stream that also return the global position (``rowid``);
- each event's ``conversation_id`` and ``correlation_id`` in columns of their own, indexed
  with the stream (:mod:`runtime.journal.scope`), so a conversation's events are read by
  index; a journal written before those columns gets them, filled in, when it is opened.
- a project's deletion (the ``deletion`` of :meth:`RoostSQLiteRecorder.insert_events`) in
  the transaction of its deletion record;
- a ``roost_snapshots`` table, one row per conversation (:mod:`runtime.journal.snapshots`).

A journal created now has table layout 2, one created before layout 1, which it keeps
(:mod:`runtime.journal.sqlite_layout`); the layout is chosen once, under the write lock, by
the opener that creates the tables.
"""

from __future__ import annotations

import functools
import sqlite3
from collections import defaultdict
from collections.abc import Sequence
from typing import Any
from uuid import UUID

from eventsourcing.persistence import Notification, StoredEvent
from eventsourcing.sqlite import (
    SQLiteApplicationRecorder,
    SQLiteConnection,
    SQLiteConnectionPool,
    SQLiteCursor,
    SQLiteDatastore,
    SQLiteFactory,
)

from runtime.journal.recorder import (
    JournalBackend,
    JournalRecorder,
    SnapshotRow,
    StreamDeletion,
    StreamRow,
)
from runtime.journal.scope import Scope, event_keys, where
from runtime.journal.sqlite_layout import LAYOUT, Fresh, Layout, layout_2_statements, layout_of
from runtime.journal.sqlite_migrations import INDEXES, UPGRADES

__all__ = ["BACKEND", "RoostSQLiteFactory", "RoostSQLiteRecorder"]

_SNAPSHOTS_TABLE = (
    "CREATE TABLE IF NOT EXISTS roost_snapshots ("
    "project_id TEXT NOT NULL, conversation_id TEXT NOT NULL, "
    "seq INTEGER NOT NULL, stream_version INTEGER NOT NULL, head_hash TEXT NOT NULL, "
    "format INTEGER NOT NULL, body BLOB NOT NULL, "
    "PRIMARY KEY (project_id, conversation_id))"
)
"""The snapshots' table, in every layout."""


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


class RoostSQLiteRecorder(SQLiteApplicationRecorder, JournalRecorder):
    """Application recorder with batched inserts, idempotency keys and positioned reads."""

    @functools.cached_property
    def layout(self) -> Layout:
        """The journal's table layout, read once (or set by :meth:`create_table`)."""
        with self.datastore.transaction(commit=False) as c:
            return layout_of(self._read_layout(c) or LAYOUT)

    def _read_layout(self, c: SQLiteCursor) -> int:
        """2 or 1 for a journal whose tables exist, 0 before they do."""
        c.execute("PRAGMA user_version")
        if int(c.fetchone()[0]) >= 2:
            return 2
        c.execute(
            "SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (self.events_table_name,)
        )
        return 1 if c.fetchone() is not None else 0

    def convert_originator_id(self, originator_id: Any) -> UUID | str:
        """A stored stream id as a UUID (layout 2 stores the stream's number)."""
        if isinstance(originator_id, int):
            with self.datastore.transaction(commit=False) as c:
                self.layout.streams.load(c.sqlite_cursor)
            return UUID(bytes=self.layout.streams.names[originator_id])
        return super().convert_originator_id(originator_id)

    def select_notifications(
        self,
        start: int | None,
        limit: int,
        stop: int | None = None,
        topics: Sequence[str] = (),
        *,
        inclusive_of_start: bool = True,
    ) -> Sequence[Notification]:
        """Events by position (eventsourcing's read), with layout 2's streams and topics."""
        layout = self.layout
        if layout.version != 2:
            return super().select_notifications(
                start, limit, stop, topics, inclusive_of_start=inclusive_of_start
            )
        table = self.events_table_name
        conditions, params = where(
            (start is not None, "rowid>=?" if inclusive_of_start else "rowid>?", (start,)),
            (stop is not None, "rowid<=?", (stop,)),
            (bool(topics), layout.topics_in(len(topics)), topics),
        )
        condition = f"WHERE {conditions} " if conditions else ""
        with self.datastore.transaction(commit=False) as c:
            raw = c.sqlite_cursor
            raw.row_factory = None
            layout.streams.load(raw)
            raw.execute(
                f"SELECT rowid, originator_id, originator_version, topic, state FROM {table} "
                f"{condition}ORDER BY rowid LIMIT ?",
                [*params, limit],
            )
            rows = layout.named(raw, raw.fetchall(), 3)
            names = layout.streams.names
            if any(r[1] not in names for r in rows):  # committed since the load
                layout.streams.load(raw)
        return [
            Notification(
                id=seq,
                originator_id=UUID(bytes=names[number]),
                originator_version=version,
                topic=topic,
                state=state,
            )
            for seq, number, version, topic, state in rows
        ]

    def select_events(self, originator_id: UUID | str, **kwargs: Any) -> Sequence[StoredEvent]:
        """Read one stream (eventsourcing's), its id and topics as this layout stores them."""
        layout = self.layout
        if not isinstance(originator_id, UUID) or layout.version != 2:
            return super().select_events(originator_id, **kwargs)
        with self.datastore.transaction(commit=False) as c:
            number = layout.streams.number_of(c.sqlite_cursor, originator_id.bytes)
            layout.topics.load(c.sqlite_cursor)
        if number is None:
            return []
        events = super().select_events(number, **kwargs)  # type: ignore[arg-type]
        return [
            StoredEvent(
                originator_id=originator_id,
                originator_version=e.originator_version,
                topic=layout.topics.names[e.topic],  # type: ignore[index]
                state=e.state,
            )
            for e in events
        ]

    def insert_events(
        self,
        stored_events: Sequence[StoredEvent],
        *,
        batch_rows: Sequence[tuple[str, bytes]] = (),
        deletion: StreamDeletion | None = None,
        **kwargs: Any,
    ) -> Sequence[int] | None:
        """Insert in one transaction; numbers it gave are known once it is committed."""
        fresh: Fresh = defaultdict(dict)
        seqs = super().insert_events(
            stored_events, fresh_numbers=fresh, batch_rows=batch_rows, deletion=deletion, **kwargs
        )
        self.layout.committed(fresh)
        return seqs

    def construct_create_table_statements(self) -> list[str]:
        """Add the batch-key table to eventsourcing's ``stored_events``."""
        statements = super().construct_create_table_statements()
        statements.append(
            "CREATE TABLE IF NOT EXISTS roost_batches ("
            "batch_key TEXT PRIMARY KEY, "
            "ranges BLOB NOT NULL)"
        )
        return statements

    def create_table(self) -> None:
        """Create the tables of layout 2, or add to a layout-1 journal what it lacks.

        The checks are reads; only a journal without tables, or a layout-1 journal that lacks
        an index column or an index, is locked for writing (``BEGIN IMMEDIATE``), checked
        again and created or migrated, so two processes opening a file at once create or
        migrate it once, the second waiting for the first.
        """
        with self.datastore.transaction(commit=False) as c:
            layout = self._read_layout(c)
        if not layout:
            with self.datastore.get_connection(commit=True) as conn:
                raw: sqlite3.Connection = conn._sqlite_conn
                raw.execute("BEGIN IMMEDIATE")
                try:
                    c = SQLiteCursor(raw.cursor())
                    layout = self._read_layout(c)
                    if not layout:
                        for statement in layout_2_statements(self.events_table_name):
                            c.execute(statement)
                        c.execute(_SNAPSHOTS_TABLE)
                        layout = LAYOUT
                except BaseException:
                    raw.rollback()
                    raise
                raw.commit()
        self.layout = layout_of(layout)
        if layout != 2:
            super().create_table()
        if self._lacking():
            self._migrate()

    def _migrate(self) -> None:
        """Add what the journal lacks, under the write lock (checked again there)."""
        with self.datastore.get_connection(commit=True) as conn:
            raw = conn._sqlite_conn
            raw.execute("BEGIN IMMEDIATE")
            try:
                c = SQLiteCursor(raw.cursor())
                c.execute(_SNAPSHOTS_TABLE)
                UPGRADES[self.layout.version].migrate(c, self.events_table_name)
            except BaseException:
                raw.rollback()
                raise
            raw.commit()

    def _lacking(self) -> bool:
        """Whether the snapshots' table, an index column or an index is missing (a read)."""
        with self.datastore.transaction(commit=False) as c:
            c.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='roost_snapshots'")
            if c.fetchone() is None:
                return True
            return UPGRADES[self.layout.version].lacks(c, self.events_table_name)

    def _insert_events(
        self,
        c: SQLiteCursor,
        stored_events: Sequence[StoredEvent],
        **kwargs: Any,
    ) -> Sequence[int] | None:
        layout = self.layout
        batch_rows: Sequence[tuple[str, bytes]] = kwargs.get("batch_rows") or ()
        if batch_rows:
            table = layout.batch_table_for_insert(c.sqlite_cursor)
            c.executemany(
                f"INSERT INTO {table} VALUES (?, ?)",
                [(layout.batch_key(key), ranges) for key, ranges in batch_rows],
            )
        fresh: Fresh = kwargs.get("fresh_numbers", defaultdict(dict))
        raw = c.sqlite_cursor
        params = []
        for s in stored_events:
            conversation, correlation = event_keys(s.state)
            oid = s.originator_id
            params.append(
                (
                    layout.stream_for_insert(raw, oid, fresh) if isinstance(oid, UUID) else oid,
                    s.originator_version,
                    layout.topic_for_insert(raw, s.topic, fresh),
                    s.state,
                    conversation,
                    layout.correlation(correlation),
                )
            )
        c.executemany(
            f"INSERT INTO {self.events_table_name} (originator_id, originator_version, topic, "
            f"state, conversation_id, {layout.correlation_column}) VALUES (?,?,?,?,?,?)",
            params,
        )
        c.execute("SELECT last_insert_rowid()")
        last = int(c.fetchone()[0])
        first = last - len(params) + 1
        # A deletion goes after the insert: the table has no AUTOINCREMENT, so a rowid is
        # max(rowid) + 1, and the deletion record must take its place above the deleted
        # events, or the next events would reuse their global positions.
        deletion: StreamDeletion | None = kwargs.get("deletion")
        if deletion is not None:
            _delete_project(c, self.events_table_name, layout, deletion)
        return list(range(first, last + 1))

    def upsert_snapshot(self, row: SnapshotRow) -> None:
        """Store a conversation's snapshot in place of its last one (one transaction)."""
        with self.datastore.transaction(commit=True) as c:
            c.execute("INSERT OR REPLACE INTO roost_snapshots VALUES (?,?,?,?,?,?,?)", row)

    def select_snapshots(
        self, project_id: str, conversation_id: str | None = None
    ) -> list[SnapshotRow]:
        """The project's snapshots (one conversation's, when given), by conversation."""
        conditions, params = where(
            (True, "project_id=?", (project_id,)),
            (conversation_id is not None, "conversation_id=?", (conversation_id,)),
        )
        with self.datastore.transaction(commit=False) as c:
            c.execute(
                f"SELECT * FROM roost_snapshots WHERE {conditions} ORDER BY conversation_id",
                params,
            )
            return [
                (str(r[0]), str(r[1]), int(r[2]), int(r[3]), str(r[4]), int(r[5]), bytes(r[6]))
                for r in c.fetchall()
            ]

    def select_all_batches(self) -> list[tuple[str, bytes]]:
        """Every ``(batch_key, ranges)`` (for a project's deletion)."""
        with self.datastore.transaction(commit=False) as c:
            c.execute("SELECT batch_key, ranges FROM roost_batches")
            return [(self.layout.stored_key(r[0]), bytes(r[1])) for r in c.fetchall()]

    def select_stream(
        self, originator_id: UUID, *, gt: int = 0, limit: int | None = None
    ) -> list[StreamRow]:
        """``(seq, version, topic, state)`` after version ``gt`` (the first ``limit``)."""
        with self.datastore.transaction(commit=False) as c:
            raw = c.sqlite_cursor
            raw.row_factory = None  # plain tuples: (int, int, str, bytes) as stored
            raw.execute(
                f"SELECT rowid, originator_version, topic, state FROM {self.events_table_name} "
                f"WHERE originator_id={self.layout.stream_sql} "
                "AND originator_version>? ORDER BY originator_version LIMIT ?",
                (self.layout.stream(originator_id), gt, -1 if limit is None else limit),
            )
            return self.layout.named(raw, raw.fetchall())

    def select_stream_range(self, originator_id: UUID, first: int, last: int) -> list[StreamRow]:
        """Return ``(seq, version, topic, state)`` for versions ``first..last`` of a stream."""
        with self.datastore.transaction(commit=False) as c:
            table = self.events_table_name
            raw = c.sqlite_cursor
            raw.row_factory = None
            raw.execute(
                f"SELECT rowid, originator_version, topic, state FROM {table} "
                f"WHERE originator_id={self.layout.stream_sql} "
                "AND originator_version>=? AND originator_version<=? ORDER BY originator_version",
                (self.layout.stream(originator_id), first, last),
            )
            rows: list[StreamRow] = self.layout.named(raw, raw.fetchall())
            return rows

    def _scope_sql(self, columns: str, originator_id: UUID, scope: Scope) -> tuple[str, list[Any]]:
        """The ``SELECT`` of ``columns`` for the rows of ``scope``, through its index."""
        index = INDEXES["correlation_id" if scope.correlation_id is not None else "conversation_id"]
        layout = self.layout
        conversation, correlation = scope.conversation_id, scope.correlation_id
        conditions, params = where(
            (True, f"originator_id={layout.stream_sql}", (layout.stream(originator_id),)),
            (conversation is None, "conversation_id IS NULL", ()),
            (conversation is not None, "conversation_id=?", (conversation,)),
            (
                correlation is not None,
                f"{layout.correlation_column}=?",
                (layout.correlation(correlation),),
            ),
            (bool(scope.topics), layout.topics_in(len(scope.topics)), scope.topics),
            (True, "rowid>?", (scope.after_seq,)),
            (scope.before_seq is not None, "rowid<?", (scope.before_seq,)),
        )
        sql = (
            f"SELECT {columns} FROM {self.events_table_name} INDEXED BY {index} WHERE {conditions}"
        )
        return sql, params

    def select_scope(
        self, originator_id: UUID, scope: Scope, *, limit: int | None = None, newest: bool = False
    ) -> list[StreamRow]:
        """``(seq, version, topic, state)`` of the rows of ``scope``, at most ``limit``.

        In seq order, or newest first with ``newest``. In layout 2 a row of another
        correlation whose id has the same 32-bit digest is among them: the caller checks the
        decoded envelope's ``correlation_id``.
        """
        sql, params = self._scope_sql(
            "rowid, originator_version, topic, state", originator_id, scope
        )
        sql += " ORDER BY rowid DESC" if newest else " ORDER BY rowid"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        with self.datastore.transaction(commit=False) as c:
            raw = c.sqlite_cursor
            raw.row_factory = None
            raw.execute(sql, params)
            rows: list[StreamRow] = self.layout.named(raw, raw.fetchall())
            return rows

    def count_scope(self, originator_id: UUID, scope: Scope) -> int:
        """How many rows ``scope`` holds (counted in its index)."""
        sql, params = self._scope_sql("COUNT(*)", originator_id, scope)
        with self.datastore.transaction(commit=False) as c:
            c.execute(sql, params)
            return int(c.fetchone()[0])

    def has_stream(self, originator_id: UUID) -> bool:
        """Whether the stream has any event."""
        with self.datastore.transaction(commit=False) as c:
            c.execute(
                f"SELECT 1 FROM {self.events_table_name} "
                f"WHERE originator_id={self.layout.stream_sql} LIMIT 1",
                (self.layout.stream(originator_id),),
            )
            return c.fetchone() is not None

    def select_batches(self, keys: Sequence[str]) -> dict[str, bytes]:
        """Return the stored ranges of those batch keys that were already committed."""
        if not keys:
            return {}
        stored = {self.layout.batch_key(key): key for key in keys}
        with self.datastore.transaction(commit=False) as c:
            marks = ",".join("?" * len(keys))
            c.execute(
                f"SELECT batch_key, ranges FROM roost_batches WHERE batch_key IN ({marks})",
                list(stored),
            )
            return {stored[r[0]]: bytes(r[1]) for r in c.fetchall()}

    def integrity_check(self) -> str:
        """Run ``PRAGMA integrity_check`` and return its first line (``ok`` when sound)."""
        with self.datastore.transaction(commit=False) as c:
            c.execute("PRAGMA integrity_check")
            return str(c.fetchone()[0])


def _delete_project(c: SQLiteCursor, table: str, layout: Layout, deletion: StreamDeletion) -> None:
    """Delete a stream's events and snapshots and drop or rewrite its batch keys.

    The keys are given as :meth:`RoostSQLiteRecorder.select_all_batches` returns them.
    """
    c.execute(
        f"DELETE FROM {table} WHERE originator_id={layout.stream_sql}",
        (layout.stream(deletion.stream),),
    )
    c.execute("DELETE FROM roost_snapshots WHERE project_id=?", (deletion.project_id,))
    drop, rewrite = deletion.drop_batches, deletion.rewrite_batches
    for batches in layout.batch_tables:  # an empty list of keys executes nothing
        c.executemany(
            f"DELETE FROM {batches} WHERE batch_key=?", [(layout.key_of_text(k),) for k in drop]
        )
        c.executemany(
            f"UPDATE {batches} SET ranges=? WHERE batch_key=?",
            [(r, layout.key_of_text(k)) for k, r in rewrite],
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


BACKEND = JournalBackend(
    factory=RoostSQLiteFactory,
    home_file="journal.sqlite",
    path_setting="SQLITE_DBNAME",
    settings={"SQLITE_LOCK_TIMEOUT": "30"},
)
"""The SQLite journal: one file in ``ROOST_HOME``, WAL mode, ``synchronous=FULL``."""
