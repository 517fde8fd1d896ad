"""The PostgreSQL journal store: eventsourcing's PostgreSQL recorder plus batch keys.

eventsourcing already serialises inserts with a table lock (so ``notification_id`` order is
commit order) and ``NOTIFY``s a channel on every insert. We add the ``roost_batches``
idempotency table, written in the same transaction as the events, positioned reads, and
a project's deletion in the transaction of its deletion record (``notification_id`` comes
from a sequence, so deleted positions are never given again).
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

from runtime.journal.sqlite import StreamRow

__all__ = ["RoostPostgresFactory", "RoostPostgresRecorder"]


class RoostPostgresRecorder(PostgresApplicationRecorder):
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
        if batch_rows:
            curs.executemany(
                self._sql(
                    "INSERT INTO {schema}.{table} (batch_key, ranges) VALUES (%s, %s)",
                    self.batches_table_name,
                ),
                list(batch_rows),
            )
        stream: UUID | None = kwargs.get("delete_stream")
        if stream is None:
            return
        curs.execute(
            self._sql(
                "DELETE FROM {schema}.{table} WHERE originator_id=%s", self.events_table_name
            ),
            (stream,),
        )
        drop: Sequence[str] = kwargs.get("drop_batches") or ()
        if drop:
            curs.execute(
                self._sql(
                    "DELETE FROM {schema}.{table} WHERE batch_key = ANY(%s)",
                    self.batches_table_name,
                ),
                (list(drop),),
            )
        rewrite: Sequence[tuple[str, bytes]] = kwargs.get("rewrite_batches") or ()
        if rewrite:
            curs.executemany(
                self._sql(
                    "UPDATE {schema}.{table} SET ranges=%s WHERE batch_key=%s",
                    self.batches_table_name,
                ),
                [(r, k) for k, r in rewrite],
            )

    def _select(self, statement: Composed | SQL, params: Sequence[Any]) -> list[DictRow]:
        with self.datastore.get_connection() as conn, conn.cursor() as curs:
            curs.execute(statement, params)
            return curs.fetchall()

    def _stream(self, versions: str, params: Sequence[Any]) -> list[StreamRow]:
        """``(seq, version, state)`` of a stream's events whose version matches ``versions``."""
        rows = self._select(
            self._sql(
                "SELECT notification_id, originator_version, state FROM {schema}.{table} "
                f"WHERE originator_id=%s AND {versions} ORDER BY originator_version",
                self.events_table_name,
            ),
            params,
        )
        return [
            (int(r["notification_id"]), int(r["originator_version"]), bytes(r["state"]))
            for r in rows
        ]

    def select_stream(self, originator_id: UUID, *, gt: int = 0) -> list[StreamRow]:
        """Return ``(seq, version, state)`` of a stream's events after version ``gt``."""
        return self._stream("originator_version>%s", (originator_id, gt))

    def select_stream_range(self, originator_id: UUID, first: int, last: int) -> list[StreamRow]:
        """Return ``(seq, version, state)`` for versions ``first..last`` of a stream."""
        return self._stream(
            "originator_version>=%s AND originator_version<=%s", (originator_id, first, last)
        )

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


class RoostPostgresFactory(PostgresFactory):
    """eventsourcing factory for the PostgreSQL store (``PERSISTENCE_MODULE``)."""

    application_recorder_class = RoostPostgresRecorder
