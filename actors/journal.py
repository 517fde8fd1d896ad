"""The Journal actor: the single writer of the event store.

It opens the store when it receives :class:`SetupJournal` (after it was forked, never
before: a forked SQLite connection is unsafe), appends each batch in one transaction and
answers with the committed envelopes, so senders learn their global positions.

Group commit: an append is not written at once. The actor queues it and sends itself a
``_Flush`` marker; every append that was already waiting in its mailbox arrives before
the marker, and the marker commits them all in one transaction (one fsync). Under load
that turns hundreds of small commits a second into a few large ones; when idle, a batch
of one is written as soon as its marker comes back.
"""

from __future__ import annotations

from typing import Any

import msgspec

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
from runtime.errors import JournalError
from runtime.journal import Batch, Journal

__all__ = ["JournalActor"]


class JournalActor(RoostActor):
    """Single writer: appends batches, serves reads."""

    kind = "journal"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.store: Journal | None = None
        self.queued: list[tuple[AppendRequest, Any]] = []
        self.flush_pending = False

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
            events = self.store.read_types(message.types) if self.store is not None else []
            self.send(sender, ReadResult(token=message.token, events=events))
        elif isinstance(message, SetupJournal):
            if self.store is None:
                self.store = Journal.open(message.home)
                self.log.info("journal_opened", kind=self.store.kind)
            self.announce(sender, "journal")
            self.send(sender, message)

    def _flush(self) -> None:
        queued, self.queued = self.queued, []
        if len(queued) == 1 or self.store is None:
            for message, sender in queued:
                self._append(message, sender)
            return
        keys = [m.key for m, _ in queued]
        if len(set(keys)) != len(keys):
            for message, sender in queued:
                self._append(message, sender)
            return
        try:
            results = self.store.append_batches(
                [Batch(events=m.events, key=m.key) for m, _ in queued]
            )
        except JournalError:
            # One batch spoiled the transaction (e.g. a lost ownership): write them one by
            # one so only the faulty one fails.
            for message, sender in queued:
                self._append(message, sender)
            return
        for (message, sender), envelopes in zip(queued, results, strict=True):
            self.send(sender, Appended(token=message.token, envelopes=envelopes))

    def _append(self, message: AppendRequest, sender: Any) -> None:
        if self.store is None:
            self.send(sender, AppendFailed(token=message.token, error=_not_ready()))
            return
        try:
            envelopes = self.store.append(message.events, key=message.key)
        except JournalError as e:
            for project in {ev.project_id for ev in message.events}:
                self.store.forget(project)
            self.send(sender, AppendFailed(token=message.token, error=e.to_wire()))
            return
        self.send(sender, Appended(token=message.token, envelopes=envelopes))

    def _read(self, message: ReadProject, sender: Any) -> None:
        target = message.reply_to or sender
        if self.store is None:
            self.send(target, ReadResult(token=message.token, events=[]))
            return
        if message.conversation_id is None:
            events = self.store.read_project(message.project_id)
        else:
            events = self.store.read_conversation(message.project_id, message.conversation_id)
        self.send(target, ReadResult(token=message.token, events=events))

    def on_exit(self) -> None:
        """Close the store."""
        if self.store is not None:
            self.store.close()
            self.store = None


def _not_ready() -> dict[str, Any]:
    return {"code": "journal_error", "message": "the journal is not open yet", "details": {}}


class _Flush(msgspec.Struct, frozen=True):
    """Marker the journal sends itself to commit what has queued up."""
