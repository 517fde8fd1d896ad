"""The journal: the durable, append-only event store every state change goes through.

It is an eventsourcing ``Application`` on a backend's recorder (SQLite by default, or
PostgreSQL: :mod:`runtime.journal.recorder`) with the msgspec mapper of
:mod:`runtime.journal.mapper`. One stream per project holds all its events; the global
position ``seq`` is eventsourcing's notification id. On append the journal redacts secrets,
assigns each event its stream version (the project's or the conversation's), links it into
the project's SHA-256 hash chain and commits a whole batch in one transaction, together with
the batch's idempotency key.
Redaction covers each event's ``data``, its ``correlation_id`` and ``causation_id``, and
each streamed text of a batch as a whole (a model round's ``assistant.delta`` events), so
a secret split over two deltas is found as in the whole message.

A journal opened for a ``ROOST_HOME`` also seals each project's chain head
(:mod:`events.seal`, :mod:`runtime.journal.seal`): a signed ``journal.checkpoint`` is added
at the end of a transaction when a project is due (every N events, when it stops, on the
Journal actor's timer and at shutdown through :meth:`Journal.seal`), and the project's
anchor outside the database is replaced once that transaction is committed.
:meth:`Journal.audit` checks the chain and the seals of a project for ``roost verify``.

Exactly one writer may append to a project at a time. Two writers racing on a project
collide on eventsourcing's ``(originator_id, originator_version)`` key, and the loser
gets :class:`runtime.errors.ConcurrencyError`; that is how ownership is fenced when
several daemons share a PostgreSQL journal.
"""

from __future__ import annotations

import dataclasses
import os
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, TypedDict

import msgspec
from eventsourcing.application import Application
from eventsourcing.persistence import IntegrityError, Mapper, PersistenceError
from eventsourcing.utils import get_topic

from events.catalog import JournalCheckpoint, JournalProjectDeleted, payload_to_data
from events.chain import ChainReport, chain_hash, verify_chain
from events.deletion import (
    DELETION_TYPE,
    DELETIONS_STREAM,
    DeletionSummary,
    deletion_findings,
    deletions_of,
)
from events.envelope import (
    GENESIS_HASH,
    Envelope,
    NewEvent,
    new_correlation_id,
    new_event_id,
)
from events.seal import CHECKPOINT_TYPE, Anchor
from runtime.errors import (
    ConcurrencyError,
    JournalError,
    JournalIntegrityError,
    ProjectNotFoundError,
)
from runtime.journal.append_redaction import AppendRedaction, Redactor
from runtime.journal.audit import AUDIT_PAGE, Audit, PageVisitor, audit_stream
from runtime.journal.batch import Batch
from runtime.journal.mapper import JournalRecord, MsgspecMapper, project_stream_id
from runtime.journal.recorder import (
    JournalRecorder,
    StreamDeletion,
    StreamRow,
    journal_backend,
)
from runtime.journal.scope import Scope
from runtime.journal.seal import Checkpoints, Sealer, SealState
from runtime.journal.seal_mode import Sealed, SealMode, Unsealed
from runtime.journal.snapshots import StoredSnapshot
from runtime.settings_table import JournalKind

__all__ = ["Audit", "Batch", "Journal", "JournalKind", "ProjectDeletion", "journal_env"]


@dataclass
class _Head:
    """Where a project's stream stands: version, last hash, each stream's version, seals."""

    version: int = 0
    hash: str = GENESIS_HASH
    streams: dict[str | None, int] = field(default_factory=dict)
    seal: SealState = field(default_factory=SealState)

    def copy(self) -> _Head:
        return _Head(self.version, self.hash, dict(self.streams), dataclasses.replace(self.seal))

    def unsealed(self) -> int:
        return self.version - self.seal.position


@dataclass
class _Deletion:
    """A project's deletion in the making (:meth:`Journal.delete_project`)."""

    project_id: str
    record: NewEvent
    """The deletion record, an event of the deletion log."""
    drop_batches: list[str]
    """Batch keys that name only this project's events."""
    rewrite_batches: list[tuple[str, bytes]]
    """Batch keys that also name other projects' events, with this project's range gone."""
    seq: int = 0
    """The record's global position, once committed."""

    def leading(self) -> list[NewEvent]:
        """The events linked ahead of the batches: the deletion record."""
        return [self.record]

    def reason(self, project_id: str, seal_reason: str | None) -> str | None:
        """The seal reason forced on ``project_id``: the deletion log is sealed at once."""
        if project_id == DELETIONS_STREAM:
            return "project_deleted"
        return seal_reason

    def stream(self, heads: dict[str, _Head]) -> StreamDeletion:
        """What the store deletes in the transaction; the project's head is dropped with it."""
        heads[self.project_id] = _Head()  # dropped from the cache once written (or failed)
        return StreamDeletion(
            stream=project_stream_id(self.project_id),
            project_id=self.project_id,
            drop_batches=self.drop_batches,
            rewrite_batches=self.rewrite_batches,
        )

    def done(self, cache: dict[str, _Head], seqs: Sequence[int]) -> None:
        """Committed: drop the project's cached head; the record's position is the first."""
        cache.pop(self.project_id, None)
        self.seq = seqs[0]


class _NoDeletion:
    """A write that deletes no project: each step of a :class:`_Deletion` does nothing."""

    def leading(self) -> list[NewEvent]:
        return []

    def reason(self, project_id: str, seal_reason: str | None) -> str | None:
        return seal_reason

    def stream(self, heads: dict[str, _Head]) -> StreamDeletion | None:
        return None

    def done(self, cache: dict[str, _Head], seqs: Sequence[int]) -> None:
        pass


_NO_DELETION = _NoDeletion()


class ProjectDeletion(TypedDict):
    """What :meth:`Journal.delete_project` deleted (``delete_project``'s answer)."""

    project_id: str
    deleted_events: int
    """The project's events (its last stream version)."""
    deletion_seq: int
    """The deletion record's position in the deletion log."""
    deleted_at: str
    deleted_by: str


def _checkpoint_of(envelope: Envelope) -> JournalCheckpoint | None:
    """The checkpoint a ``journal.checkpoint`` envelope carries (None if its data is not one)."""
    try:
        return msgspec.convert(envelope.data, JournalCheckpoint)
    except msgspec.ValidationError:
        return None


def _checkpoints(rows: Sequence[StreamRow], views: Sequence[Envelope]) -> Checkpoints:
    """The project's checkpoints among its ``rows`` (decoded as ``views``), in order."""
    return [
        (version, seq, _checkpoint_of(view))
        for (seq, version, _, _), view in zip(rows, views, strict=True)
        if view.type == CHECKPOINT_TYPE and view.conversation_id is None
    ]


class _JournalApp(Application[uuid.UUID]):
    """The eventsourcing application behind the journal."""

    name = "RoostJournal"

    def construct_mapper(self) -> Mapper[uuid.UUID]:
        return MsgspecMapper()


_NO_SETTINGS: Mapping[str, str] = MappingProxyType({})
"""No further settings (the environment of the process applies)."""


def journal_env(
    kind: JournalKind, *, sqlite_path: str | None = None, extra: Mapping[str, str] = _NO_SETTINGS
) -> dict[str, str]:
    """Return the eventsourcing environment for a journal of ``kind``.

    ``sqlite_path`` is the store's file, for a kind whose store is one (SQLite).
    """
    backend = journal_backend(kind)
    env = {"PERSISTENCE_MODULE": get_topic(backend.factory)}
    if backend.path_setting is not None:
        if not sqlite_path:
            raise JournalError(f"the {kind} journal needs a file path")
        env[backend.path_setting] = sqlite_path
    env.update(backend.settings)
    env.update(extra)
    return env


class Journal:
    """Appends batches of events and reads them back by project, conversation or position."""

    def __init__(
        self,
        kind: JournalKind = "sqlite",
        *,
        sqlite_path: str | None = None,
        env: Mapping[str, str] = _NO_SETTINGS,
        redactor: Redactor | None = None,
        sealer: Sealer | None = None,
    ) -> None:
        self.kind = kind
        self.sealer = sealer
        """Seals project heads (None: this journal neither seals nor checks seals)."""
        self._seals: SealMode = Unsealed() if sealer is None else Sealed(sealer)
        settings = journal_env(kind, sqlite_path=sqlite_path, extra=env)
        journal_backend(kind).check({**os.environ, **env})
        try:
            self._app = _JournalApp(env=settings)
        except (PersistenceError, OSError) as e:
            raise JournalError(f"cannot open the {kind} journal: {e}") from e
        self._mapper: MsgspecMapper = self._app.mapper  # type: ignore[assignment]
        recorder = self._app.recorder
        if not isinstance(recorder, JournalRecorder):
            self._app.close()
            self._app.factory.close()
            raise JournalError(f"the {kind} journal's recorder is no JournalRecorder")
        self._recorder: JournalRecorder = recorder
        self._redaction = AppendRedaction(redactor)
        self._heads: dict[str, _Head] = {}
        self._ranges_encoder = msgspec.msgpack.Encoder()
        self._ranges_decoder = msgspec.msgpack.Decoder(dict[str, tuple[int, int]])

    @classmethod
    def open(cls, home: str, kind: JournalKind, *, redactor: Redactor | None = None) -> Journal:
        """Open the journal of ``kind`` for ``home`` (the daemon's ``DaemonConfig.journal``).

        A file-backed kind keeps its file in ``home``; the journal seals with the key and
        anchors of ``home`` (:meth:`Sealer.for_home`).
        """
        home_file = journal_backend(kind).home_file
        path = os.path.join(home, home_file) if home_file is not None else None
        sealer = Sealer.for_home(home)
        return cls(kind, sqlite_path=path, redactor=redactor, sealer=sealer)

    def close(self) -> None:
        """Close database connections."""
        self._app.close()
        self._app.factory.close()

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- writing --------------------------------------------------------------------

    def append(self, events: Sequence[NewEvent], *, key: str | None = None) -> list[Envelope]:
        """Commit ``events`` as one batch and return them as committed envelopes."""
        return self.append_batches([Batch(events=list(events), key=key)])[0]

    def append_batches(self, batches: Sequence[Batch]) -> list[list[Envelope]]:
        """Commit several batches in one transaction.

        A batch whose key is known is not appended again, its committed envelopes are returned
        instead.
        """
        keys = [b.key for b in batches if b.key]
        if len(set(keys)) != len(keys):
            raise JournalError("two batches in one append share an idempotency key")
        done = self._committed(keys)
        fresh = [b for b in batches if not (b.key and b.key in done)]
        written = self._write(fresh) if fresh else []
        by_batch = iter(written)
        return [done[b.key] if (b.key and b.key in done) else next(by_batch) for b in batches]

    def _committed(self, keys: Sequence[str]) -> dict[str, list[Envelope]]:
        """The envelopes of the batches whose keys were committed (none for no keys)."""
        found = self._recorder.select_batches(keys)
        out: dict[str, list[Envelope]] = {}
        for key, raw in found.items():
            envelopes: list[Envelope] = []
            for project_id, (first, last) in self._ranges_decoder.decode(raw).items():
                rows = self._recorder.select_stream_range(
                    project_stream_id(project_id), first, last
                )
                envelopes.extend(self._mapper.decode_rows(rows))
            envelopes.sort(key=lambda e: e.seq)
            out[key] = envelopes
        return out

    def _write(
        self,
        batches: Sequence[Batch],
        *,
        seal_reason: str | None = None,
        deletion: _Deletion | _NoDeletion = _NO_DELETION,
    ) -> list[list[Envelope]]:
        """Link and commit ``batches``, plus the checkpoints of the projects due for one.

        With ``seal_reason`` every project this writer knows with unsealed events is due.
        With ``deletion`` its record is committed and its project deleted in the same
        transaction (:meth:`delete_project`).
        """
        heads: dict[str, _Head] = {}
        records = [
            self._link(self._held(heads, e.project_id), e, redact=False) for e in deletion.leading()
        ]
        batch_rows: list[tuple[str, bytes]] = []
        sizes: list[int] = []
        stopping = {e.project_id for b in batches for e in b.events if e.type == "project.stopped"}
        for batch in batches:
            ranges: dict[str, list[int]] = {}
            trusted = batch.redacted and self._redaction.trusts_senders
            for event in self._redaction.streams(batch.events):
                project = event.project_id
                if event.type in (CHECKPOINT_TYPE, DELETION_TYPE):
                    raise JournalError(
                        f"{event.type} events are written by the journal only", project=project
                    )
                if project == DELETIONS_STREAM:
                    raise JournalError(
                        f"the stream {DELETIONS_STREAM} is written by the journal only",
                        project=project,
                    )
                record = self._link(self._held(heads, project), event, redact=not trusted)
                records.append(record)
                span = ranges.setdefault(project, [record.originator_version] * 2)
                span[1] = record.originator_version
            sizes.append(len(batch.events))
            if batch.key:
                batch_rows.append((batch.key, self._ranges_encoder.encode(ranges)))
        if seal_reason is not None:
            for project, known in self._heads.items():
                heads.setdefault(project, known.copy())
        sealed: list[tuple[str, int, str]] = []
        for project, head in heads.items():
            forced = deletion.reason(project, seal_reason)
            reason = self._due(head, project in stopping, forced)
            if reason is not None:
                records.append(self._checkpoint(project, head, reason))
                sealed.append((project, len(records) - 1, reason))
        stored = [self._mapper.to_stored_event(r) for r in records]
        deleting = deletion.stream(heads)
        try:
            seqs = self._recorder.insert_events(stored, batch_rows=batch_rows, deletion=deleting)
        except IntegrityError as e:
            for project in heads:
                self._heads.pop(project, None)
            raise ConcurrencyError(
                "another writer appended to "
                f"{', '.join(sorted(heads))} first, or a batch key was reused; "
                "reload the project before writing again"
            ) from e
        except PersistenceError as e:
            for project in heads:
                self._heads.pop(project, None)
            raise JournalError(f"append failed: {e}") from e
        if seqs is None or len(seqs) != len(records):
            raise JournalError("the store did not return a position for every event")
        self._heads.update(heads)
        deletion.done(self._heads, seqs)
        for project, index, reason in sealed:
            state = heads[project].seal
            state.seq = seqs[index]
            self._seals.publish(project, state, closed=reason == "shutdown")
        committed = [
            msgspec.structs.replace(r.envelope, seq=seq)
            for r, seq in zip(records, seqs, strict=True)
        ]
        out: list[list[Envelope]] = []
        start = 0
        for size in sizes:
            out.append(committed[start : start + size])
            start += size
        return out

    def _due(self, head: _Head, stopping: bool, forced: str | None) -> str | None:
        """Why the project of ``head`` is to be sealed in this transaction, if it is."""
        if not head.seal.sealing or head.unsealed() <= 0:
            return None
        every = self._seals.every_events
        reasons = (
            (forced, forced is not None),
            ("project_stopped", stopping),
            ("count", every != 0 and head.unsealed() >= every),
        )
        return next((reason for reason, applies in reasons if applies), None)

    def _checkpoint(self, project_id: str, head: _Head, reason: str) -> JournalRecord:
        """Link a checkpoint sealing ``head`` (and advance ``head`` past it)."""
        checkpoint = self._seals.checkpoint(project_id, head.seal, head.version, head.hash, reason)
        event = NewEvent(
            event_id=new_event_id(),
            type=CHECKPOINT_TYPE,
            at=checkpoint.sealed_at,
            project_id=project_id,
            correlation_id=new_correlation_id(),
            data=payload_to_data(checkpoint),
        )
        record = self._link(head, event, redact=False)
        head.seal.index = checkpoint.index
        head.seal.mac = checkpoint.mac
        head.seal.position = head.version
        head.seal.checkpoint = checkpoint
        return record

    def seal(self, reason: str = "interval") -> int:
        """Seal every project this writer appended to that has unsealed events.

        ``reason`` is ``interval`` (the Journal actor's timer) or ``shutdown``; at
        ``shutdown`` every such project's anchor is also marked closed, sealed now or not.
        Returns how many checkpoints were written.
        """
        due = [p for p, h in self._heads.items() if self._due(h, False, reason) is not None]
        if due:
            self._write([], seal_reason=reason)
        if reason == "shutdown":
            for project, head in self._heads.items():
                if project not in due and head.seal.sealing:
                    self._seals.publish(project, head.seal, closed=True)
        return len(due)

    def _link(self, head: _Head, event: NewEvent, *, redact: bool = True) -> JournalRecord:
        event, data_json = self._redaction.hashable(event, data=redact)
        stream_version = head.streams.get(event.conversation_id, 0) + 1
        digest = chain_hash(head.hash, event, stream_version, data_json=data_json)
        envelope = Envelope(
            seq=0,
            stream_version=stream_version,
            event_id=event.event_id,
            type=event.type,
            at=event.at,
            project_id=event.project_id,
            conversation_id=event.conversation_id,
            correlation_id=event.correlation_id,
            causation_id=event.causation_id,
            data=event.data,
            hash=digest,
            prev_hash=head.hash,
        )
        head.version += 1
        head.hash = digest
        head.streams[event.conversation_id] = stream_version
        return JournalRecord(
            originator_id=project_stream_id(event.project_id),
            originator_version=head.version,
            envelope=envelope,
        )

    def _held(self, heads: dict[str, _Head], project_id: str) -> _Head:
        """The project's head in this write's ``heads``: a copy of its cached one at first."""
        head = heads.get(project_id)
        if head is None:
            head = heads[project_id] = self._head(project_id).copy()
        return head

    def _head(self, project_id: str) -> _Head:
        head = self._heads.get(project_id)
        if head is None:
            head = _Head()
            anchor = self._seals.anchor(project_id)
            want = anchor.checkpoint.head_position if isinstance(anchor, Anchor) else -1
            want_hash: str | None = None
            rows = self._recorder.select_stream(project_stream_id(project_id))
            views = self._mapper.decode_rows(rows)
            for (_, version, _, _), view in zip(rows, views, strict=True):
                head.version = version
                head.hash = view.hash
                head.streams[view.conversation_id] = view.stream_version
                if version == want:
                    want_hash = view.hash
            head.seal = self._seals.resume(
                project_id,
                head_position=head.version,
                checkpoints=_checkpoints(rows, views),
                anchor=anchor,
                anchor_head_hash=want_hash,
            )
            self._heads[project_id] = head
        return head

    def delete_project(self, project_id: str, *, deleted_by: str = "") -> ProjectDeletion:
        """Delete every event of ``project_id``, its batch keys and its anchor, as evidence.

        One transaction deletes the events, drops (or rewrites) the batch keys that name
        them and appends a signed :class:`events.catalog.JournalProjectDeleted` to the
        deletion log (:mod:`events.deletion`), which is sealed at once; then the project's
        anchor file is removed and its cached head dropped, so the id starts a new chain.
        Raises :class:`ProjectNotFoundError` for a project without events. The caller makes
        sure nothing appends to the project meanwhile (the Supervisor refuses a running one).
        """
        if project_id == DELETIONS_STREAM:
            raise JournalError(f"{DELETIONS_STREAM} is the journal's own deletion log")
        events, last_hash = 0, GENESIS_HASH
        rows = self._recorder.select_stream(project_stream_id(project_id))
        views = self._mapper.decode_rows(rows)
        for (_, version, _, _), view in zip(rows, views, strict=True):
            events, last_hash = version, view.hash
        decoded = [c for _, _, c in _checkpoints(rows, views) if c is not None]
        checkpoint = next(reversed(decoded), None)  # the last one that decodes
        if events == 0:
            raise ProjectNotFoundError(
                f"no project {project_id!r} in the journal", project_id=project_id
            )
        deleted_at = self._seals.clock()
        record = JournalProjectDeleted(
            project_id=project_id,
            events=events,
            head_hash=last_hash,
            checkpoint_index=checkpoint.index if checkpoint is not None else 0,
            checkpoint_mac=checkpoint.mac if checkpoint is not None else "",
            deleted_at=deleted_at,
            deleted_by=deleted_by,
        )
        record = self._seals.sign(record)
        drop, rewrite = self._batches_without(project_id)
        deletion = _Deletion(
            project_id=project_id,
            record=NewEvent(
                event_id=new_event_id(),
                type=DELETION_TYPE,
                at=deleted_at,
                project_id=DELETIONS_STREAM,
                correlation_id=new_correlation_id(),
                data=payload_to_data(record),
            ),
            drop_batches=drop,
            rewrite_batches=rewrite,
        )
        self._heads.pop(project_id, None)
        self._write([], deletion=deletion)
        self._seals.remove_anchor(project_id, deletion.seq)
        return ProjectDeletion(
            project_id=project_id,
            deleted_events=events,
            deletion_seq=deletion.seq,
            deleted_at=deleted_at,
            deleted_by=deleted_by,
        )

    def _batches_without(self, project_id: str) -> tuple[list[str], list[tuple[str, bytes]]]:
        """The batch keys to drop, and those to rewrite, once ``project_id`` is deleted.

        A scan of every key (the table has no project column): a deletion is rare.
        """
        drop: list[str] = []
        rewrite: list[tuple[str, bytes]] = []
        for key, raw in self._recorder.select_all_batches():
            ranges = self._ranges_decoder.decode(raw)
            if project_id not in ranges:
                continue
            del ranges[project_id]
            if ranges:
                rewrite.append((key, self._ranges_encoder.encode(ranges)))
            else:
                drop.append(key)
        return drop, rewrite

    def deletions(self, project_id: str) -> list[Envelope]:
        """The deletion records of ``project_id`` in the deletion log, oldest first."""
        return [e for e, _ in deletions_of(self.read_project(DELETIONS_STREAM), project_id)]

    def deletion_audit(self, project_id: str) -> tuple[list[DeletionSummary], list[dict[str, Any]]]:
        """The deletions of ``project_id`` and what is wrong with them, for ``roost verify``.

        ``(deletions, problems)``: each record's summary (:func:`events.deletion.
        deletion_findings`); a problem for each record whose MAC does not match, and one
        ``deletion_log`` problem when the deletion log itself does not verify (its chain or
        its seals), checked only when it holds a record of this project.
        """
        records: list[Envelope] = []  # the deletion log: one record a deleted project
        audit = self.audit(DELETIONS_STREAM, visit=records.extend)
        deletions, problems = deletion_findings(records, project_id, self._seals.key)
        if deletions and (not audit.chain.ok or (audit.seals is not None and not audit.seals.ok)):
            problems.append(
                {
                    "kind": "deletion_log",
                    "chain_breaks": len(audit.chain.breaks),
                    "seal_problems": list(audit.seals.problems) if audit.seals else [],
                }
            )
        return deletions, problems

    def forget(self, project_id: str) -> None:
        """Drop the cached head of a project (after another writer may have appended)."""
        self._heads.pop(project_id, None)

    # --- snapshots ------------------------------------------------------------------

    def put_snapshot(self, snapshot: StoredSnapshot) -> None:
        """Store a conversation's snapshot in place of its last one (its own transaction).

        A snapshot is a cache (:mod:`runtime.journal.snapshots`): it is no event, is not
        chained or sealed, and is deleted with its project.
        """
        s = snapshot
        row = (s.project_id, s.conversation_id, s.seq, s.stream_version, s.head_hash, s.format)
        try:
            self._recorder.upsert_snapshot((*row, s.body))
        except PersistenceError as e:
            raise JournalError(f"storing a snapshot failed: {e}") from e

    def snapshots(
        self, project_id: str, conversation_id: str | None = None
    ) -> list[StoredSnapshot]:
        """The project's stored snapshots (one conversation's, when given)."""
        return [
            StoredSnapshot(
                project_id=p,
                conversation_id=c,
                seq=seq,
                stream_version=version,
                head_hash=head,
                format=fmt,
                body=body,
            )
            for p, c, seq, version, head, fmt, body in self._recorder.select_snapshots(
                project_id, conversation_id
            )
        ]

    def project_options(self, project_id: str) -> dict[str, Any] | None:
        """The options of the project's last ``project.started`` (None: never started)."""
        scope = Scope(conversation_id=None, topics=("project.started",))
        last = self.read_scope(project_id, scope, limit=1, newest=True)
        options = last[0].data.get("options") if last else None
        return dict(options) if isinstance(options, dict) else ({} if last else None)

    # --- reading --------------------------------------------------------------------

    def read_project(self, project_id: str, *, after_version: int = 0) -> list[Envelope]:
        """Every event of a project (and its conversations), in ``seq`` order."""
        rows = self._recorder.select_stream(project_stream_id(project_id), gt=after_version)
        return self._mapper.decode_rows(rows)

    def read_conversation(
        self, project_id: str, conversation_id: str, *, after_seq: int = 0
    ) -> list[Envelope]:
        """Every event of one conversation (its signals included) after ``after_seq``.

        In ``seq`` order, read through the conversation index.
        """
        return self.read_scope(
            project_id, Scope(conversation_id=conversation_id, after_seq=after_seq)
        )

    def read_scope(
        self, project_id: str, scope: Scope, *, limit: int | None = None, newest: bool = False
    ) -> list[Envelope]:
        """The project's events in ``scope`` (:mod:`runtime.journal.scope`), in ``seq`` order.

        At most ``limit``: the first ones, or with ``newest`` the last ones. The database
        reads them through an index, so this costs what it returns, not the project's size.
        A row whose envelope names another conversation than its index column (a row
        changed behind the journal's back) is left out, as a whole-project read would.
        """
        rows = self._recorder.select_scope(
            project_stream_id(project_id), scope, limit=limit, newest=newest
        )
        if newest:
            rows.reverse()
        wanted = scope.conversation_id
        correlation = scope.correlation_id
        return [
            e
            for e in self._mapper.decode_rows(rows)
            if e.conversation_id == wanted
            and (correlation is None or e.correlation_id == correlation)
        ]

    def count_scope(self, project_id: str, scope: Scope) -> int:
        """How many of the project's events ``scope`` holds (counted in an index).

        A correlation's events are counted by reading them (a turn's few events): the index
        of a SQLite journal of layout 2 holds a digest of the correlation id, not the id.
        """
        if scope.correlation_id is not None:
            return len(self.read_scope(project_id, scope))
        return self._recorder.count_scope(project_stream_id(project_id), scope)

    def has_project(self, project_id: str) -> bool:
        """Whether the project has any event."""
        return self._recorder.has_stream(project_stream_id(project_id))

    def read_all(
        self, *, after_seq: int = 0, limit: int = 1000, types: Sequence[str] = ()
    ) -> list[Envelope]:
        """Events of every project after global position ``after_seq`` (of ``types`` only)."""
        start, topics = after_seq + 1, list(types)
        notifications = self._recorder.select_notifications(start, limit, topics=topics)
        decode = self._mapper.decode_envelope
        return [decode(n.state, n.topic, n.id) for n in notifications]

    def iter_all(self, *, after_seq: int = 0, page: int = 1000) -> Iterator[Envelope]:
        """Every event after ``after_seq``, page by page."""
        return self._pages(after_seq, page)

    def read_types(self, types: Sequence[str]) -> list[Envelope]:
        """Every event of the given types, in ``seq`` order (used to find projects)."""
        return list(self._pages(0, 1000, types))

    def _pages(self, after_seq: int, page: int, topics: Sequence[str] = ()) -> Iterator[Envelope]:
        """The events after ``after_seq`` (of ``topics`` only, when given), ``page`` a read."""
        decode = self._mapper.decode_envelope
        cursor = after_seq
        while True:
            chunk = self._recorder.select_notifications(
                start=cursor + 1, limit=page, topics=list(topics)
            )
            if not chunk:
                return
            yield from (decode(n.state, n.topic, n.id) for n in chunk)
            cursor = chunk[-1].id

    def max_seq(self) -> int:
        """The highest global position committed (0 when empty)."""
        return int(self._recorder.max_notification_id() or 0)

    def verify(self, project_id: str) -> ChainReport:
        """Check the project's hash chain and stream versions."""
        events = self.read_project(project_id)
        report = verify_chain(events)
        return report

    def audit(
        self, project_id: str, *, visit: PageVisitor | None = None, page: int = AUDIT_PAGE
    ) -> Audit:
        """Check the project's hash chain and seals, reading its events a page at a time.

        ``visit`` sees each page (:func:`runtime.journal.audit.audit_stream`).
        """
        return audit_stream(self._recorder, self._seals, project_id, visit=visit, page=page)

    def integrity_check(self) -> str:
        """The database's own integrity check (``ok`` when sound)."""
        try:
            return self._recorder.integrity_check()
        except PersistenceError as e:
            raise JournalIntegrityError(f"integrity check failed: {e}") from e
