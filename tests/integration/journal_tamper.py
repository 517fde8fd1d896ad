"""An attacker with the journal's database and nothing else, on a stopped daemon's SQLite file.

Every change goes through the ``sqlite3`` module on the file's rows, never through Roost's
writer. Such an attacker can recompute the hash chain (it needs no secret), renumber
positions and stream versions, delete and add rows; what they cannot do is make a MAC.
"""

from __future__ import annotations

import os
import sqlite3
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec

from events.chain import chain_hash
from events.envelope import GENESIS_HASH, Envelope
from runtime.journal.mapper import project_stream_id
from runtime.journal.stored import decode_state, encode_state

STREAM_NUMBER = "(SELECT number FROM roost_streams WHERE stream=?)"
"""The ``originator_id`` of a project's stream in a journal of layout 2, by its UUID's bytes."""

TOPIC = "(SELECT topic FROM roost_topics WHERE number=stored_events.topic)"
"""A row's topic (its event type) in a journal of layout 2."""

TOPIC_NUMBER = "(SELECT number FROM roost_topics WHERE topic=?)"
"""The ``topic`` of an event type in a journal of layout 2."""


@dataclass
class Row:
    """One stored event of a project: ``rowid`` is its seq, ``version`` its position."""

    rowid: int
    version: int
    envelope: Envelope


def journal_path(home: str) -> str:
    """The SQLite journal of ``home``."""
    return os.path.join(home, "journal.sqlite")


def _connect(home: str) -> sqlite3.Connection:
    return sqlite3.connect(journal_path(home), isolation_level=None)


def rows(home: str, project: str) -> list[Row]:
    """The project's stored events, in position order."""
    conn = _connect(home)
    try:
        found = conn.execute(
            f"SELECT rowid, originator_version, {TOPIC}, state FROM stored_events "
            f"WHERE originator_id={STREAM_NUMBER} ORDER BY originator_version",
            (project_stream_id(project).bytes,),
        ).fetchall()
    finally:
        conn.close()
    return [Row(r[0], r[1], decode_state(r[3], r[2], r[0])) for r in found]


def delete(home: str, rowids: list[int]) -> None:
    """Delete stored events by seq."""
    conn = _connect(home)
    try:
        conn.executemany("DELETE FROM stored_events WHERE rowid=?", [(r,) for r in rowids])
    finally:
        conn.close()


def edit(home: str, rowid: int, change: Callable[[dict[str, Any]], None]) -> None:
    """Change one stored event's ``data`` in place (its hash is left as it was)."""
    conn = _connect(home)
    try:
        (topic, state) = conn.execute(
            f"SELECT {TOPIC}, state FROM stored_events WHERE rowid=?", (rowid,)
        ).fetchone()
        envelope = decode_state(state, topic, rowid)
        data = msgspec.to_builtins(envelope.data)
        change(data)
        changed = msgspec.structs.replace(envelope, data=data)
        conn.execute(
            "UPDATE stored_events SET state=? WHERE rowid=?",
            (encode_state(changed), rowid),
        )
    finally:
        conn.close()


def append_copy(home: str, project: str, template: Row) -> int:
    """Add a copy of ``template`` (new id) after the project's last event, chained; its seq."""
    stored = rows(home, project)
    last = stored[-1]
    streams: dict[str | None, int] = {}
    for row in stored:
        streams[row.envelope.conversation_id] = row.envelope.stream_version
    version = streams.get(template.envelope.conversation_id, 0) + 1
    body = msgspec.structs.replace(template.envelope, event_id=str(uuid.uuid4()))
    digest = chain_hash(last.envelope.hash, body, version)
    forged = msgspec.structs.replace(
        body, stream_version=version, prev_hash=last.envelope.hash, hash=digest
    )
    conn = _connect(home)
    try:
        cursor = conn.execute(
            "INSERT INTO stored_events (originator_id, originator_version, topic, state) "
            f"VALUES ({STREAM_NUMBER}, ?, {TOPIC_NUMBER}, ?)",
            (
                project_stream_id(project).bytes,
                last.version + 1,
                forged.type,
                encode_state(forged),
            ),
        )
        return int(cursor.lastrowid or 0)
    finally:
        conn.close()


def rehash(
    home: str,
    project: str,
    *,
    renumber: bool = False,
    fix_checkpoints: bool = False,
) -> None:
    """Recompute the project's whole chain, as the journal would have written it.

    ``renumber`` also closes gaps in positions and stream versions; ``fix_checkpoints``
    also points each checkpoint's sealed head at the recomputed hash (its MAC, which needs
    the key, stays as it was).
    """
    stored = rows(home, project)
    conn = _connect(home)
    try:
        conn.execute("BEGIN")
        head = GENESIS_HASH
        streams: dict[str | None, int] = {}
        hashes: dict[int, str] = {}
        for position, row in enumerate(stored, start=1):
            envelope = row.envelope
            version = envelope.stream_version
            if renumber:
                version = streams.get(envelope.conversation_id, 0) + 1
                if row.version != position:
                    conn.execute(
                        "UPDATE stored_events SET originator_version=? WHERE rowid=?",
                        (position, row.rowid),
                    )
            streams[envelope.conversation_id] = version
            if fix_checkpoints and envelope.type == "journal.checkpoint":
                data = dict(envelope.data)
                data["head_hash"] = hashes[int(data["head_position"])]
                envelope = msgspec.structs.replace(envelope, data=data)
            digest = chain_hash(head, envelope, version)
            fixed = msgspec.structs.replace(
                envelope, stream_version=version, prev_hash=head, hash=digest
            )
            hashes[position if renumber else row.version] = digest
            if fixed != row.envelope:
                conn.execute(
                    "UPDATE stored_events SET state=? WHERE rowid=?",
                    (encode_state(fixed), row.rowid),
                )
            head = digest
        conn.execute("COMMIT")
    finally:
        conn.close()
