"""The two table layouts of a SQLite journal: how stream ids, correlations, batch keys are kept.

A journal's layout is its ``PRAGMA user_version``: 2 for a journal created now, 0 (layout 1)
for one created before layout 2 existed, which keeps its layout. The stored envelope's
format is per row (:mod:`runtime.journal.stored`) and the same in both.

========================  =====================================  ==============================
                          layout 1                               layout 2
========================  =====================================  ==============================
``originator_id``         the stream's UUID, 32 hex digits       its number in ``roost_streams``
``topic``                 the event type                         its number in ``roost_topics``
correlation, indexed      ``correlation_id`` (text), with the    ``correlation_key``: 32 bits of
                          stream: ``(originator_id,              BLAKE2b of the id, alone:
                          correlation_id)``                      ``(correlation_key)``
batch keys                ``roost_batches``: the key as text,    16 bytes of BLAKE2b of the
                          kept for good                          key, in two generations
                                                                 (``roost_batches`` is their
                                                                 union), kept 1 to 2 hours
========================  =====================================  ==============================

A stream's (a topic's) number is given in the transaction of its first event, under the
write lock; it is never reused, not even after the project's deletion. A read finds a
stream's number by a subquery, and the topics of the rows it read in the numbers it knows,
learning them all again when a row has one it has not seen.
Two correlations or two batch keys with the same digest are told apart where it matters:
a scope's rows are checked against their decoded ``correlation_id``, and a correlation's
events are counted by reading them (:meth:`runtime.journal.store.Journal.read_scope`,
``count_scope``): a collision costs a few rows read, never a wrong answer. A batch key
collides with a chance of 2^-128.

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
from collections import defaultdict
from collections.abc import Callable
from typing import Any
from uuid import UUID

__all__ = [
    "BATCH_KEY_RETENTION_S",
    "LAYOUT",
    "LAYOUTS",
    "Fresh",
    "Layout",
    "Layout1",
    "Layout2",
    "Numbering",
    "correlation_key",
    "layout_2_statements",
    "layout_of",
]

LAYOUT = 2
"""The table layout of a journal created now."""

BATCH_KEY_RETENTION_S = 3600
"""How long layout 2 keeps a batch key at least (at most twice as long)."""


def correlation_key(correlation_id: str | None) -> int | None:
    """The 32-bit digest of a correlation id that layout 2 indexes (4 bytes in a row)."""
    if correlation_id is None:
        return None
    digest = hashlib.blake2b(correlation_id.encode(), digest_size=4).digest()
    return int.from_bytes(digest, "big", signed=True)


def _batch_digest(key: str) -> bytes:
    return hashlib.blake2b(key.encode(), digest_size=16).digest()


def layout_2_statements(table: str) -> list[str]:
    """The statements that create a journal of layout 2."""
    return [
        f"CREATE TABLE IF NOT EXISTS {table} (originator_id INTEGER, originator_version INTEGER, "
        "topic INTEGER, state BLOB, conversation_id TEXT, correlation_key INTEGER, "
        "PRIMARY KEY (originator_id, originator_version))",
        "CREATE TABLE IF NOT EXISTS roost_streams (number INTEGER PRIMARY KEY, "
        "stream BLOB NOT NULL UNIQUE)",
        "CREATE TABLE IF NOT EXISTS roost_topics (number INTEGER PRIMARY KEY, "
        "topic TEXT NOT NULL UNIQUE)",
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


Fresh = defaultdict[str, dict[Any, int]]
"""Numbers given in a transaction not committed yet: ``table -> name -> number``."""


class Numbering:
    """Numbers of names (stream ids, topics) in a table of layout 2, and those seen."""

    def __init__(self, table: str, column: str) -> None:
        self.table = table
        self.column = column
        self.sql = f"(SELECT number FROM {table} WHERE {column}=?)"
        """A query's expression for the number of the name given as its parameter."""
        self.numbers: dict[Any, int] = {}
        self.names: dict[int, Any] = {}
        """The committed numbers this recorder has seen, both ways."""

    def _known(self, name: Any, number: int) -> int:
        self.numbers[name] = number
        self.names[number] = name
        return number

    def number_of(self, c: sqlite3.Cursor, name: Any) -> int | None:
        """A name's number (None: no row has it yet)."""
        number = self.numbers.get(name)
        if number is None:
            c.execute(f"SELECT number FROM {self.table} WHERE {self.column}=?", (name,))
            row = c.fetchone()
            if row is not None:
                number = self._known(name, int(row[0]))
        return number

    def for_insert(self, c: sqlite3.Cursor, name: Any, fresh: Fresh) -> int:
        """A name's number in the inserting transaction ``c``, given now if it has none.

        A number given is added to ``fresh`` and is known once the transaction is
        committed (:meth:`committed`).
        """
        number = self.numbers.get(name) or fresh[self.table].get(name)
        if number is None:
            number = self.number_of(c, name)
        if number is None:
            c.execute(f"INSERT INTO {self.table} ({self.column}) VALUES (?)", (name,))
            number = fresh[self.table][name] = int(c.lastrowid or 0)
        return number

    def committed(self, fresh: Fresh) -> None:
        """Remember the numbers given in a committed transaction."""
        for name, number in fresh[self.table].items():
            self._known(name, number)

    def load(self, c: sqlite3.Cursor) -> None:
        """Learn every number committed so far, if some are not known yet.

        The numbers are 1 to the highest (a row of these tables is never deleted).
        """
        c.execute(f"SELECT max(number) FROM {self.table}")
        top = c.fetchone()[0]
        if top is None or len(self.names) >= top:
            return
        c.execute(f"SELECT number, {self.column} FROM {self.table}")
        for number, name in c.fetchall():
            self._known(name, int(number))


class Layout:
    """How one journal's layout stores what its queries look up: what both layouts share.

    :class:`Layout1` and :class:`Layout2` fill in the rest; :func:`layout_of` picks one.
    """

    version: int
    """1 or 2."""
    correlation_column: str
    """The indexed correlation column."""
    stream_sql: str
    """What a query compares ``originator_id`` with; its parameter is :meth:`stream`."""
    batch_tables: tuple[str, ...]
    """The tables that hold batch keys (``roost_batches`` reads them all)."""

    def __init__(self) -> None:
        self.streams = Numbering("roost_streams", "stream")
        """Layout 2's stream numbers (a stream's 16 bytes -> its number)."""
        self.topics = Numbering("roost_topics", "topic")
        """Layout 2's topic numbers."""
        self.clock: Callable[[], float] = time.time
        """The wall clock that ages batch-key generations."""

    def committed(self, fresh: Fresh) -> None:
        """Remember the numbers given in a committed transaction."""
        self.streams.committed(fresh)
        self.topics.committed(fresh)

    def stream(self, originator_id: UUID) -> str | bytes:
        """The parameter of :attr:`stream_sql` for a stream."""
        raise NotImplementedError

    def stream_for_insert(self, c: sqlite3.Cursor, originator_id: UUID, fresh: Fresh) -> Any:
        """The ``originator_id`` of a row, in the inserting transaction ``c``."""
        raise NotImplementedError

    def topic_for_insert(self, c: sqlite3.Cursor, topic: str, fresh: Fresh) -> Any:
        """The ``topic`` of a row, in the inserting transaction ``c``."""
        raise NotImplementedError

    def named(self, c: sqlite3.Cursor, rows: list[Any], at: int = 2) -> list[Any]:
        """``rows`` (tuples) with the topic number at index ``at`` replaced by the topic."""
        raise NotImplementedError

    def topics_in(self, count: int) -> str:
        """A condition that a row's topic is one of ``count`` topics given as parameters."""
        raise NotImplementedError

    def correlation(self, correlation_id: str | None) -> Any:
        """A correlation id as :attr:`correlation_column` holds it."""
        raise NotImplementedError

    def batch_key(self, key: str) -> str | bytes:
        """A batch key as ``roost_batches`` holds it."""
        raise NotImplementedError

    def stored_key(self, stored: Any) -> str:
        """A key as ``roost_batches`` returns it, as text (hex digits in layout 2)."""
        raise NotImplementedError

    def key_of_text(self, text: str) -> str | bytes:
        """The stored key of :meth:`stored_key`'s text."""
        raise NotImplementedError

    def batch_table_for_insert(self, c: sqlite3.Cursor) -> str:
        """The table a batch key goes into, in the inserting transaction ``c``."""
        raise NotImplementedError


class Layout1(Layout):
    """Layout 1: stream ids, topics, correlations and batch keys are stored as they are."""

    version = 1
    correlation_column = "correlation_id"
    stream_sql = "?"
    batch_tables = ("roost_batches",)

    def stream(self, originator_id: UUID) -> str | bytes:
        """The stream's UUID as 32 hex digits."""
        return originator_id.hex

    def stream_for_insert(self, c: sqlite3.Cursor, originator_id: UUID, fresh: Fresh) -> Any:
        """The stream's UUID as 32 hex digits."""
        return originator_id.hex

    def topic_for_insert(self, c: sqlite3.Cursor, topic: str, fresh: Fresh) -> Any:
        """The topic itself."""
        return topic

    def named(self, c: sqlite3.Cursor, rows: list[Any], at: int = 2) -> list[Any]:
        """``rows`` as they are: their topics are stored as text."""
        return rows

    def topics_in(self, count: int) -> str:
        """``topic IN (?, ...)``."""
        return f"topic IN ({','.join('?' * count)})"

    def correlation(self, correlation_id: str | None) -> Any:
        """The correlation id itself."""
        return correlation_id

    def batch_key(self, key: str) -> str | bytes:
        """The key itself."""
        return key

    def stored_key(self, stored: Any) -> str:
        """The key as text."""
        return str(stored)

    def key_of_text(self, text: str) -> str | bytes:
        """The text itself."""
        return text

    def batch_table_for_insert(self, c: sqlite3.Cursor) -> str:
        """``roost_batches``, which keeps its keys for good."""
        return "roost_batches"


class Layout2(Layout):
    """Layout 2: numbered streams and topics, digests of correlations and batch keys."""

    version = 2
    correlation_column = "correlation_key"
    batch_tables = ("roost_batches_0", "roost_batches_1")

    def __init__(self) -> None:
        super().__init__()
        self.stream_sql = self.streams.sql

    def stream(self, originator_id: UUID) -> str | bytes:
        """The stream's 16 bytes (its number is looked up by :attr:`stream_sql`)."""
        return originator_id.bytes

    def stream_for_insert(self, c: sqlite3.Cursor, originator_id: UUID, fresh: Fresh) -> Any:
        """The stream's number, given now if it has none."""
        return self.streams.for_insert(c, originator_id.bytes, fresh)

    def topic_for_insert(self, c: sqlite3.Cursor, topic: str, fresh: Fresh) -> Any:
        """The topic's number, given now if it has none."""
        return self.topics.for_insert(c, topic, fresh)

    def named(self, c: sqlite3.Cursor, rows: list[Any], at: int = 2) -> list[Any]:
        """``rows`` with their topic numbers named (learning them again when one is new)."""
        names = self.topics.names
        if any(row[at] not in names for row in rows):
            self.topics.load(c)
        if at == 2:  # (seq, version, topic, state): the read paths, unpacked for speed
            return [(seq, version, names[topic], state) for seq, version, topic, state in rows]
        return [(*row[:at], names[row[at]], *row[at + 1 :]) for row in rows]

    def topics_in(self, count: int) -> str:
        """A condition on the topics' numbers, looked up by name."""
        marks = ",".join("?" * count)
        return f"topic IN (SELECT number FROM roost_topics WHERE topic IN ({marks}))"

    def correlation(self, correlation_id: str | None) -> Any:
        """The correlation's 32-bit digest (:func:`correlation_key`)."""
        return correlation_key(correlation_id)

    def batch_key(self, key: str) -> str | bytes:
        """The key's 16-byte digest."""
        return _batch_digest(key)

    def stored_key(self, stored: Any) -> str:
        """The digest as hex digits."""
        return bytes(stored).hex()

    def key_of_text(self, text: str) -> str | bytes:
        """The digest of :meth:`stored_key`'s hex digits."""
        return bytes.fromhex(text)

    def batch_table_for_insert(self, c: sqlite3.Cursor) -> str:
        """The current generation's table, turned over first when it is old enough.

        Old enough: :data:`BATCH_KEY_RETENTION_S` since it became the current one.
        """
        c.execute("SELECT current, since FROM roost_batch_generation")
        current, since = c.fetchone()
        now = int(self.clock())
        if now - int(since) >= BATCH_KEY_RETENTION_S:
            current = 1 - int(current)
            c.execute(f"DELETE FROM roost_batches_{current}")
            c.execute("UPDATE roost_batch_generation SET current=?, since=?", (current, now))
        return f"roost_batches_{int(current)}"


LAYOUTS: dict[int, type[Layout]] = {1: Layout1, 2: Layout2}
"""Each layout's class, by version."""


def layout_of(version: int) -> Layout:
    """The layout of a journal of ``version`` (1 or 2)."""
    return LAYOUTS[version]()
