"""``verify``: a project's hash chain, stream versions, snapshots and live projections checked.

The journal is read in the daemon process, a page at a time (a project can hold millions
of events; the daemon keeps a page of them, not the history); a running project's live
conversations are asked (through ``ask``, the backend's way down the actor tree) for their
projections, which must equal the replay of their events.
"""

from __future__ import annotations

import difflib
import time
from collections.abc import Sequence
from typing import Any

import msgspec

from events.envelope import Envelope
from events.projections import get_projection
from runtime.client.replies import VerifyReport
from runtime.daemon.live_views import Ask, LiveProject, live_status
from runtime.daemon.snapshot_check import SnapshotCheck
from runtime.errors import ProjectNotFoundError
from runtime.journal.audit import AUDIT_PAGE
from runtime.journal.scope import Scope
from runtime.journal.store import Journal
from runtime.wire.op_args import ProjectionArgs
from runtime.wire.ops import Call

__all__ = ["verify_project"]

_SETTLE_ATTEMPTS = 10
"""How often ``verify`` asks a live conversation again while a turn moves it on."""
_SETTLE_PAUSE_S = 0.2
_PROJECT_OWN = Scope(conversation_id=None)
"""The project's own events (no conversation), read again on each retry."""


def _diff(live: Any, replayed: Any, limit: int = 40) -> list[str]:
    """A unified diff (live → replayed) of two projections, as readable JSON lines."""
    before = msgspec.json.format(msgspec.json.encode(live)).decode().splitlines()
    after = msgspec.json.format(msgspec.json.encode(replayed)).decode().splitlines()
    lines = list(difflib.unified_diff(before, after, "live", "replayed", lineterm="", n=2))
    return lines[:limit] + ([f"... {len(lines) - limit} more lines"] if len(lines) > limit else [])


def _compare_live(
    journal: Journal,
    ask: Ask,
    *,
    project_id: str,
    conversation_id: str,
    fresh: list[Any],
    deadline: float,
) -> list[dict[str, Any]]:
    """The projections where a live conversation and the replay of its events differ.

    A turn in flight can put the live state ahead of what was read (a commit after the
    read, or the steps a turn folds before their commit), and a project started again
    during the verify changes the options a replay folds: a difference is asked again, the
    conversation's events and the project's own (its ``project.started``, hence its
    options) read again through their indexes, until both settle; one that persists is a
    mismatch. The timeline is read from the journal on both sides (the backend's
    ``_timeline``), so it is not asked.
    """
    differ: list[dict[str, Any]] = []
    for attempt in range(_SETTLE_ATTEMPTS):
        differ = []
        for key in ("pending_tool_calls", "llm_context", "diagnostics"):
            args = ProjectionArgs(project_id=project_id, conversation_id=conversation_id, key=key)
            live_value = ask(Call(op="get_projection", args=args), deadline)
            replayed = get_projection(fresh, conversation_id, key)
            if msgspec.json.encode(live_value) != msgspec.json.encode(replayed):
                differ.append(
                    {
                        "kind": "projection",
                        "conversation_id": conversation_id,
                        "projection": key,
                        "diff": _diff(live_value, replayed),
                    }
                )
        if not differ or attempt == _SETTLE_ATTEMPTS - 1 or time.monotonic() >= deadline:
            break
        time.sleep(_SETTLE_PAUSE_S)
        project_own = journal.read_scope(project_id, _PROJECT_OWN)
        fresh = [*project_own, *journal.read_conversation(project_id, conversation_id)]
    return differ


class _StreamVersions:
    """Each stream's version, checked to count up by one as the pages pass."""

    def __init__(self) -> None:
        self.versions: dict[tuple[str, str | None], int] = {}
        self.mismatches: list[dict[str, Any]] = []

    def visit(self, events: Sequence[Envelope]) -> None:
        versions = self.versions
        for envelope in events:
            stream = (envelope.project_id, envelope.conversation_id)
            expected = versions.get(stream, 0) + 1
            if envelope.stream_version != expected:
                self.mismatches.append(
                    {
                        "kind": "stream_version",
                        "seq": envelope.seq,
                        "expected": expected,
                        "actual": envelope.stream_version,
                    }
                )
            versions[stream] = envelope.stream_version


def verify_project(
    journal: Journal,
    project_id: str,
    live: dict[str, LiveProject],
    ask: Ask,
    deadline: float,
    *,
    page: int = AUDIT_PAGE,
) -> VerifyReport:
    """The verdict of ``verify`` on one project; ``live`` is the Supervisor's project states.

    One pass over the project's events, ``page`` rows a read (:meth:`Journal.audit`): the
    chain, the seals, the stream versions and the snapshots are checked as they pass, and
    nothing of a page is kept once it is checked. A live conversation's replay reads its
    own events again, through its index.
    """
    snapshot_check = SnapshotCheck(journal, project_id, page=page)
    stream_versions = _StreamVersions()

    def visit(events: Sequence[Envelope]) -> None:
        stream_versions.visit(events)
        snapshot_check.visit(events)

    audit = journal.audit(project_id, visit=visit, page=page)
    deletions, deletion_problems = journal.deletion_audit(project_id)
    if not audit.checked_events and not audit.anchored and not deletions:
        raise ProjectNotFoundError(
            f"no project {project_id!r} in the journal", project_id=project_id
        )
    chain = audit.chain
    mismatches: list[dict[str, Any]] = [
        {"kind": "hash_chain", "seq": b.seq, "reason": b.reason} for b in chain.breaks
    ]
    mismatches += deletion_problems
    snapshot_problems, snapshots = snapshot_check.finish()
    mismatches += snapshot_problems
    mismatches += stream_versions.mismatches
    compared: list[str] = []
    state = live.get(project_id)
    if state is not None and state.get("status") == "running":
        status = ask(live_status(project_id), deadline)
        project_own = journal.read_scope(project_id, _PROJECT_OWN)
        for conversation_id in status.get("active_conversations", []):
            fresh = [*project_own, *journal.read_conversation(project_id, conversation_id)]
            mismatches += _compare_live(
                journal,
                ask,
                project_id=project_id,
                conversation_id=conversation_id,
                fresh=fresh,
                deadline=deadline,
            )
            compared.append(conversation_id)
    seals = audit.seals
    anchor_ok = seals is None or seals.ok
    return {
        "ok": not mismatches and anchor_ok,
        "checked_events": audit.checked_events,
        "chain_ok": chain.ok,
        "mismatches": mismatches,
        "conversations_compared": compared,
        "snapshots": snapshots,
        "anchor_ok": anchor_ok,
        "anchor_problems": list(seals.problems) if seals is not None else [],
        "deletions": deletions,
        "seal": None
        if seals is None
        else {
            "anchor": seals.anchor,
            "checkpoints": seals.checkpoints,
            "sealed_through": seals.sealed_through,
            "sealed_seq": seals.sealed_seq,
            "sealed_at": seals.sealed_at,
            "unsealed_events": seals.unsealed_events,
        },
    }
