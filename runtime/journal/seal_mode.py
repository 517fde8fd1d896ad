"""Whether a journal seals: one interface and its two modes, so the journal never asks.

A journal opened for a ``ROOST_HOME`` seals (:class:`Sealed`, over its
:class:`runtime.journal.seal.Sealer`); one opened on a bare store does not
(:class:`Unsealed`): it reads no anchor, resumes every project as one it never seals,
signs no deletion record, dates it by the wall clock and checks no seal.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Protocol

from events.catalog import JournalCheckpoint, JournalProjectDeleted
from events.deletion import sign_deletion
from events.envelope import format_at
from events.seal import Anchor, AnchorUnreadable
from events.seal_check import SealWalk
from runtime.errors import JournalError
from runtime.journal.seal import Checkpoints, Sealer, SealState

__all__ = ["SealMode", "Sealed", "Unsealed", "utc_now"]

AnchorRead = Anchor | AnchorUnreadable | None
"""What reading a project's anchor finds (None: there is none)."""


def utc_now() -> datetime:
    """The clock of an unsealed journal's deletion records."""
    return datetime.now(UTC)


class SealMode(Protocol):
    """What the journal asks of its seals."""

    key: bytes | None
    """The key records are signed with (None: nothing is signed)."""
    every_events: int
    """Seal a project once it has this many unsealed events (0: never by count)."""

    def anchor(self, project_id: str) -> AnchorRead:
        """The project's anchor file, as read now."""

    def resume(
        self,
        project_id: str,
        *,
        head_position: int,
        checkpoints: Checkpoints,
        anchor: AnchorRead,
        anchor_head_hash: str | None,
    ) -> SealState:
        """The seal state of a project a writer is about to append to."""

    def checkpoint(
        self, project_id: str, state: SealState, head_position: int, head_hash: str, reason: str
    ) -> JournalCheckpoint:
        """The next checkpoint of ``project_id``."""

    def publish(self, project_id: str, state: SealState, *, closed: bool = False) -> bool:
        """Write the anchor of ``state``'s last checkpoint (False on failure)."""

    def clock(self) -> str:
        """The time a deletion record carries."""

    def sign(self, record: JournalProjectDeleted) -> JournalProjectDeleted:
        """``record`` as the deletion log stores it."""

    def remove_anchor(self, project_id: str, seq: int) -> None:
        """Remove the anchor of a project deleted by the record at ``seq``."""

    def walk(self, project_id: str, hash_of: Callable[[int], str | None]) -> SealWalk | None:
        """A walk of the project's seals (None: no seal is checked)."""


class Sealed:
    """The mode of a journal with a :class:`Sealer`: it reads, writes and checks anchors."""

    def __init__(self, sealer: Sealer) -> None:
        self.sealer = sealer
        self.key: bytes | None = sealer.key
        self.every_events = sealer.settings.every_events
        self.resume = sealer.resume
        self.checkpoint = sealer.checkpoint
        self.publish = sealer.publish
        self.clock = sealer.clock

    def anchor(self, project_id: str) -> AnchorRead:
        """The project's anchor (:meth:`runtime.journal.seal.AnchorStore.read`)."""
        return self.sealer.anchors.read(project_id)

    def sign(self, record: JournalProjectDeleted) -> JournalProjectDeleted:
        """``record`` with its key id and MAC (:func:`events.deletion.sign_deletion`)."""
        return sign_deletion(self.sealer.key, record)

    def remove_anchor(self, project_id: str, seq: int) -> None:
        """Unlink the anchor file; one that cannot be removed is an error naming the fix."""
        path = self.sealer.anchors.path(project_id)
        try:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
        except OSError as e:
            raise JournalError(
                f"project {project_id} was deleted (deletion record at seq {seq}) "
                f"but its anchor {path} could not be removed: {e.strerror}; remove it by "
                "hand before the id is used again",
                project_id=project_id,
                path=path,
            ) from e

    def walk(self, project_id: str, hash_of: Callable[[int], str | None]) -> SealWalk | None:
        """:class:`events.seal_check.SealWalk` with this journal's key."""
        return SealWalk(self.sealer.key, project_id, hash_of)


class Unsealed:
    """The mode of a journal without a sealer: no anchor, no checkpoint, no signature."""

    key: bytes | None = None
    every_events = 0

    def anchor(self, project_id: str) -> AnchorRead:
        """There is none."""
        return None

    def resume(
        self,
        project_id: str,
        *,
        head_position: int,
        checkpoints: Checkpoints,
        anchor: AnchorRead,
        anchor_head_hash: str | None,
    ) -> SealState:
        """A state that is never sealed."""
        return SealState(sealing=False)

    def checkpoint(
        self, project_id: str, state: SealState, head_position: int, head_hash: str, reason: str
    ) -> JournalCheckpoint:
        """Never asked: no project of this journal is ever due (its states do not seal)."""
        raise JournalError("an unsealed journal writes no checkpoint", project=project_id)

    def publish(self, project_id: str, state: SealState, *, closed: bool = False) -> bool:
        """Nothing to write."""
        return True

    def clock(self) -> str:
        """The wall clock."""
        return format_at(utc_now())

    def sign(self, record: JournalProjectDeleted) -> JournalProjectDeleted:
        """The record unsigned."""
        return record

    def remove_anchor(self, project_id: str, seq: int) -> None:
        """There is none."""

    def walk(self, project_id: str, hash_of: Callable[[int], str | None]) -> SealWalk | None:
        """No seal is checked."""
        return None
