"""The PostgreSQL journal store: eventsourcing's PostgreSQL recorder plus batch keys.

It implements :mod:`runtime.journal.recorder` (``BACKEND``).
eventsourcing already serialises inserts with a table lock (so ``notification_id`` order is
commit order) and ``NOTIFY``s a channel on every insert. We add the ``roost_batches``
idempotency table, written in the same transaction as the events, positioned reads, a
project's deletion (its snapshots with it) in the transaction of its deletion record
(``notification_id`` comes from a sequence, so deleted positions are never given again), a
``<events table>_snapshots`` table (:mod:`runtime.journal.snapshots`), and
each event's ``conversation_id`` and ``correlation_id`` in indexed columns of their own
(:mod:`runtime.journal.scope`); a table written before they existed gets them, filled in,
when the journal is opened. eventsourcing's database function for inserts does not fill
them, so it is never used.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

from eventsourcing.persistence import StoredEvent
from eventsourcing.postgres import PostgresApplicationRecorder, PostgresFactory
from psycopg import Cursor
from psycopg.rows import DictRow
from psycopg.sql import SQL, Composed, Identifier

from runtime.journal.pg_check import check_postgres_settings
from runtime.journal.recorder import (
    JournalBackend,
    JournalRecorder,
    SnapshotRow,
    StreamDeletion,
    StreamRow,
)
from runtime.journal.scope import INDEX_COLUMNS, Scope, event_keys, where

__all__ = ["BACKEND", "RoostPostgresFactory", "RoostPostgresRecorder"]


class RoostPostgresRecorder(PostgresApplicationRecorder, JournalRecorder):
    """Application recorder with idempotency keys and positioned reads."""

    def __init__(self, datastore: Any, *, events_table_name: str = "stored_events") -> None:
        super().__init__(datastore, events_table_name=events_table_name)
        self.batches_table_name = events_table_name + "_batches"
        self.sql_create_statements.append(
            self._sql(
                "CREATE TABLE IF NOT EXISTS {schema}.{table} ("
                "batch_key text PRIMARY KEY, ranges bytea NOT NULL)",
                self.batches_table_name,
            )
        )
        self.snapshots_table_name = events_table_name + "_snapshots"
        self.sql_create_statements.append(
            self._sql(
                "CREATE TABLE IF NOT EXISTS {schema}.{table} ("
                "project_id text NOT NULL, conversation_id text NOT NULL, "
                "seq bigint NOT NULL, stream_version bigint NOT NULL, head_hash text NOT NULL, "
                "format integer NOT NULL, body bytea NOT NULL, "
                "PRIMARY KEY (project_id, conversation_id))",
                self.snapshots_table_name,
            )
        )
        self.datastore.enable_db_functions = False  # its INSERT leaves the index columns empty
        self._indexes = {
            "conversation_id": events_table_name + "_by_conversation",
            "correlation_id": events_table_name + "_by_correlation",
        }
        self._insert_sql = SQL(
            "INSERT INTO {schema}.{table} (originator_id, originator_version, topic, state, "
            "conversation_id, correlation_id) "
            "SELECT * FROM unnest(%s::{id_type}[], %s::bigint[], %s::text[], %s::bytea[], "
            "%s::text[], %s::text[]) RETURNING notification_id"
        ).format(
            schema=Identifier(self.datastore.schema),
            table=Identifier(events_table_name),
            id_type=Identifier(self.datastore.originator_id_type),
        )

    def create_table(self) -> None:
        """Create the tables, then add and fill the index columns a table lacks."""
        super().create_table()
        with self.datastore.transaction(commit=False) as curs:
            without = self._missing_columns(curs)
        if without:
            with self.datastore.transaction(commit=True) as curs:
                curs.execute(self._sql("LOCK TABLE {schema}.{table}", self.events_table_name))
                missing = self._missing_columns(curs)
                for column in missing:
                    curs.execute(
                        self._sql(
                            f"ALTER TABLE {{schema}}.{{table}} ADD COLUMN {column} text",
                            self.events_table_name,
                        )
                    )
                if missing:
                    self._backfill(curs)
        present = {
            str(r["indexname"])
            for r in self._select(
                SQL("SELECT indexname FROM pg_indexes WHERE schemaname=%s AND tablename=%s"),
                (self.datastore.schema, self.events_table_name),
            )
        }
        lacking = {c: i for c, i in self._indexes.items() if i not in present}
        if not lacking:  # the usual open: no statement that locks the table
            return
        with self.datastore.transaction(commit=True) as curs:
            for column, index in lacking.items():
                curs.execute(
                    SQL(
                        "CREATE INDEX IF NOT EXISTS {index} ON {schema}.{table} "
                        f"(originator_id, {column}, notification_id)"
                    ).format(
                        index=Identifier(index),
                        schema=Identifier(self.datastore.schema),
                        table=Identifier(self.events_table_name),
                    )
                )

    def _missing_columns(self, curs: Cursor[DictRow]) -> list[str]:
        curs.execute(
            SQL(
                "SELECT column_name FROM information_schema.columns "
                "WHERE table_schema=%s AND table_name=%s"
            ),
            (self.datastore.schema, self.events_table_name),
        )
        have = {str(r["column_name"]) for r in curs.fetchall()}
        return [column for column in INDEX_COLUMNS if column not in have]

    def _backfill(self, curs: Cursor[DictRow]) -> None:
        """Fill the index columns of every stored event from its envelope (one migration)."""
        last = 0
        while True:
            curs.execute(
                self._sql(
                    "SELECT notification_id, state FROM {schema}.{table} "
                    "WHERE notification_id>%s ORDER BY notification_id LIMIT 20000",
                    self.events_table_name,
                ),
                (last,),
            )
            rows = [(int(r["notification_id"]), bytes(r["state"])) for r in curs.fetchall()]
            if not rows:
                return
            curs.executemany(
                self._sql(
                    "UPDATE {schema}.{table} SET conversation_id=%s, correlation_id=%s "
                    "WHERE notification_id=%s",
                    self.events_table_name,
                ),
                [(*event_keys(state), seq) for seq, state in rows],
            )
            last = rows[-1][0]

    def _insert_stored_events(
        self,
        curs: Cursor[DictRow],
        stored_events: Sequence[StoredEvent],
        **kwargs: Any,
    ) -> None:
        """Insert the events with their index columns (under eventsourcing's table lock)."""
        self._lock_table(curs)
        self._notify_channel(curs)
        keys = [event_keys(s.state) for s in stored_events]
        curs.execute(
            self._insert_sql,
            (
                [s.originator_id for s in stored_events],
                [s.originator_version for s in stored_events],
                [s.topic for s in stored_events],
                [s.state for s in stored_events],
                [k[0] for k in keys],
                [k[1] for k in keys],
            ),
        )

    def _sql(self, text: str, table: str) -> Composed:
        """``text`` with its ``{schema}.{table}`` naming ``table`` in this recorder's schema."""
        return SQL(text).format(schema=Identifier(self.datastore.schema), table=Identifier(table))

    def _insert_events(
        self,
        curs: Cursor[DictRow],
        stored_events: Sequence[StoredEvent],
        **kwargs: Any,
    ) -> None:
        batch_rows: Sequence[tuple[str, bytes]] = kwargs.get("batch_rows") or ()
        # psycopg's executemany of no rows still enters and leaves a pipeline (a round trip)
        if batch_rows:
            curs.executemany(
                self._sql(
                    "INSERT INTO {schema}.{table} (batch_key, ranges) VALUES (%s, %s)",
                    self.batches_table_name,
                ),
                list(batch_rows),
            )
        deletion: StreamDeletion | None = kwargs.get("deletion")
        if deletion is None:
            return
        where = "DELETE FROM {schema}.{table} WHERE "
        curs.execute(
            self._sql(where + "originator_id=%s", self.events_table_name), (deletion.stream,)
        )
        curs.execute(
            self._sql(where + "project_id=%s", self.snapshots_table_name), (deletion.project_id,)
        )
        batches = self.batches_table_name
        if deletion.drop_batches:
            curs.execute(
                self._sql(where + "batch_key = ANY(%s)", batches), (list(deletion.drop_batches),)
            )
        if deletion.rewrite_batches:
            curs.executemany(
                self._sql("UPDATE {schema}.{table} SET ranges=%s WHERE batch_key=%s", batches),
                [(r, k) for k, r in deletion.rewrite_batches],
            )

    def _select(self, statement: Composed | SQL, params: Sequence[Any]) -> list[DictRow]:
        with self.datastore.get_connection() as conn, conn.cursor() as curs:
            curs.execute(statement, params)
            return curs.fetchall()

    def _stream(
        self, versions: str, params: Sequence[Any], limit: int | None = None
    ) -> list[StreamRow]:
        """``(seq, version, topic, state)`` of the stream's events whose version is ``versions``."""
        rows = self._select(
            self._sql(
                "SELECT notification_id, originator_version, topic, state FROM {schema}.{table} "
                f"WHERE originator_id=%s AND {versions} ORDER BY originator_version LIMIT %s",
                self.events_table_name,
            ),
            (*params, limit),  # LIMIT NULL is no limit
        )
        return [_row(r) for r in rows]

    def select_stream(
        self, originator_id: UUID, *, gt: int = 0, limit: int | None = None
    ) -> list[StreamRow]:
        """``(seq, version, topic, state)`` of a stream's events after version ``gt``."""
        return self._stream("originator_version>%s", (originator_id, gt), limit)

    def select_stream_range(self, originator_id: UUID, first: int, last: int) -> list[StreamRow]:
        """Return ``(seq, version, topic, state)`` for versions ``first..last`` of a stream."""
        return self._stream(
            "originator_version>=%s AND originator_version<=%s", (originator_id, first, last)
        )

    def _scope_where(self, originator_id: UUID, scope: Scope) -> tuple[str, list[Any]]:
        conversation = scope.conversation_id
        return where(
            (True, "originator_id=%s", (originator_id,)),
            (conversation is None, "conversation_id IS NULL", ()),
            (conversation is not None, "conversation_id=%s", (conversation,)),
            (scope.correlation_id is not None, "correlation_id=%s", (scope.correlation_id,)),
            (bool(scope.topics), "topic = ANY(%s)", (list(scope.topics),)),
            (True, "notification_id>%s", (scope.after_seq,)),
            (scope.before_seq is not None, "notification_id<%s", (scope.before_seq,)),
        )

    def select_scope(
        self, originator_id: UUID, scope: Scope, *, limit: int | None = None, newest: bool = False
    ) -> list[StreamRow]:
        """``(seq, version, topic, state)`` of the rows of ``scope``, at most ``limit``.

        In seq order, or newest first with ``newest``.
        """
        where, params = self._scope_where(originator_id, scope)
        text = (
            "SELECT notification_id, originator_version, topic, state FROM {schema}.{table} "
            f"WHERE {where} ORDER BY notification_id{' DESC' if newest else ''}"
        )
        text += " LIMIT %s"  # LIMIT NULL (no ``limit``) is no limit
        params.append(limit)
        rows = self._select(self._sql(text, self.events_table_name), params)
        return [_row(r) for r in rows]

    def count_scope(self, originator_id: UUID, scope: Scope) -> int:
        """How many rows ``scope`` holds."""
        where, params = self._scope_where(originator_id, scope)
        rows = self._select(
            self._sql(
                f"SELECT COUNT(*) AS n FROM {{schema}}.{{table}} WHERE {where}",
                self.events_table_name,
            ),
            params,
        )
        return int(rows[0]["n"])

    def has_stream(self, originator_id: UUID) -> bool:
        """Whether the stream has any event."""
        rows = self._select(
            self._sql(
                "SELECT 1 AS one FROM {schema}.{table} WHERE originator_id=%s LIMIT 1",
                self.events_table_name,
            ),
            (originator_id,),
        )
        return bool(rows)

    def select_batches(self, keys: Sequence[str]) -> dict[str, bytes]:
        """Return the stored ranges of those batch keys that were already committed."""
        if not keys:
            return {}
        rows = self._select(
            self._sql(
                "SELECT batch_key, ranges FROM {schema}.{table} WHERE batch_key = ANY(%s)",
                self.batches_table_name,
            ),
            (list(keys),),
        )
        return {str(r["batch_key"]): bytes(r["ranges"]) for r in rows}

    def upsert_snapshot(self, row: SnapshotRow) -> None:
        """Store a conversation's snapshot in place of its last one (one transaction)."""
        with self.datastore.transaction(commit=True) as curs:
            curs.execute(
                self._sql(
                    "INSERT INTO {schema}.{table} VALUES (%s, %s, %s, %s, %s, %s, %s) "
                    "ON CONFLICT (project_id, conversation_id) DO UPDATE SET "
                    "seq=EXCLUDED.seq, stream_version=EXCLUDED.stream_version, "
                    "head_hash=EXCLUDED.head_hash, format=EXCLUDED.format, body=EXCLUDED.body",
                    self.snapshots_table_name,
                ),
                row,
            )

    def select_snapshots(
        self, project_id: str, conversation_id: str | None = None
    ) -> list[SnapshotRow]:
        """The project's snapshots (one conversation's, when given), by conversation."""
        conditions, params = where(
            (True, "project_id=%s", (project_id,)),
            (conversation_id is not None, "conversation_id=%s", (conversation_id,)),
        )
        text = (
            "SELECT project_id, conversation_id, seq, stream_version, head_hash, format, body "
            f"FROM {{schema}}.{{table}} WHERE {conditions} ORDER BY conversation_id"
        )
        rows = self._select(self._sql(text, self.snapshots_table_name), params)
        return [
            (
                str(r["project_id"]),
                str(r["conversation_id"]),
                int(r["seq"]),
                int(r["stream_version"]),
                str(r["head_hash"]),
                int(r["format"]),
                bytes(r["body"]),
            )
            for r in rows
        ]

    def select_all_batches(self) -> list[tuple[str, bytes]]:
        """Every ``(batch_key, ranges)`` (for a project's deletion)."""
        rows = self._select(
            self._sql("SELECT batch_key, ranges FROM {schema}.{table}", self.batches_table_name),
            (),
        )
        return [(str(r["batch_key"]), bytes(r["ranges"])) for r in rows]

    def integrity_check(self) -> str:
        """PostgreSQL keeps its own integrity; report ``ok`` when a query succeeds."""
        self._select(SQL("SELECT 1"), ())
        return "ok"


def _row(r: DictRow) -> StreamRow:
    return (
        int(r["notification_id"]),
        int(r["originator_version"]),
        str(r["topic"]),
        bytes(r["state"]),
    )


class RoostPostgresFactory(PostgresFactory):
    """eventsourcing factory for the PostgreSQL store (``PERSISTENCE_MODULE``)."""

    application_recorder_class = RoostPostgresRecorder


BACKEND = JournalBackend(factory=RoostPostgresFactory, check=check_postgres_settings)
"""The PostgreSQL journal: a shared server (``POSTGRES_*``), checked before it is opened."""
