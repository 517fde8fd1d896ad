"""The per-project SHA-256 hash chain: computing links and checking a sequence of them."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import TypedDict

import msgspec

from events.codecs import canonical_json
from events.envelope import GENESIS_HASH, Envelope, NewEvent

__all__ = ["ChainBreak", "ChainReport", "ChainWalk", "chain_hash", "verify_chain"]


class _HashedBody(TypedDict):
    """What an event's hash covers (its ``data`` as journaled)."""

    event_id: str
    type: str
    at: str
    project_id: str
    conversation_id: str | None
    stream_version: int
    correlation_id: str
    causation_id: str | None
    data: dict[str, object] | msgspec.Raw


def _body(
    event: NewEvent | Envelope, stream_version: int, data: dict[str, object] | msgspec.Raw
) -> _HashedBody:
    return {
        "event_id": event.event_id,
        "type": event.type,
        "at": event.at,
        "project_id": event.project_id,
        "conversation_id": event.conversation_id,
        "stream_version": stream_version,
        "correlation_id": event.correlation_id,
        "causation_id": event.causation_id,
        "data": data,
    }


def chain_hash(
    prev_hash: str,
    event: NewEvent | Envelope,
    stream_version: int,
    *,
    data_json: bytes | None = None,
) -> str:
    """Return the hash linking ``event`` (at ``stream_version``) to ``prev_hash``.

    The global ``seq`` is not hashed: it is assigned at commit, after the hash.
    ``data_json``: ``canonical_json(event.data)`` when the caller has it already (the
    journal, which scans it for secrets first); the hash is the same.
    """
    data = event.data if data_json is None else msgspec.Raw(data_json)
    digest = hashlib.sha256(prev_hash.encode("ascii"))
    digest.update(b"\n")
    digest.update(canonical_json(_body(event, stream_version, data)))
    return digest.hexdigest()


class ChainBreak(msgspec.Struct, frozen=True, kw_only=True):
    """The first place a project's chain does not hold."""

    project_id: str
    """The project whose chain broke."""
    seq: int
    """The event at which it broke."""
    reason: str
    """``hash_mismatch`` (event changed) or ``prev_hash_mismatch`` (removed/reordered)."""


class ChainReport(msgspec.Struct, frozen=True, kw_only=True):
    """Result of checking hash chains."""

    ok: bool
    """True when every project's chain holds."""
    checked_events: int
    """How many events were checked."""
    breaks: list[ChainBreak] = []
    """The first break per project, if any."""


class ChainWalk:
    """:func:`verify_chain` one event at a time, so a long history is checked in pages.

    It keeps each project's last hash and first break, nothing of the events themselves.
    """

    def __init__(self) -> None:
        self._heads: dict[str, str] = {}
        self._broken: dict[str, ChainBreak] = {}
        self.checked = 0
        """How many events were fed."""

    def feed(self, event: Envelope) -> ChainBreak | None:
        """Check the next event (in ``seq`` order); its project's first break, if it is one."""
        self.checked += 1
        project = event.project_id
        if project in self._broken:
            return None
        if event.prev_hash != self._heads.get(project, GENESIS_HASH):
            found = ChainBreak(project_id=project, seq=event.seq, reason="prev_hash_mismatch")
        elif chain_hash(event.prev_hash, event, event.stream_version) != event.hash:
            found = ChainBreak(project_id=project, seq=event.seq, reason="hash_mismatch")
        else:
            self._heads[project] = event.hash
            return None
        self._broken[project] = found
        return found

    def report(self) -> ChainReport:
        """What the events fed so far show."""
        breaks = sorted(self._broken.values(), key=lambda b: (b.seq, b.project_id))
        return ChainReport(ok=not breaks, checked_events=self.checked, breaks=breaks)


def verify_chain(events: Iterable[Envelope]) -> ChainReport:
    """Check the chain of every project in ``events`` (given in ``seq`` order).

    Detects a changed event (its hash no longer matches its body), and a removed or
    reordered event (its ``prev_hash`` is not the previous event's hash).
    """
    walk = ChainWalk()
    for event in events:
        walk.feed(event)
    return walk.report()
