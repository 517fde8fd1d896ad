"""Conversation snapshots: a cache of a conversation's folded state beside its events.

A stored snapshot (:class:`StoredSnapshot`) is one conversation's state at ``seq`` S, with
the ``stream_version`` and ``hash`` of its event at S and the format of the code that wrote
it. The state itself is bytes the journal does not read: a :class:`SnapshotCodec` (the agent
loop's, ``runtime.agent.snapshot.CODEC``, given to the writer by the Journal actor) builds
and checks it, so this layer stays below the agent loop.

- **Written** by the single writer (:class:`SnapshotSchedule` says when): once a
  conversation has ``snapshot_every_events`` events (a project option) since its last
  snapshot, or a rehydration had to fold many events after it (a conversation that
  passivates often), the writer folds those events onto that snapshot and stores the
  result in a transaction of its own, after the appends (or the read) that made it due
  were answered; never inside a turn's commit. One row per conversation, replaced each
  time.
- **Read** for a rehydration (:meth:`runtime.journal.writer.JournalWriter.read_rehydration`):
  the snapshot and the events after it, through the conversation index. It is used only if
  the event at S is still there with the same hash and stream version and the codec accepts
  it (format, decoding, orchestration); otherwise it is ignored, the reason logged, and the
  whole history is read.
- **Verified** by ``roost verify``: each one is rebuilt by replay and compared byte for byte
  (``snapshot_mismatch``, ``snapshot_head_mismatch``).
- **Deleted** with its project, in the transaction of the deletion record.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

import msgspec

from events.envelope import Envelope
from runtime.option_table import RuntimeOptions

__all__ = ["SnapshotCodec", "SnapshotSchedule", "StoredSnapshot"]


class StoredSnapshot(msgspec.Struct, frozen=True, kw_only=True):
    """One conversation's snapshot as stored."""

    project_id: str
    """The project."""
    conversation_id: str
    """The conversation."""
    seq: int
    """The global position of the last event folded into it."""
    stream_version: int
    """That event's stream version (its place in the conversation)."""
    head_hash: str
    """That event's hash: the snapshot is used only while the event still has it."""
    format: int
    """The codec's format when it was written."""
    body: bytes
    """The state, as the codec wrote it."""

    @classmethod
    def at(
        cls, head: Envelope, *, project_id: str, conversation_id: str, format: int, body: bytes
    ) -> StoredSnapshot:
        """The snapshot of ``body``, the state folded through ``head`` (its last event)."""
        return cls(
            project_id=project_id,
            conversation_id=conversation_id,
            seq=head.seq,
            stream_version=head.stream_version,
            head_hash=head.hash,
            format=format,
            body=body,
        )

    def headed_by(self, event: Envelope) -> bool:
        """Whether ``event`` is the snapshot's last folded event, unchanged since (its hash)."""
        return (event.seq, event.stream_version, event.hash) == (
            self.seq,
            self.stream_version,
            self.head_hash,
        )


class SnapshotCodec(Protocol):
    """Builds and checks the state bytes of a snapshot (``runtime.agent.snapshot.CODEC``)."""

    format: int
    """The format this code writes and reads."""

    def fold(
        self,
        prior: bytes | None,
        events: list[Envelope],
        *,
        project_id: str,
        conversation_id: str,
        options: Mapping[str, Any],
    ) -> bytes | None:
        """The state after ``events`` folded on ``prior`` (None: ``prior`` is refused)."""
        ...

    def check(
        self, body: bytes, *, project_id: str, conversation_id: str, options: Mapping[str, Any]
    ) -> str | None:
        """Why ``body`` cannot be used (a reason code), or None."""
        ...


class SnapshotSchedule:
    """Which conversations are due for a snapshot, counted from the events committed.

    Counts start at zero when the writer starts: a conversation gets its first snapshot
    after ``snapshot_every_events`` events committed by this writer.
    """

    def __init__(self, options_of: Callable[[str], dict[str, Any] | None]) -> None:
        self.options_of = options_of
        """Reads a project's options from the journal the first time they are needed."""
        self.options: dict[str, dict[str, Any]] = {}
        """The options of each project's last ``project.started`` (by project)."""
        self._every: dict[str, int] = {}
        self._since: dict[tuple[str, str], int] = {}
        self._due: dict[tuple[str, str], None] = {}

    def options_for(self, project_id: str) -> dict[str, Any]:
        """The project's options (read once from the journal; empty when never started)."""
        options = self.options.get(project_id)
        if options is None:
            options = self.options[project_id] = self.options_of(project_id) or {}
        return options

    def every(self, project_id: str) -> int:
        """The project's ``snapshot_every_events`` (0: no snapshots)."""
        every = self._every.get(project_id)
        if every is None:
            try:
                every = RuntimeOptions.of(self.options_for(project_id)).snapshot_every_events
            except msgspec.ValidationError:
                every = 0
            self._every[project_id] = every
        return every

    def committed(self, envelopes: Iterable[Envelope]) -> None:
        """Count committed events; a conversation past its project's interval is due."""
        touched: dict[tuple[str, str], None] = {}
        for e in envelopes:
            if e.type == "project.started" and e.conversation_id is None:
                options = e.data.get("options")
                self.options[e.project_id] = dict(options) if isinstance(options, dict) else {}
                self._every.pop(e.project_id, None)
            if e.conversation_id is not None:
                key = (e.project_id, e.conversation_id)
                self._since[key] = self._since.get(key, 0) + 1
                touched[key] = None
        for key in touched:
            every = self.every(key[0])
            if every and self._since[key] >= every:
                self._due[key] = None

    def mark(self, project_id: str, conversation_id: str) -> None:
        """Make a conversation due now (unless its project takes no snapshots)."""
        if self.every(project_id):
            self._due[(project_id, conversation_id)] = None

    def take(self, limit: int) -> list[tuple[str, str]]:
        """Up to ``limit`` due conversations, oldest first; their counts start again."""
        out = list(self._due)[:limit]
        for key in out:
            del self._due[key]
            self._since[key] = 0
        return out

    def due(self) -> bool:
        """Whether a conversation is due."""
        return bool(self._due)

    def forget(self, project_id: str) -> None:
        """Drop what is known of a deleted project."""
        self.options.pop(project_id, None)
        self._every.pop(project_id, None)
        for key in [k for k in self._since if k[0] == project_id]:
            del self._since[key]
            self._due.pop(key, None)
