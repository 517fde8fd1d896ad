"""``roost verify``'s check of the stored snapshots: each one rebuilt by replay and compared.

A snapshot (:mod:`runtime.journal.snapshots`) is a cache the journal hands to a
conversation that comes back instead of its history, so one that lies would change what
the conversation does. Verify rebuilds each from the conversation's events up to its
``seq`` with the same codec (``runtime.agent.snapshot.CODEC``) and the options of the
project's last ``project.started`` before it, and compares the bytes:

- ``snapshot_head_mismatch``: the event at its ``seq`` is not the conversation's, or its
  stream version or hash differ (the journal would not use it either);
- ``snapshot_mismatch``: the replay gives another state (a forged or corrupted snapshot, or
  a bug in the fold).

A snapshot written by code of another format is not compared (the journal ignores it and
replays); it is counted as ``stale``.

The rebuild rides on the audit's pages (:class:`SnapshotCheck` is a page visitor): each
snapshotted conversation's state is folded on as its events pass, as the snapshot's own
bytes (the codec folds on a prior state, as a rehydration does), and judged once the pass
is beyond its ``seq``; a conversation with no snapshot left to judge is dropped. It keeps a
state a conversation, not the events. A state folded with other options than those in force
at the snapshot (the project started again with another window) is rebuilt from the
conversation's own events, read through its index a page at a time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from events.envelope import Envelope
from runtime.agent.snapshot import CODEC
from runtime.journal.audit import AUDIT_PAGE
from runtime.journal.scope import Scope
from runtime.journal.snapshots import StoredSnapshot
from runtime.journal.store import Journal

__all__ = ["SnapshotCheck"]


@dataclass
class _Replay:
    """One snapshotted conversation's state, folded as far as its events have passed."""

    pending: list[StoredSnapshot]
    """Its snapshots not judged yet, by ``seq``."""
    body: bytes | None = None
    """The state folded so far, as a snapshot's bytes (None: none yet, or refused)."""
    options: dict[str, Any] | None = None
    """The options ``body`` was folded with."""
    last: Envelope | None = None
    """Its last event passed."""
    stale: bool = False
    """True when ``body`` cannot be folded on (other options): rebuilt at the next judgment."""


class SnapshotCheck:
    """The project's stored snapshots, checked as the audit's pages pass (:meth:`visit`)."""

    def __init__(self, journal: Journal, project_id: str, *, page: int = AUDIT_PAGE) -> None:
        self.journal = journal
        self.project_id = project_id
        self.page = page
        self.mismatches: list[dict[str, Any]] = []
        self.checked = 0
        self.stale = 0
        self._starts: list[tuple[int, dict[str, Any]]] = []
        """``(seq, options)`` of each of the project's ``project.started``, in order."""
        self._replays: dict[str, _Replay] = {}
        for snapshot in sorted(journal.snapshots(project_id), key=lambda s: s.seq):
            if snapshot.format != CODEC.format:
                self.stale += 1
                continue
            replay = self._replays.setdefault(snapshot.conversation_id, _Replay(pending=[]))
            replay.pending.append(snapshot)

    def visit(self, events: Sequence[Envelope]) -> None:
        """Fold the page's events of the snapshotted conversations; judge those passed."""
        mine: dict[str, list[Envelope]] = {}
        for e in events:
            if e.conversation_id is None:
                if e.type == "project.started":
                    found = e.data.get("options")
                    self._starts.append((e.seq, dict(found) if isinstance(found, dict) else {}))
            elif e.conversation_id in self._replays:
                mine.setdefault(e.conversation_id, []).append(e)
        for conversation_id, own in mine.items():
            self._pass(conversation_id, own)

    def finish(self) -> tuple[list[dict[str, Any]], dict[str, int]]:
        """Judge the snapshots at or beyond the last event; the mismatches and the counts."""
        for conversation_id, replay in list(self._replays.items()):
            while replay.pending:
                self._judge(conversation_id, replay, replay.pending.pop(0))
        self._replays.clear()
        # in the stored snapshots' order (by conversation), whatever the pages' boundaries
        self.mismatches.sort(key=lambda m: (str(m["conversation_id"]), int(m["seq"])))
        return self.mismatches, {"checked": self.checked, "stale": self.stale}

    def _options_at(self, seq: int) -> dict[str, Any]:
        options: dict[str, Any] = {}
        for at, found in self._starts:
            if at > seq:
                break
            options = found
        return options

    def _pass(self, conversation_id: str, own: list[Envelope]) -> None:
        replay = self._replays[conversation_id]
        start = 0
        while replay.pending:
            snapshot = replay.pending[0]
            end = start
            while end < len(own) and own[end].seq <= snapshot.seq:
                end += 1
            self._fold(conversation_id, replay, own[start:end])
            if end == len(own):
                return  # its seq may come in a later page
            self._judge(conversation_id, replay, replay.pending.pop(0))
            start = end
        del self._replays[conversation_id]  # no snapshot left to judge: its state goes

    def _fold(self, conversation_id: str, replay: _Replay, events: list[Envelope]) -> None:
        if not events:
            return
        last = replay.last = events[-1]
        options = self._options_at(last.seq)
        if replay.stale or (replay.options is not None and replay.options != options):
            replay.stale = True
            return
        replay.options = options
        replay.body = CODEC.fold(
            replay.body,
            events,
            project_id=self.project_id,
            conversation_id=conversation_id,
            options=options,
        )
        replay.stale = replay.body is None

    def _rebuild(self, conversation_id: str, seq: int, options: dict[str, Any]) -> bytes | None:
        """The conversation's state through ``seq``, from its own events (by its index)."""
        body: bytes | None = None
        after = 0
        while events := self.journal.read_scope(
            self.project_id,
            Scope(conversation_id=conversation_id, after_seq=after, before_seq=seq + 1),
            limit=self.page,
        ):
            body = CODEC.fold(
                body,
                events,
                project_id=self.project_id,
                conversation_id=conversation_id,
                options=options,
            )
            if body is None:
                break
            after = events[-1].seq
        return body

    def _judge(self, conversation_id: str, replay: _Replay, snapshot: StoredSnapshot) -> None:
        self.checked += 1
        where = {"kind": "snapshot", "conversation_id": conversation_id, "seq": snapshot.seq}
        if replay.last is None or not snapshot.headed_by(replay.last):
            self.mismatches.append({**where, "code": "snapshot_head_mismatch"})
            return
        options = self._options_at(snapshot.seq)
        if replay.stale or replay.options != options:
            replay.body = self._rebuild(conversation_id, snapshot.seq, options)
            replay.options, replay.stale = options, replay.body is None
        if replay.body != snapshot.body:
            self.mismatches.append({**where, "code": "snapshot_mismatch"})
