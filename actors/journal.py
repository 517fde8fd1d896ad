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
socket served by a thread of this process, with its own group commit, for peers that
descend from the ``peer_roots`` of :class:`SetupJournal` (the Supervisor, the daemon).
The store is used by both threads, one at a time (``self.lock``).

Seals (``runtime.journal.seal``): the store seals a project by count and when it stops; a
timer (``ROOST_SEAL_INTERVAL_S``) seals every project with unsealed events, and a clean
exit seals them all and marks their anchors closed before the store is closed.
"""

from __future__ import annotations

import os
import threading
from datetime import timedelta
from typing import Any

import msgspec
from thespian.actors import WakeupMessage

from actors.base import RoostActor
from actors.messages import (
    Appended,
    AppendFailed,
    AppendRequest,
    ReadProject,
    ReadResult,
    ReadTypes,
    SetupJournal,
)
from events.envelope import Envelope, NewEvent
from runtime.errors import JournalError
from runtime.journal.link import (
    LinkAppend,
    LinkCommitted,
    LinkFailed,
    LinkServer,
    link_settings,
)
from runtime.journal.store import Batch, Journal

__all__ = ["JournalActor"]


class JournalActor(RoostActor):
    """Single writer: appends batches, serves reads."""

    kind = "journal"
    parent_kind = "supervisor"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.store: Journal | None = None
        self.queued: list[tuple[AppendRequest, Any]] = []
        self.flush_pending = False
        self.lock = threading.Lock()
        self.link: LinkServer | None = None

    def handle(self, message: Any, sender: Any) -> None:
        """Append, read or configure."""
        if isinstance(message, AppendRequest):
            self.queued.append((message, sender))
            if not self.flush_pending:
                self.flush_pending = True
                self.send(self.myAddress, _Flush())
        elif isinstance(message, _Flush):
            self.flush_pending = False
            self._flush()
        elif isinstance(message, ReadProject):
            self._read(message, sender)
        elif isinstance(message, ReadTypes):
            with self.lock:
                events = self.store.read_types(message.types) if self.store is not None else []
            self.send(sender, ReadResult(token=message.token, events=events))
        elif isinstance(message, WakeupMessage):
            self._seal("interval")
            self._arm_seal_timer()
        elif isinstance(message, SetupJournal):
            if self.store is None:
                self.store = Journal.open(message.home)
                self.log.info("journal_opened", kind=self.store.kind)
                self._serve_link(message.peer_roots)
                self._arm_seal_timer()
            self.announce(sender, "journal")
            self.send(sender, message)

    def _arm_seal_timer(self) -> None:
        sealer = self.store.sealer if self.store is not None else None
        if sealer is not None and sealer.settings.interval_s > 0:
            self.wakeupAfter(timedelta(seconds=sealer.settings.interval_s))

    def _seal(self, reason: str) -> None:
        """Seal every project with unsealed events (a failure is logged, not raised)."""
        with self.lock:
            if self.store is None:
                return
            try:
                count = self.store.seal(reason)
            except JournalError as e:
                self.log.error("journal_seal_failed", reason=reason, error=str(e))
                return
        if count:
            self.log.debug("journal_sealed", reason=reason, checkpoints=count)

    def _serve_link(self, peer_roots: list[int]) -> None:
        settings = link_settings()
        if settings is None:
            return
        path, token = settings
        self.link = LinkServer(path, token, self._commit_link, tree_roots=peer_roots or None)
        self.link.start()
        self.log.info("journal_link_serving", pid=os.getpid())

    def _commit_link(self, requests: list[LinkAppend]) -> list[LinkCommitted | LinkFailed]:
        results = self.commit([(r.key, r.events) for r in requests])
        return [
            LinkFailed(error=r) if isinstance(r, dict) else LinkCommitted(envelopes=r)
            for r in results
        ]

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
                    return [*store.append_batches([Batch(events=e, key=k) for k, e in batches])]
                except JournalError:
                    pass
            return [self._append_one(store, key, events) for key, events in batches]

    @staticmethod
    def _append_one(
        store: Journal, key: str, events: list[NewEvent]
    ) -> list[Envelope] | dict[str, Any]:
        try:
            return store.append(events, key=key)
        except JournalError as e:
            for project in {ev.project_id for ev in events}:
                store.forget(project)
            return e.to_wire()

    def _flush(self) -> None:
        queued, self.queued = self.queued, []
        results = self.commit([(m.key, m.events) for m, _ in queued])
        for (message, sender), result in zip(queued, results, strict=True):
            if isinstance(result, dict):
                self.send(sender, AppendFailed(token=message.token, error=result))
            else:
                self.send(sender, Appended(token=message.token, envelopes=result))

    def _read(self, message: ReadProject, sender: Any) -> None:
        target = message.reply_to or sender
        with self.lock:
            if self.store is None:
                events = []
            elif message.conversation_id is None:
                events = self.store.read_project(message.project_id)
            else:
                events = self.store.read_conversation(message.project_id, message.conversation_id)
        self.send(target, ReadResult(token=message.token, events=events))

    def on_exit(self) -> None:
        """Stop the link; seal what is unsealed; close the store."""
        if self.link is not None:
            self.link.close()
            self.link = None
        self._seal("shutdown")
        with self.lock:
            if self.store is not None:
                self.store.close()
                self.store = None


def _not_ready() -> dict[str, Any]:
    return {"code": "journal_error", "message": "the journal is not open yet", "details": {}}


class _Flush(msgspec.Struct, frozen=True):
    """Marker the journal sends itself to commit what has queued up."""
