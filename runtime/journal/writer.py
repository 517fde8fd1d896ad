"""The single writer's decisions, as plain code: one store behind one lock.

The Journal actor (``actors/journal.py``) and its journal-link thread share this writer.
:meth:`JournalWriter.commit` is the group commit of both: the batches that queued up go in
one transaction; if one spoils it (a lost ownership), they are written one by one so only
that one fails, and its project's cached head is dropped. Before the store is open every
batch fails with ``journal_error``. Unit-tested on a real store, without an actor system
(``tests/runtime/journal``).

Snapshots (:mod:`runtime.journal.snapshots`): given a codec, the writer counts each
conversation's committed events and, when its caller asks (:meth:`JournalWriter.
write_snapshots`, after the appends were answered), folds the due ones onto their last
snapshot and stores them; :meth:`JournalWriter.read_rehydration` hands a conversation that
comes back its snapshot and the events after it, or its whole history when the snapshot
does not check out (and a long read makes the conversation due:
``SNAPSHOT_ON_READ_EVENTS``). The lock is held to read and store, not to check and fold.

It counts what it writes (``runtime.wire.counters``): ``journal_append`` per batch,
``journal_commit`` per transaction.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any, NotRequired, TypedDict

import msgspec

from events.envelope import Envelope, NewEvent
from runtime.errors import JournalError, RequestError, WireError
from runtime.journal.scope import Scope
from runtime.journal.snapshots import SnapshotCodec, SnapshotSchedule, StoredSnapshot
from runtime.journal.store import Batch, Journal
from runtime.settings_table import JournalKind
from runtime.wire import counters

__all__ = ["JournalWriter", "Rehydration"]

SNAPSHOTS_PER_CALL = 2
"""Snapshots :meth:`JournalWriter.write_snapshots` writes at most per call (the rest wait)."""

SNAPSHOT_ON_READ_EVENTS = 64
"""A rehydration that had to fold this many events or more makes its conversation due, so
the next one (a conversation passivated after every few turns) folds only what came
since (projects with ``snapshot_every_events`` 0 excepted)."""


class Rehydration(msgspec.Struct, frozen=True, kw_only=True):
    """What a conversation that comes back reads (:meth:`JournalWriter.read_rehydration`)."""

    events: list[Envelope]
    """The events after the snapshot, or every event of the conversation without one."""
    snapshot: StoredSnapshot | None = None
    """The snapshot used, when one was stored and checked out."""
    rejected: str | None = None
    """Why a stored snapshot was not used (a reason code), when one was not."""


class SnapshotOutcome(TypedDict):
    """What building one conversation's snapshot did (:meth:`JournalWriter.write_snapshots`)."""

    project_id: NotRequired[str]
    conversation_id: NotRequired[str]
    seq: NotRequired[int]
    """The last event folded into the snapshot (or into the one that made it needless)."""
    events: NotRequired[int]
    """Events folded."""
    bytes: NotRequired[int]
    """The snapshot's size."""
    skipped: NotRequired[str]
    """Why none was stored: ``no_new_events``, ``no_events``, ``closed``,
    ``project_deleted``, ``a_later_snapshot``."""
    error: NotRequired[str]
    """The store failed."""


_NOT_OPEN = "the journal is not open yet"
"""The error a batch (or a deletion) gets before the store is open."""


class JournalWriter:
    """The event store, opened after fork, used by one thread at a time."""

    def __init__(self, snapshots: SnapshotCodec | None = None) -> None:
        self.store: Journal | None = None
        self.lock = threading.Lock()
        self.codec = snapshots
        """Builds and checks snapshots (None: this writer neither writes nor reads them)."""
        self.schedule = SnapshotSchedule(self._options_of)
        """Which conversations are due for a snapshot."""
        self.snapshot_counts = {"written": 0, "used": 0, "rejected": 0}
        self._stored: dict[tuple[str, str], int] = {}
        """Snapshots written, handed out and refused since the writer started."""

    def _options_of(self, project_id: str) -> dict[str, Any] | None:
        return self.store.project_options(project_id) if self.store is not None else None

    def open(self, home: str, kind: JournalKind) -> bool:
        """Open the ``kind`` store of ``home`` once; True when this call opened it."""
        with self.lock:
            if self.store is not None:
                return False
            self.store = Journal.open(home, kind)
            return True

    def commit(self, batches: list[tuple[str, list[NewEvent]]]) -> list[list[Envelope] | WireError]:
        """Commit ``(key, events)`` batches, together when possible: envelopes or an error."""
        return self.commit_batches([Batch(events=events, key=key) for key, events in batches])

    def commit_batches(self, batches: list[Batch]) -> list[list[Envelope] | WireError]:
        """Commit keyed ``batches``, together when possible: envelopes or an error.

        One transaction for all; if one batch spoils it (e.g. a lost ownership), they are
        written one by one so only the faulty one fails.
        """
        with self.lock:
            results = self._append_all(batches)
            if self.codec is not None:
                for result in results:
                    if isinstance(result, list):
                        self.schedule.committed(result)
            return results

    def _append_all(self, batches: list[Batch]) -> list[list[Envelope] | WireError]:
        """The group commit, or one commit per batch when it fails (the lock held)."""
        store = self.store
        if store is None:
            return [JournalError(_NOT_OPEN).to_wire() for _ in batches]
        keys = [batch.key for batch in batches]
        if len(batches) > 1 and len(set(keys)) == len(keys):
            with contextlib.suppress(JournalError):  # then one by one, below
                grouped = store.append_batches(batches)
                counters.count("journal_append", len(batches))
                counters.count("journal_commit")
                return [*grouped]
        return [_append_one(store, batch) for batch in batches]

    def snapshots_due(self) -> bool:
        """Whether a conversation is due for a snapshot (a read without the lock)."""
        return self.codec is not None and self.schedule.due()

    def write_snapshots(self, limit: int = SNAPSHOTS_PER_CALL) -> list[SnapshotOutcome]:
        """Build and store the snapshots of up to ``limit`` due conversations.

        Each is the conversation's last snapshot (when it checks out) with the events after
        it folded on, or a fold of its whole history, stored in a transaction of its own.
        The lock is held to read and to store, not while the codec checks and folds, so
        appends are not held up by the fold. Returns what was done, one dict per
        conversation, for the log (``error`` when the store failed; the conversation is
        due again after as many events).
        """
        codec = self.codec
        if codec is None:
            return []
        with self.lock:
            due = self.schedule.take(limit) if self.store is not None else []
        done: list[SnapshotOutcome] = []
        for project_id, conversation_id in due:
            outcome = SnapshotOutcome(project_id=project_id, conversation_id=conversation_id)
            try:
                outcome.update(self._snapshot(codec, project_id, conversation_id))
            except JournalError as e:
                outcome["error"] = str(e)
            done.append(outcome)
        return done

    def _snapshot(
        self, codec: SnapshotCodec, project_id: str, conversation_id: str
    ) -> SnapshotOutcome:
        names = {"project_id": project_id, "conversation_id": conversation_id}
        options = self.schedule.options_for(project_id)
        prior, after, _ = self._read_snapshot(codec, project_id, conversation_id)
        if prior is not None and not after:
            return SnapshotOutcome(seq=prior.seq, skipped="no_new_events")
        body = (
            codec.fold(prior.body, after, **names, options=options) if prior is not None else None
        )
        if body is None:
            if prior is not None:  # the fold refused it: the whole history
                with self.lock:
                    after = self._events(project_id, conversation_id, 0)
            if not after:
                return SnapshotOutcome(skipped="no_events")
            body = codec.fold(None, after, **names, options=options)
        assert body is not None  # a fold without a prior is always built
        last = after[-1]
        snapshot = StoredSnapshot.at(last, **names, format=codec.format, body=body)
        with self.lock:
            if self.store is None:
                return SnapshotOutcome(skipped="closed")
            if not self.store.has_project(project_id):  # deleted while it was folded
                return SnapshotOutcome(skipped="project_deleted")
            key = (project_id, conversation_id)
            if self._stored.get(key, 0) > last.seq:  # the other thread stored a later one
                return SnapshotOutcome(seq=last.seq, skipped="a_later_snapshot")
            self.store.put_snapshot(snapshot)
            self._stored[key] = last.seq
            self.snapshot_counts["written"] += 1
        return SnapshotOutcome(seq=last.seq, events=len(after), bytes=len(body))

    def _events(self, project_id: str, conversation_id: str, after_seq: int) -> list[Envelope]:
        """The conversation's events after ``after_seq`` (the lock held by the caller)."""
        if self.store is None:
            return []
        return self.store.read_conversation(project_id, conversation_id, after_seq=after_seq)

    def _read_snapshot(
        self, codec: SnapshotCodec, project_id: str, conversation_id: str
    ) -> tuple[StoredSnapshot | None, list[Envelope], str | None]:
        """``(snapshot, events after it, None)`` when the stored one checks out.

        Otherwise ``(None, every event, why)`` (``why`` None when there is none). It checks
        out when its format is the codec's, the event at its ``seq`` is still the
        conversation's with the same stream version and hash, and the codec accepts it.
        The reads hold the lock; the codec's check does not.
        """
        with self.lock:
            store = self.store
            if store is None:
                return None, [], None
            found = store.snapshots(project_id, conversation_id)
            snapshot = found[0] if found else None
            events: list[Envelope] = []
            if snapshot is not None and snapshot.format == codec.format:
                scope = Scope(conversation_id=conversation_id, after_seq=snapshot.seq - 1)
                events = store.read_scope(project_id, scope)
        rejected: str | None = None
        if snapshot is None:
            pass
        elif snapshot.format != codec.format:
            rejected = "snapshot_format"
        elif not events or not snapshot.headed_by(events[0]):
            rejected = "snapshot_head_mismatch"
        else:
            rejected = codec.check(
                snapshot.body,
                project_id=project_id,
                conversation_id=conversation_id,
                options=self.schedule.options_for(project_id),
            )
            if rejected is None:
                return snapshot, events[1:], None
        with self.lock:
            return None, self._events(project_id, conversation_id, 0), rejected

    def read_rehydration(self, project_id: str, conversation_id: str) -> Rehydration:
        """A conversation's snapshot and the events after it, or its whole history.

        The snapshot is used only when it checks out (``_read_snapshot``); a refused one
        is counted and named in ``rejected``, and every event of the conversation is read.
        """
        if self.codec is None:
            return Rehydration(events=self.read(project_id, conversation_id))
        snapshot, events, rejected = self._read_snapshot(self.codec, project_id, conversation_id)
        with self.lock:
            if snapshot is not None:
                self.snapshot_counts["used"] += 1
            elif rejected is not None:
                self.snapshot_counts["rejected"] += 1
            if len(events) >= SNAPSHOT_ON_READ_EVENTS:
                self.schedule.mark(project_id, conversation_id)
        return Rehydration(events=events, snapshot=snapshot, rejected=rejected)

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
                return {"error": JournalError(_NOT_OPEN).to_wire()}
            self.schedule.forget(project_id)
            self._stored = {k: v for k, v in self._stored.items() if k[0] != project_id}
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


def _append_one(store: Journal, batch: Batch) -> list[Envelope] | WireError:
    try:
        envelopes = store.append_batches([batch])[0]
    except JournalError as e:
        for project in {ev.project_id for ev in batch.events}:
            store.forget(project)
        return e.to_wire()
    counters.count("journal_append")
    counters.count("journal_commit")
    return envelopes
