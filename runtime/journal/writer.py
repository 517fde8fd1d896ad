"""The single writer's decisions, as plain code: one store behind one lock.

The Journal actor (``actors/journal.py``) and its journal-link thread share this writer.
:meth:`JournalWriter.commit` is the group commit of both: the batches that queued up go in
one transaction; if one spoils it (a lost ownership), they are written one by one so only
that one fails, and its project's cached head is dropped. Before the store is open every
batch fails with ``journal_error``. Unit-tested on a real store, without an actor system
(``tests/runtime/journal``). It counts what it writes (``runtime.wire.counters``):
``journal_append`` per batch, ``journal_commit`` per transaction.
"""

from __future__ import annotations

import threading
from typing import Any

from events.envelope import Envelope, NewEvent
from runtime.errors import JournalError, RequestError
from runtime.journal.store import Batch, Journal
from runtime.wire import counters

__all__ = ["JournalWriter"]


class JournalWriter:
    """The event store, opened after fork, used by one thread at a time."""

    def __init__(self) -> None:
        self.store: Journal | None = None
        self.lock = threading.Lock()

    def open(self, home: str) -> bool:
        """Open the store of ``home`` once; True when this call opened it."""
        with self.lock:
            if self.store is not None:
                return False
            self.store = Journal.open(home)
            return True

    def commit(
        self, batches: list[tuple[str, list[NewEvent]]]
    ) -> list[list[Envelope] | dict[str, Any]]:
        """Commit ``(key, events)`` batches, together when possible: envelopes or an error.

        One transaction for all; if one batch spoils it (e.g. a lost ownership), they are
        written one by one so only the faulty one fails.
        """
        with self.lock:
            store = self.store
            if store is None:
                return [_not_ready() for _ in batches]
            keys = [key for key, _ in batches]
            if len(batches) > 1 and len(set(keys)) == len(keys):
                try:
                    results = store.append_batches([Batch(events=e, key=k) for k, e in batches])
                except JournalError:
                    pass
                else:
                    counters.count("journal_append", len(batches))
                    counters.count("journal_commit")
                    return [*results]
            return [_append_one(store, key, events) for key, events in batches]

    def read(self, project_id: str, conversation_id: str | None = None) -> list[Envelope]:
        """A project's events, or one conversation's (none before the store is open)."""
        with self.lock:
            if self.store is None:
                return []
            if conversation_id is None:
                return self.store.read_project(project_id)
            return self.store.read_conversation(project_id, conversation_id)

    def read_types(self, types: list[str]) -> list[Envelope]:
        """Every event of these types (none before the store is open)."""
        with self.lock:
            return self.store.read_types(types) if self.store is not None else []

    def delete_project(self, project_id: str, deleted_by: str) -> dict[str, Any]:
        """Delete a project's history (``Journal.delete_project``): its summary, or the error.

        The error is a wire error: ``project_not_found``, ``journal_error``.
        """
        with self.lock:
            if self.store is None:
                return {"error": _not_ready()}
            try:
                return {"result": self.store.delete_project(project_id, deleted_by=deleted_by)}
            except (JournalError, RequestError) as e:
                return {"error": e.to_wire()}

    def seal_interval_s(self) -> float:
        """Seconds between timed seals (0: none)."""
        sealer = self.store.sealer if self.store is not None else None
        return sealer.settings.interval_s if sealer is not None else 0.0

    def seal(self, reason: str) -> int | str:
        """Seal every project with unsealed events: the checkpoints written, or the error."""
        with self.lock:
            if self.store is None:
                return 0
            try:
                return self.store.seal(reason)
            except JournalError as e:
                return str(e)

    def close(self) -> None:
        """Close the store (it may be opened again)."""
        with self.lock:
            if self.store is not None:
                self.store.close()
                self.store = None


def _append_one(
    store: Journal, key: str, events: list[NewEvent]
) -> list[Envelope] | dict[str, Any]:
    try:
        envelopes = store.append(events, key=key)
    except JournalError as e:
        for project in {ev.project_id for ev in events}:
            store.forget(project)
        return e.to_wire()
    counters.count("journal_append")
    counters.count("journal_commit")
    return envelopes


def _not_ready() -> dict[str, Any]:
    return {"code": "journal_error", "message": "the journal is not open yet", "details": {}}
