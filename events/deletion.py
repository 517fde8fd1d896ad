"""Deleting a project's history, as evidence: the signed record the journal keeps of it.

``roost project delete`` removes a project's events, its idempotency keys and its anchor.
What stays is one :class:`events.catalog.JournalProjectDeleted` event in the journal's
*deletion log*, the stream of the reserved id :data:`DELETIONS_STREAM` (no project can
take it: project ids begin with a letter or a digit). The record names what was deleted
(how many events, the last hash, the last checkpoint the anchor held) under an HMAC with the
journal key, so nobody without the key can forge one to pass off a cut journal as a
deletion. The deletion log is itself a stream like a project's: hash-chained, sealed by
checkpoints and anchored outside the database, so a record cut from it is found too.

Everything here is pure; :meth:`runtime.journal.store.Journal.delete_project` writes the
record and ``roost verify`` checks it (:func:`deletion_findings`).
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable
from typing import Any, Final, TypedDict

import msgspec

from events.catalog import JournalProjectDeleted, payload_to_data
from events.codecs import canonical_json
from events.envelope import Envelope
from events.seal import key_id

__all__ = [
    "DELETIONS_STREAM",
    "DELETION_TYPE",
    "DeletionSummary",
    "deletion_findings",
    "deletion_mac",
    "deletions_of",
    "sign_deletion",
]

DELETIONS_STREAM: Final = "_roost.deletions"
"""The reserved id of the journal's deletion log (not a valid project id)."""

DELETION_TYPE: Final = "journal.project_deleted"
"""The event type of a deletion record."""

_PURPOSE: Final = "roost.journal.deletion.v1"
"""Domain separation from checkpoints' and anchors' MACs."""


class DeletionSummary(TypedDict):
    """One deletion record as ``roost verify`` lists it (None: the record does not decode)."""

    seq: int
    """The record's ``seq`` in the deletion log."""
    deleted_at: str | None
    """When the project was deleted."""
    deleted_by: str | None
    """Who deleted it."""
    events: int | None
    """How many events were deleted."""
    valid: bool
    """The record decodes and its MAC matches the journal key."""


def deletion_mac(key: bytes, record: JournalProjectDeleted) -> str:
    """The MAC of ``record`` (its ``mac`` field aside)."""
    body = payload_to_data(record)
    body.pop("mac", None)
    body["purpose"] = _PURPOSE
    return hmac.new(key, canonical_json(body), hashlib.sha256).hexdigest()


def sign_deletion(key: bytes, record: JournalProjectDeleted) -> JournalProjectDeleted:
    """``record`` with its ``key_id`` and ``mac`` set."""
    unsigned = msgspec.structs.replace(record, key_id=key_id(key), mac="")
    return msgspec.structs.replace(unsigned, mac=deletion_mac(key, unsigned))


def deletions_of(log: Iterable[Envelope], project_id: str) -> list[tuple[Envelope, Any]]:
    """The deletion records of ``project_id`` in the deletion log, oldest first.

    Each is ``(envelope, record)``; ``record`` is the decoded
    :class:`JournalProjectDeleted`, or None when its data does not decode.
    """
    out: list[tuple[Envelope, Any]] = []
    for envelope in log:
        if envelope.type != DELETION_TYPE or envelope.data.get("project_id") != project_id:
            continue
        try:
            record: Any = msgspec.convert(envelope.data, JournalProjectDeleted)
        except msgspec.ValidationError:
            record = None
        out.append((envelope, record))
    return out


def deletion_findings(
    log: Iterable[Envelope], project_id: str, key: bytes | None
) -> tuple[list[DeletionSummary], list[dict[str, Any]]]:
    """What ``roost verify`` says of the deletions of ``project_id``.

    Returns ``(deletions, problems)``: one summary per record (``seq``, ``deleted_at``,
    ``deleted_by``, ``events``, ``valid``), and a ``deletion_record_invalid`` problem for
    each record that does not decode or whose MAC does not match ``key`` (None: a journal
    opened without a key checks nothing).
    """
    deletions: list[DeletionSummary] = []
    problems: list[dict[str, Any]] = []
    for envelope, record in deletions_of(log, project_id):
        valid = record is not None and (
            key is None or hmac.compare_digest(deletion_mac(key, record), record.mac)
        )
        deletions.append(
            {
                "seq": envelope.seq,
                "deleted_at": record.deleted_at if record is not None else None,
                "deleted_by": record.deleted_by if record is not None else None,
                "events": record.events if record is not None else None,
                "valid": valid,
            }
        )
        if not valid:
            problems.append(
                {
                    "kind": "deletion_record_invalid",
                    "seq": envelope.seq,
                    "reason": "its data does not decode"
                    if record is None
                    else "its MAC does not match the journal key",
                }
            )
    return deletions, problems
