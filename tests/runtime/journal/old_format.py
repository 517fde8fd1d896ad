"""Journals as older Roost versions wrote them: layout 1, every state in format 1.

:func:`to_layout_1` rewrites a journal written now (layout 2, format 2) into that shape,
row by row with the same positions, so a test can open what an older daemon left behind.
"""

from __future__ import annotations

import os
import sqlite3
import uuid
from collections.abc import Sequence

import msgspec

from runtime.journal.sqlite_layout import Layout2
from runtime.journal.stored import decode_state

__all__ = ["to_layout_1"]


def to_layout_1(path: str, *, index_columns: bool = True, batch_keys: Sequence[str] = ()) -> None:
    """Rewrite the SQLite journal at ``path`` as layout 1 with format-1 states.

    With ``index_columns`` the file has the ``conversation_id`` and ``correlation_id``
    columns and their indexes (what Roost wrote before format 2); without, it has neither
    (what it wrote before those columns). Layout 2 keeps a digest of each batch key: the
    keys in ``batch_keys`` are written back as text, the others are left out.
    """
    layout = Layout2()
    texts = {layout.batch_key(key): key for key in batch_keys}
    with sqlite3.connect(path) as new:
        rows = new.execute(
            "SELECT e.rowid, s.stream, e.originator_version, t.topic, e.state "
            "FROM stored_events e JOIN roost_streams s ON s.number=e.originator_id "
            "JOIN roost_topics t ON t.number=e.topic "
            "ORDER BY e.rowid"
        ).fetchall()
        batches = new.execute("SELECT batch_key, ranges FROM roost_batches").fetchall()
    new.close()
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.unlink(path + suffix)
    columns = ", conversation_id TEXT, correlation_id TEXT" if index_columns else ""
    with sqlite3.connect(path) as old:
        old.execute("PRAGMA journal_mode=WAL")
        old.execute(
            "CREATE TABLE stored_events (originator_id TEXT, originator_version INTEGER, "
            f"topic TEXT, state BLOB{columns}, "
            "PRIMARY KEY (originator_id, originator_version))"
        )
        old.execute("CREATE TABLE roost_batches (batch_key TEXT PRIMARY KEY, ranges BLOB NOT NULL)")
        for rowid, oid, version, topic, state in rows:
            envelope = msgspec.structs.replace(decode_state(state, topic, rowid), seq=0)
            values = [
                rowid,
                uuid.UUID(bytes=oid).hex,
                version,
                topic,
                msgspec.msgpack.encode(envelope),
            ]
            if index_columns:
                values += [envelope.conversation_id, envelope.correlation_id]
            marks = ",".join("?" * len(values))
            old.execute(
                "INSERT INTO stored_events (rowid, originator_id, originator_version, topic, "
                f"state{', conversation_id, correlation_id' if index_columns else ''}) "
                f"VALUES ({marks})",
                values,
            )
        old.executemany(
            "INSERT INTO roost_batches VALUES (?, ?)",
            [(texts[key], ranges) for key, ranges in batches if key in texts],
        )
        if index_columns:
            for column in ("conversation_id", "correlation_id"):
                old.execute(
                    f"CREATE INDEX roost_events_by_{column.split('_')[0]} "
                    f"ON stored_events (originator_id, {column})"
                )
    old.close()
