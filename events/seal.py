"""Sealing a project's chain head: signed checkpoints in the journal, an anchor outside it.

The hash chain (:mod:`events.chain`) shows that a project's events still link up. It cannot
show that none are missing at the end, nor that nobody rewrote them and recomputed every
hash: the chain needs no secret. A seal can. The journal's writer appends a
``journal.checkpoint`` event (:class:`events.catalog.JournalCheckpoint`) now and then that
names the project's chain head (its position and hash) under an HMAC-SHA256 made with a key
the database does not hold; each checkpoint carries the previous one's MAC, so the
checkpoints form a chain of their own, like AWS CloudTrail's digest files. The latest
checkpoint is also kept outside the database as the project's :class:`Anchor`, like the
Certificate Transparency signed tree head a monitor keeps: cut the journal's tail,
checkpoints and all, and the anchor still says how far the journal reached.

Everything here is pure (MACs and comparisons). Checking a chain of checkpoints is
:mod:`events.seal_check`'s; reading and writing the key and the anchor files is
:mod:`runtime.journal.seal`'s. A *position* is a 1-based place in the project's
stream (eventsourcing's ``originator_version``): position N is the project's N-th event,
checkpoints included.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from typing import Final, NotRequired, TypedDict

import msgspec

from events.catalog import JournalCheckpoint, payload_to_data
from events.codecs import canonical_json

__all__ = [
    "CHECKPOINT_TYPE",
    "GENESIS_MAC",
    "Anchor",
    "AnchorUnreadable",
    "SealProblem",
    "anchor_mac",
    "checkpoint_mac",
    "key_id",
    "make_checkpoint",
    "sign_anchor",
]

CHECKPOINT_TYPE: Final = "journal.checkpoint"
"""The event type of a checkpoint."""

GENESIS_MAC: Final = "0" * 64
"""``prev_checkpoint`` of a project's first checkpoint."""

_CHECKPOINT_PURPOSE: Final = "roost.journal.checkpoint.v1"
_ANCHOR_PURPOSE: Final = "roost.journal.anchor.v1"
"""Domain separation: a checkpoint's MAC can never pass for an anchor's, nor the reverse."""


class Anchor(msgspec.Struct, frozen=True, kw_only=True):
    """A project's latest seal, kept outside the journal's database."""

    project_id: str
    """The project."""
    checkpoint: JournalCheckpoint
    """The project's latest checkpoint, exactly as it is in the journal."""
    checkpoint_seq: int
    """That checkpoint's global position (``seq``) in the journal."""
    closed: bool = False
    """True when written at a clean shutdown: nothing may follow the checkpoint until a
    writer opens the project again, and a writer says so here before it appends."""
    written_at: str
    """When this anchor was written (UTC ISO 8601 with milliseconds)."""
    mac: str = ""
    """HMAC-SHA256 (hex) over every other field, with the journal key."""


class AnchorUnreadable(msgspec.Struct, frozen=True, kw_only=True):
    """An anchor file that exists but cannot be read or decoded."""

    reason: str
    """What is wrong with it."""


def key_id(key: bytes) -> str:
    """Name a key without revealing it: the first 16 hex digits of its SHA-256."""
    return hashlib.sha256(key).hexdigest()[:16]


def _mac(key: bytes, body: Mapping[str, object]) -> str:
    return hmac.new(key, canonical_json(body), hashlib.sha256).hexdigest()


def checkpoint_mac(key: bytes, project_id: str, checkpoint: JournalCheckpoint) -> str:
    """The MAC of ``checkpoint`` (its ``mac`` field aside) for ``project_id``."""
    body = payload_to_data(checkpoint)
    body.pop("mac", None)
    body["project_id"] = project_id
    body["purpose"] = _CHECKPOINT_PURPOSE
    return _mac(key, body)


def make_checkpoint(
    key: bytes,
    project_id: str,
    *,
    index: int,
    head_position: int,
    head_hash: str,
    prev_checkpoint: str,
    sealed_at: str,
    reason: str,
) -> JournalCheckpoint:
    """A signed checkpoint sealing ``head_hash`` at ``head_position``."""
    unsigned = JournalCheckpoint(
        index=index,
        head_position=head_position,
        head_hash=head_hash,
        prev_checkpoint=prev_checkpoint,
        sealed_at=sealed_at,
        reason=reason,
        key_id=key_id(key),
        mac="",
    )
    return msgspec.structs.replace(unsigned, mac=checkpoint_mac(key, project_id, unsigned))


def anchor_mac(key: bytes, anchor: Anchor) -> str:
    """The MAC of ``anchor`` (its ``mac`` field aside)."""
    body: dict[str, object] = msgspec.to_builtins(anchor)
    body.pop("mac", None)
    body["purpose"] = _ANCHOR_PURPOSE
    return _mac(key, body)


def sign_anchor(key: bytes, anchor: Anchor) -> Anchor:
    """``anchor`` with its ``mac`` set."""
    return msgspec.structs.replace(anchor, mac=anchor_mac(key, anchor))


class SealProblem(TypedDict):
    """One finding of :func:`check_seals`: its ``kind`` and the fields that kind carries."""

    kind: str
    """What was lost or changed (the kinds are listed in :func:`check_seals`)."""
    seq: NotRequired[int]
    """The event's ``seq`` (a checkpoint's, or the changed event's)."""
    position: NotRequired[int]
    """That event's position in the project's stream."""
    checkpoint_index: NotRequired[int]
    """The checkpoint concerned."""
    reason: NotRequired[str]
    """Why, in words (a decode error, a chain break, an anchor that cannot be trusted)."""
    sealed_at: NotRequired[str]
    """When the checkpoint concerned was sealed."""
    from_position: NotRequired[int]
    """``missing_events``: the first position missing."""
    to_position: NotRequired[int]
    """``missing_events``: the last position missing."""
    before_seq: NotRequired[int]
    """``missing_events``: the ``seq`` of the event after the gap."""
    key_id: NotRequired[str]
    """``mac_mismatch``: the key the checkpoint names."""
    expected_key_id: NotRequired[str]
    """``mac_mismatch``: the key of this journal."""
    expected_index: NotRequired[int]
    """The checkpoint index the chain expected next."""
    after_seq: NotRequired[int | None]
    """The ``seq`` of the checkpoint before (None: there was none)."""
    after_position: NotRequired[int]
    """``rewritten``: the position of the last checkpoint that still holds."""
    head_position: NotRequired[int]
    """``rewritten``: the sealed head whose hash changed."""
    later_checkpoints: NotRequired[int]
    """``rewritten``: how many later checkpoints were rewritten too."""
    checkpoints: NotRequired[int]
    """``anchor_missing``: the checkpoints in the journal."""
    expected_position: NotRequired[int]
    """Where the anchor's checkpoint should be."""
    found_position: NotRequired[int]
    """Where it is."""
    expected_seq: NotRequired[int]
    """The anchor's checkpoint's ``seq``."""
    expected_through: NotRequired[int]
    """``truncated``: the position the journal should reach."""
    found_through: NotRequired[int]
    """The position it reaches."""
    found_seq: NotRequired[int | None]
    """``truncated``: the last ``seq`` found (None: no event)."""
    intact_through: NotRequired[int]
    """``truncated``: the last position a checkpoint before the anchor's still seals."""
    sealed_through: NotRequired[int]
    """``appended_after_shutdown``: the position sealed at the shutdown."""
    appended_events: NotRequired[int]
    """``appended_after_shutdown``: events written after it."""
    closed_at: NotRequired[str]
    """``appended_after_shutdown``: when the shutdown wrote the anchor."""
    anchor_index: NotRequired[int]
    """``anchor_stale``: the checkpoint the anchor names."""
    journal_index: NotRequired[int]
    """``anchor_stale``: the newest checkpoint in the journal."""
