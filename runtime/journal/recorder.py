"""What a journal backend provides: the recorder interface and the backend's description.

A backend is the module ``runtime.journal.<kind>`` for a kind of
:data:`runtime.settings_table.JournalKind` (the only place the kinds are listed). Its
``BACKEND`` (a :class:`JournalBackend`) names the eventsourcing factory that opens the store,
and that factory's application recorder implements :class:`JournalRecorder`: eventsourcing's
:class:`~eventsourcing.persistence.ApplicationRecorder` plus the reads and writes
:class:`runtime.journal.store.Journal` makes beyond it. ``tests/runtime/journal`` holds one
contract test case per interface, run on every backend (``docs/architecture.md``).
"""

from __future__ import annotations

import importlib
from abc import abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from eventsourcing.persistence import ApplicationRecorder, InfrastructureFactory, StoredEvent

from runtime.errors import JournalError
from runtime.journal.scope import Scope
from runtime.settings_table import JOURNAL_KINDS

__all__ = [
    "JournalBackend",
    "JournalRecorder",
    "SnapshotRow",
    "StreamDeletion",
    "StreamRow",
    "journal_backend",
]

StreamRow = tuple[int, int, str, bytes]
"""``(seq, originator_version, topic, state)`` of one stored event."""

SnapshotRow = tuple[str, str, int, int, str, int, bytes]
"""``(project_id, conversation_id, seq, stream_version, head_hash, format, body)``."""


@dataclass(frozen=True, kw_only=True)
class StreamDeletion:
    """A project's deletion, committed in the transaction of its deletion record."""

    stream: UUID
    """The project's stream, whose events are deleted."""
    project_id: str
    """The project, whose snapshots are deleted."""
    drop_batches: Sequence[str] = ()
    """Batch keys that named only this project's events, dropped."""
    rewrite_batches: Sequence[tuple[str, bytes]] = ()
    """``(batch_key, ranges)`` of the keys that also name other projects' events, rewritten."""


class JournalRecorder(ApplicationRecorder):
    """The recorder of a journal backend.

    Beyond eventsourcing's interface (``select_notifications`` and ``max_notification_id``
    give the global position ``seq``, which must be commit order: a reader that has seen
    ``seq`` never sees a lower one committed later; ``tail`` relies on it), it commits a
    batch with its idempotency keys and a project's deletion, reads one stream with the
    positions, reads a conversation's events through an index (:mod:`runtime.journal.scope`)
    and keeps one snapshot per conversation (:mod:`runtime.journal.snapshots`).
    """

    @abstractmethod
    def insert_events(
        self,
        stored_events: Sequence[StoredEvent],
        *,
        batch_rows: Sequence[tuple[str, bytes]] = (),
        deletion: StreamDeletion | None = None,
        **kwargs: Any,
    ) -> Sequence[int] | None:
        """Commit ``stored_events`` in one transaction and return their positions, in order.

        ``batch_rows`` (``(batch_key, ranges)``) are recorded in the same transaction (a key
        already there fails it with eventsourcing's ``IntegrityError``, as a taken stream
        version does); ``deletion`` is carried out in it too.
        """

    @abstractmethod
    def select_stream(
        self, originator_id: UUID, *, gt: int = 0, limit: int | None = None
    ) -> list[StreamRow]:
        """The stream's events after version ``gt``, by version (the first ``limit``)."""

    @abstractmethod
    def select_stream_range(self, originator_id: UUID, first: int, last: int) -> list[StreamRow]:
        """The stream's events of versions ``first..last``, by version."""

    @abstractmethod
    def select_scope(
        self, originator_id: UUID, scope: Scope, *, limit: int | None = None, newest: bool = False
    ) -> list[StreamRow]:
        """The rows of ``scope``, at most ``limit``, in seq order (newest first with ``newest``).

        A row of another correlation may be among them (a digest's collision): the caller
        checks the decoded envelope.
        """

    @abstractmethod
    def count_scope(self, originator_id: UUID, scope: Scope) -> int:
        """How many rows ``scope`` holds (correlation scopes excepted: read them)."""

    @abstractmethod
    def has_stream(self, originator_id: UUID) -> bool:
        """Whether the stream has any event."""

    @abstractmethod
    def select_batches(self, keys: Sequence[str]) -> dict[str, bytes]:
        """The stored ranges of those batch keys that were already committed."""

    @abstractmethod
    def select_all_batches(self) -> list[tuple[str, bytes]]:
        """Every ``(batch_key, ranges)`` (for a project's deletion)."""

    @abstractmethod
    def upsert_snapshot(self, row: SnapshotRow) -> None:
        """Store a conversation's snapshot in place of its last one (its own transaction)."""

    @abstractmethod
    def select_snapshots(
        self, project_id: str, conversation_id: str | None = None
    ) -> list[SnapshotRow]:
        """The project's snapshots (one conversation's, when given), by conversation."""

    @abstractmethod
    def integrity_check(self) -> str:
        """The database's own integrity check: ``ok`` when sound, else its first finding."""


@dataclass(frozen=True, kw_only=True)
class JournalBackend:
    """How the journal opens one kind of store (the ``BACKEND`` of its module)."""

    factory: type[InfrastructureFactory[Any]]
    """eventsourcing's factory (``PERSISTENCE_MODULE``); its application recorder is a
    :class:`JournalRecorder`."""
    home_file: str | None = None
    """The store's file in ``ROOST_HOME`` (None: the store is a server)."""
    path_setting: str | None = None
    """The factory's setting that names the file (with ``home_file``)."""
    settings: Mapping[str, str] = field(default_factory=dict)
    """Further factory settings, always given."""
    check: Callable[[Mapping[str, str]], None] = field(default=lambda env: None)
    """Checks the settings before the store is opened (raises ``JournalError``); a store
    that needs no setting checks nothing."""


def journal_backend(kind: str) -> JournalBackend:
    """The backend of ``kind`` (its module is imported now); ``JournalError`` if none."""
    if kind not in JOURNAL_KINDS:
        choices = ", ".join(repr(k) for k in JOURNAL_KINDS)
        raise JournalError(f"unknown journal kind {kind!r}; use one of {choices}")
    module = importlib.import_module(f"runtime.journal.{kind}")
    backend = getattr(module, "BACKEND", None)
    if not isinstance(backend, JournalBackend):
        raise JournalError(f"runtime.journal.{kind} has no BACKEND (a JournalBackend)")
    return backend
