"""The Journal actor: the single writer of the event store.

It opens the store when it receives :class:`SetupJournal` (after it was forked, never
before: a forked SQLite connection is unsafe), appends each batch in one transaction and
answers with the committed envelopes, so senders learn their global positions.

Group commit: an append is not written at once. The actor queues it and sends itself a
``_Flush`` marker; every append that was already waiting in its mailbox arrives before
the marker, and the marker commits them all in one transaction (one fsync). Under load
that turns hundreds of small commits a second into a few large ones; when idle, a batch
of one is written as soon as its marker comes back.

Conversations append through the Journal link instead (``runtime.journal.link``): a Unix
socket served by a thread of this process, with its own group commit (and its commit
window, ``runtime.journal.commit_window``), for peers that descend from the ``peer_roots``
of :class:`SetupJournal` (the Supervisor, the daemon).
The store is used by both threads, one at a time, through one
:class:`runtime.journal.writer.JournalWriter` (the group commit and its fallback, reads,
seals): this actor only queues, answers and serves the link.

A project's deletion (:class:`DeleteProject`, from the Supervisor, which refuses a running
project) commits the appends queued before it, then deletes through the writer, which
drops the project's cached head; the answer goes back to the Supervisor.

Snapshots (``runtime.journal.snapshots``): after a group commit is answered (here, or on
the link's thread) the writer stores the snapshots that became due; a conversation's read
(:class:`ReadProject` with a ``conversation_id``) is answered with its snapshot and the
events after it, a refused snapshot logged (``journal_snapshot_rejected``) and replaced by
the whole history.

Seals (``runtime.journal.seal``): the store seals a project by count and when it stops; a
timer (``ROOST_SEAL_INTERVAL_S``) seals every project with unsealed events, and a clean
exit seals them all and marks their anchors closed before the store is closed.
"""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Any

import msgspec
from thespian.actors import WakeupMessage

from actors.base import RoostActor
from actors.dispatch import handles
from actors.messages import (
    Appended,
    AppendFailed,
    AppendRequest,
    DeleteProject,
    ProjectDeleted,
    ReadProject,
    ReadResult,
    ReadTypes,
    SetupJournal,
)
from runtime.agent.snapshot import CODEC
from runtime.errors import wire_error
from runtime.journal.commit_window import CommitWindow
from runtime.journal.link import LinkAppend, LinkCommitted, LinkFailed, LinkServer, link_settings
from runtime.journal.snapshot_worker import SnapshotWorker
from runtime.journal.store import Batch
from runtime.journal.writer import JournalWriter, SnapshotOutcome

__all__ = ["JournalActor"]


class _Flush(msgspec.Struct, frozen=True):
    """Marker the journal sends itself to commit what has queued up."""


class JournalActor(RoostActor):
    """Single writer: appends batches, serves reads."""

    kind = "journal"
    parent_kind = "supervisor"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.writer = JournalWriter(snapshots=CODEC)
        self.queued: list[tuple[AppendRequest, Any]] = []
        self.flush_pending = False
        self.link: LinkServer | None = None
        self.snapshotter: SnapshotWorker | None = None
        """Writes the snapshots due beside the link's commits (with the link)."""

    @handles(AppendRequest)
    def _queue(self, message: AppendRequest, sender: Any) -> None:
        self.queued.append((message, sender))
        if not self.flush_pending:
            self.flush_pending = True
            self.send(self.myAddress, _Flush())

    @handles(_Flush)
    def _flush_marker(self, message: _Flush, sender: Any) -> None:
        self.flush_pending = False
        self._flush()

    @handles(ReadProject)
    def _serve_read(self, message: ReadProject, sender: Any) -> None:
        self.send(message.reply_to or sender, self._read(message))
        if self.writer.snapshots_due():  # a long rehydration: its snapshot, after it
            self._snapshots()

    @handles(ReadTypes)
    def _read_types(self, message: ReadTypes, sender: Any) -> None:
        events = self.writer.read_types(message.types)
        self.send(sender, ReadResult(token=message.token, events=events))

    @handles(DeleteProject)
    def _delete(self, message: DeleteProject, sender: Any) -> None:
        if self.queued:  # appends sent before the deletion are committed before it
            self._flush()
        outcome = self.writer.delete_project(message.project_id, message.deleted_by)
        self.log.info("journal_project_deleted", project_id=message.project_id, **outcome)
        self.send(
            sender,
            ProjectDeleted(
                project_id=message.project_id,
                reply_to=message.reply_to,
                result=outcome.get("result"),
                error=outcome.get("error"),
            ),
        )

    @handles(WakeupMessage)
    def _seal_due(self, message: WakeupMessage, sender: Any) -> None:
        self._seal("interval")
        self._arm_seal_timer()

    def _read(self, message: ReadProject) -> ReadResult:
        """A project's events, or a conversation's snapshot and the events after it."""
        project_id, conversation_id = message.project_id, message.conversation_id
        if conversation_id is None:
            events = self.writer.read(project_id)
            return ReadResult(token=message.token, events=events)
        read = self.writer.read_rehydration(project_id, conversation_id)
        snapshot = read.snapshot
        if snapshot is not None:
            self.log.info(
                "journal_snapshot_read",
                project_id=project_id,
                conversation_id=conversation_id,
                seq=snapshot.seq,
                events_after=len(read.events),
            )
        elif read.rejected is not None:
            self.log.warning(
                "journal_snapshot_rejected",
                project_id=project_id,
                conversation_id=conversation_id,
                reason=read.rejected,
                events=len(read.events),
            )
        body = snapshot.body if snapshot is not None else None
        return ReadResult(token=message.token, events=read.events, snapshot=body)

    def _snapshots(self) -> None:
        """Write the snapshots that are due (after the appends that made them due).

        On the snapshot worker's thread when the link serves, else here.
        """
        if self.snapshotter is not None:
            self.snapshotter.wake()
        else:
            self._report_snapshots(self.writer.write_snapshots())

    def _report_snapshots(self, outcomes: list[SnapshotOutcome]) -> None:
        for outcome in outcomes:
            if "error" in outcome:
                self.log.error("journal_snapshot_failed", **outcome)
            else:
                self.log.debug("journal_snapshot_written", **outcome)

    def _snapshot_worker_failed(self, error: Exception) -> None:
        self.log.error("journal_snapshot_failed", error=f"{type(error).__name__}: {error}")

    @handles(SetupJournal)
    def _setup(self, message: SetupJournal, sender: Any) -> None:
        """Open the store; answer with ``message``, carrying the error if it did not open."""
        try:
            opened = self.writer.open(message.home, message.journal)
        except Exception as e:  # the Supervisor fails the boot with it, at once
            self.log.error("journal_open_failed", error=f"{type(e).__name__}: {e}")
            self.announce(sender, "journal")
            self.send(sender, msgspec.structs.replace(message, error=wire_error(e)))
            return
        if opened:
            assert self.writer.store is not None
            self.log.info("journal_opened", kind=self.writer.store.kind)
            self._serve_link(message.peer_roots)
            self._arm_seal_timer()
        self.announce(sender, "journal")
        self.send(sender, message)

    def _arm_seal_timer(self) -> None:
        interval_s = self.writer.seal_interval_s()
        if interval_s > 0:
            self.wakeupAfter(timedelta(seconds=interval_s))

    def _seal(self, reason: str) -> None:
        """Seal every project with unsealed events (a failure is logged, not raised)."""
        count = self.writer.seal(reason)
        if isinstance(count, str):
            self.log.error("journal_seal_failed", reason=reason, error=count)
        elif count:
            self.log.debug("journal_sealed", reason=reason, checkpoints=count)

    def _serve_link(self, peer_roots: list[int]) -> None:
        settings = link_settings()
        if settings is None:
            return
        path, token = settings
        self.link = LinkServer(
            path,
            token,
            self._commit_link,
            tree_roots=peer_roots or None,
            after=self._after_link,
            window=CommitWindow(),
        )
        self.snapshotter = SnapshotWorker(
            self.writer, self._report_snapshots, self._snapshot_worker_failed
        )
        self.snapshotter.start()
        self.link.start()
        self.log.info("journal_link_serving", pid=os.getpid())

    def _commit_link(self, requests: list[LinkAppend]) -> list[LinkCommitted | LinkFailed]:
        results = self.writer.commit_batches(
            [Batch(events=r.events, key=r.key, redacted=r.redacted) for r in requests]
        )
        return [
            LinkFailed(error=r) if isinstance(r, dict) else LinkCommitted(envelopes=r)
            for r in results
        ]

    def _after_link(self) -> None:
        """On the link's thread, once its appends were answered: the snapshots due."""
        if self.writer.snapshots_due():
            self._snapshots()  # on the worker's thread: the link's next pass goes on

    def _flush(self) -> None:
        queued, self.queued = self.queued, []
        results = self.writer.commit([(m.key, m.events) for m, _ in queued])
        for (message, sender), result in zip(queued, results, strict=True):
            if isinstance(result, dict):
                self.send(sender, AppendFailed(token=message.token, error=result))
            else:
                self.send(sender, Appended(token=message.token, envelopes=result))
        if self.writer.snapshots_due():
            self._snapshots()

    def on_exit(self) -> None:
        """Stop the link; seal what is unsealed; close the store."""
        if self.link is not None:
            self.link.close()
            self.link = None
        if self.snapshotter is not None:
            self.snapshotter.close()
            self.snapshotter = None
        self._seal("shutdown")
        self.writer.close()
