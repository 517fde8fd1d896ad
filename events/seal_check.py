"""Checking a project's seals: its checkpoints, in journal order, against its anchor.

:func:`check_seals` walks the checkpoints :mod:`events.seal` makes, with the same MACs, and
says how far the journal is sealed and what was lost or changed since, one problem kind per
finding (each is what ``roost verify`` reports: ``docs/security.md``, "Sealed history").
Pure, like :mod:`events.seal`.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable, Iterable, Sequence

import msgspec

from events.catalog import JournalCheckpoint
from events.chain import ChainBreak
from events.envelope import Envelope
from events.seal import (
    CHECKPOINT_TYPE,
    GENESIS_MAC,
    Anchor,
    AnchorUnreadable,
    SealProblem,
    anchor_mac,
    checkpoint_mac,
    key_id,
)

__all__ = ["SealReport", "SealWalk", "check_seals"]


class SealReport(msgspec.Struct, frozen=True, kw_only=True):
    """What :func:`check_seals` found for one project."""

    ok: bool
    """True when every checkpoint holds and the anchor agrees with the journal."""
    checkpoints: int
    """Checkpoints in the project's journal."""
    sealed_through: int
    """Position of the last checkpoint that holds (0: none); it and every event before it
    are sealed."""
    sealed_seq: int | None
    """That checkpoint's ``seq``."""
    sealed_at: str | None
    """When it was sealed."""
    unsealed_events: int
    """Events after it: committed, not sealed yet (a crash leaves some until the next seal)."""
    anchor: str
    """The anchor outside the database: ``ok``, ``closed`` (a clean shutdown wrote it),
    ``missing`` or ``invalid``."""
    problems: list[SealProblem] = []
    """Each ``{kind, ...}``: what was lost or changed, where, and since when."""


def _anchor_holds(key: bytes, project_id: str, anchor: Anchor) -> str | None:
    """Why ``anchor`` cannot be trusted, or None when it can."""
    if anchor.project_id != project_id:
        return f"it is the anchor of project {anchor.project_id!r}"
    if not hmac.compare_digest(anchor_mac(key, anchor), anchor.mac):
        return "its MAC does not match (changed, or made with another key)"
    if not hmac.compare_digest(
        checkpoint_mac(key, project_id, anchor.checkpoint), anchor.checkpoint.mac
    ):
        return "the checkpoint in it does not match its MAC"
    return None


class _Seen(msgspec.Struct, frozen=True):
    position: int
    seq: int
    checkpoint: JournalCheckpoint
    events: int
    """Events walked through this one (itself included)."""


class SealWalk:
    """One pass over a project's events: positions, checkpoints and their problems.

    Fed in pages (:meth:`run`), it keeps the checkpoints and the hashes of the page at hand
    (:meth:`forget` drops them): the hash of a sealed head in an earlier page comes from
    ``hash_of`` (the journal reads that one event again). :func:`check_seals` is one walk
    over a whole list.
    """

    def __init__(
        self, key: bytes, project_id: str, hash_of: Callable[[int], str | None] | None = None
    ) -> None:
        self.key = key
        self.own_key = key_id(key)
        self.project_id = project_id
        self.hash_of = hash_of
        """The hash of the event at a position no longer held (None: unknown)."""
        self.problems: list[SealProblem] = []
        self.hash_at: dict[int, str] = {}
        self.by_index: dict[int, _Seen] = {}
        self.holding: list[_Seen] = []
        self.count = 0
        self.events = 0
        self.last: tuple[int, int] = (0, 0)
        self._next_position = 1
        self._next_index = 1
        self._prev_mac: str = GENESIS_MAC
        self._prev_seq: int | None = None
        self._rewritten: SealProblem | None = None

    def run(self, events: Iterable[tuple[int, Envelope]]) -> None:
        """Walk the next ``(position, event)`` pairs, in position order."""
        for position, event in events:
            if position != self._next_position:
                self.problems.append(
                    {
                        "kind": "missing_events",
                        "from_position": self._next_position,
                        "to_position": position - 1,
                        "before_seq": event.seq,
                    }
                )
            self._next_position = position + 1
            self.events += 1
            self.hash_at[position] = event.hash
            self.last = (position, event.seq)
            if event.type == CHECKPOINT_TYPE and event.conversation_id is None:
                self._checkpoint(position, event)

    def forget(self) -> None:
        """Drop the hashes of the events walked so far (a page is done)."""
        self.hash_at.clear()

    def _hash(self, position: int) -> str | None:
        found = self.hash_at.get(position)
        if found is None and self.hash_of is not None and 0 < position < self._next_position:
            return self.hash_of(position)
        return found

    def _checkpoint(self, position: int, event: Envelope) -> None:
        self.count += 1
        try:
            checkpoint = msgspec.convert(event.data, JournalCheckpoint)
        except msgspec.ValidationError as e:
            self.problems.append(
                {
                    "kind": "checkpoint_malformed",
                    "seq": event.seq,
                    "position": position,
                    "reason": str(e),
                }
            )
            return
        seen = _Seen(position, event.seq, checkpoint, self.events)
        expected = checkpoint_mac(self.key, self.project_id, checkpoint)
        if not hmac.compare_digest(expected, checkpoint.mac):
            problem: SealProblem = {
                "kind": "mac_mismatch",
                "seq": event.seq,
                "position": position,
                "checkpoint_index": checkpoint.index,
            }
            if checkpoint.key_id != self.own_key:
                problem["key_id"] = checkpoint.key_id
                problem["expected_key_id"] = self.own_key
            self.problems.append(problem)
        else:
            self._link(seen)
            self._head(seen)
        self.by_index.setdefault(checkpoint.index, seen)
        self._prev_mac = checkpoint.mac
        self._next_index = checkpoint.index + 1
        self._prev_seq = event.seq

    def _link(self, seen: _Seen) -> None:
        """The checkpoint chain: each names the one before it, indexes count up by one."""
        checkpoint = seen.checkpoint
        if checkpoint.index == self._next_index and hmac.compare_digest(
            checkpoint.prev_checkpoint, self._prev_mac
        ):
            return
        kind = (
            "checkpoint_missing"
            if checkpoint.index > self._next_index
            else "checkpoint_chain_broken"
        )
        self.problems.append(
            {
                "seq": seen.seq,
                "position": seen.position,
                "checkpoint_index": checkpoint.index,
                "kind": kind,
                "expected_index": self._next_index,
                "after_seq": self._prev_seq,
            }
        )

    def _head(self, seen: _Seen) -> None:
        """The sealed head: the event at ``head_position`` still has the sealed hash."""
        checkpoint = seen.checkpoint
        if (
            checkpoint.head_position < seen.position
            and self._hash(checkpoint.head_position) == checkpoint.head_hash
        ):
            self.holding.append(seen)
            return
        if self._rewritten is not None:
            self._rewritten["later_checkpoints"] += 1
            return
        self._rewritten = {
            "seq": seen.seq,
            "position": seen.position,
            "checkpoint_index": checkpoint.index,
            "kind": "rewritten",
            "after_position": self.holding[-1].position if self.holding else 0,
            "head_position": checkpoint.head_position,
            "sealed_at": checkpoint.sealed_at,
            "later_checkpoints": 0,
        }
        self.problems.append(self._rewritten)

    def changed_after_seal(self, breaks: Iterable[tuple[ChainBreak, int]]) -> None:
        """A chain break inside the sealed part: an event changed after it was sealed.

        Each break comes with the position of its event.
        """
        for brk, position in breaks:
            seal = next((s for s in self.holding if s.checkpoint.head_position >= position), None)
            if seal is not None:
                self.problems.append(
                    {
                        "kind": "changed_after_seal",
                        "seq": brk.seq,
                        "position": position,
                        "reason": brk.reason,
                        "checkpoint_index": seal.checkpoint.index,
                        "sealed_at": seal.checkpoint.sealed_at,
                    }
                )

    def report(
        self,
        anchor: Anchor | AnchorUnreadable | None,
        anchor_after: Anchor | AnchorUnreadable | None,
        chain_breaks: Iterable[tuple[ChainBreak, int]] = (),
    ) -> SealReport:
        """The verdict once every event is walked (see :func:`check_seals`).

        ``chain_breaks`` are the chain's breaks in these events, each with its position.
        """
        self.changed_after_seal(chain_breaks)
        state = _check_anchor(self, self.key, anchor, anchor_after)
        last = self.holding[-1] if self.holding else None
        return SealReport(
            ok=not self.problems,
            checkpoints=self.count,
            sealed_through=last.position if last else 0,
            sealed_seq=last.seq if last else None,
            sealed_at=last.checkpoint.sealed_at if last else None,
            unsealed_events=self.events - (last.events if last else 0),
            anchor=state,
            problems=self.problems,
        )


def _check_anchor(
    walk: SealWalk,
    key: bytes,
    anchor: Anchor | AnchorUnreadable | None,
    anchor_after: Anchor | AnchorUnreadable | None,
) -> str:
    """Compare the journal with the anchor kept outside it; return the anchor's state."""
    problems = walk.problems
    if isinstance(anchor, AnchorUnreadable):
        problems.append({"kind": "anchor_invalid", "reason": anchor.reason})
        return "invalid"
    if anchor is None:
        if walk.count >= 2:  # a writer repairs a missing anchor before it seals again
            problems.append({"kind": "anchor_missing", "checkpoints": walk.count})
        return "missing"
    why = _anchor_holds(key, walk.project_id, anchor)
    if why is not None:
        problems.append({"kind": "anchor_invalid", "reason": why})
        return "invalid"
    sealed = anchor.checkpoint
    expected = sealed.head_position + 1
    found_position, found_seq = walk.last
    hit = walk.by_index.get(sealed.index)
    if hit is None:
        if any(index > sealed.index for index in walk.by_index):
            problems.append(
                {
                    "kind": "anchor_checkpoint_missing",
                    "checkpoint_index": sealed.index,
                    "expected_position": expected,
                    "expected_seq": anchor.checkpoint_seq,
                    "sealed_at": sealed.sealed_at,
                }
            )
        else:
            intact = [s for s in walk.holding if s.checkpoint.index < sealed.index]
            problems.append(
                {
                    "kind": "truncated",
                    "expected_through": expected,
                    "found_through": found_position,
                    "expected_seq": anchor.checkpoint_seq,
                    "found_seq": found_seq or None,
                    "checkpoint_index": sealed.index,
                    "sealed_at": sealed.sealed_at,
                    "intact_through": intact[-1].position if intact else 0,
                }
            )
    elif hit.position != expected or not hmac.compare_digest(hit.checkpoint.mac, sealed.mac):
        problems.append(
            {
                "kind": "anchor_mismatch",
                "checkpoint_index": sealed.index,
                "expected_position": expected,
                "found_position": hit.position,
                "sealed_at": sealed.sealed_at,
            }
        )
    elif (
        anchor.closed
        and isinstance(anchor_after, Anchor)
        and anchor_after.closed
        and anchor_after.checkpoint.mac == sealed.mac
        and found_position > expected
    ):
        problems.append(
            {
                "kind": "appended_after_shutdown",
                "sealed_through": expected,
                "found_through": found_position,
                "appended_events": found_position - expected,
                "closed_at": anchor.written_at,
            }
        )
    latest = anchor
    if (
        isinstance(anchor_after, Anchor)
        and _anchor_holds(key, walk.project_id, anchor_after) is None
    ):
        latest = anchor_after
    newest = max(walk.by_index, default=0)
    if newest - latest.checkpoint.index > 1:  # the writer updates the anchor after each commit
        problems.append(
            {
                "kind": "anchor_stale",
                "anchor_index": latest.checkpoint.index,
                "journal_index": newest,
            }
        )
    return "closed" if anchor.closed else "ok"


def check_seals(
    events: Sequence[tuple[int, Envelope]],
    *,
    project_id: str,
    key: bytes,
    anchor: Anchor | AnchorUnreadable | None,
    anchor_after: Anchor | AnchorUnreadable | None = None,
    chain_breaks: Iterable[ChainBreak] = (),
) -> SealReport:
    """Judge a project's ``(position, event)`` list (in position order) against its seals.

    ``anchor`` must be read *before* the events and ``anchor_after`` after them: the writer
    commits a checkpoint first and then writes the anchor, so the first read never names a
    checkpoint the events lack, and the second is at most one checkpoint behind them.
    ``chain_breaks`` (from :func:`events.chain.verify_chain` on the same events) are
    reported again as ``changed_after_seal`` when a seal covered the broken event.

    Problems, each a dict with ``kind``: ``missing_events`` (a gap in positions),
    ``checkpoint_malformed``, ``mac_mismatch`` (a forged or edited checkpoint),
    ``checkpoint_missing`` / ``checkpoint_chain_broken`` (the checkpoint chain),
    ``rewritten`` (the sealed head's hash changed: events were rewritten and rehashed),
    ``changed_after_seal``, ``anchor_invalid``, ``anchor_missing``, ``truncated`` (the
    anchor's checkpoint is gone, events after it too), ``anchor_checkpoint_missing``,
    ``anchor_mismatch``, ``appended_after_shutdown`` and ``anchor_stale``.
    """
    walk = SealWalk(key, project_id)
    walk.run(events)
    breaks = list(chain_breaks)
    wanted = {b.seq for b in breaks}
    position_of = {e.seq: position for position, e in events if e.seq in wanted}
    return walk.report(
        anchor,
        anchor_after,
        [(b, position_of[b.seq]) for b in breaks if b.seq in position_of],
    )
