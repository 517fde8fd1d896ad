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
"""

from __future__ import annotations

from typing import Any

from events.envelope import Envelope
from runtime.agent.snapshot import CODEC
from runtime.journal.store import Journal

__all__ = ["snapshot_mismatches"]


def _options_at(events: list[Envelope], seq: int) -> dict[str, Any]:
    options: dict[str, Any] = {}
    for e in events:
        if e.seq > seq:
            break
        if e.type == "project.started" and e.conversation_id is None:
            found = e.data.get("options")
            options = dict(found) if isinstance(found, dict) else {}
    return options


def snapshot_mismatches(
    journal: Journal, project_id: str, events: list[Envelope]
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """The mismatches of the project's stored snapshots, and ``{checked, stale}``.

    ``events`` are the project's, in ``seq`` order (the audit's).
    """
    mismatches: list[dict[str, Any]] = []
    checked = stale = 0
    stored = journal.snapshots(project_id)
    wanted = {s.conversation_id for s in stored}
    by_conversation: dict[str, list[Envelope]] = {c: [] for c in wanted}
    for e in events:  # one pass: a project of many conversations has many events
        if e.conversation_id in wanted:
            by_conversation[e.conversation_id].append(e)
    for snapshot in stored:
        conversation_id = snapshot.conversation_id
        if snapshot.format != CODEC.format:
            stale += 1
            continue
        checked += 1
        mine = [e for e in by_conversation[conversation_id] if e.seq <= snapshot.seq]
        where = {"kind": "snapshot", "conversation_id": conversation_id, "seq": snapshot.seq}
        head = mine[-1] if mine else None
        if head is None or (head.seq, head.stream_version, head.hash) != (
            snapshot.seq,
            snapshot.stream_version,
            snapshot.head_hash,
        ):
            mismatches.append({**where, "code": "snapshot_head_mismatch"})
            continue
        rebuilt = CODEC.fold(
            None,
            mine,
            project_id=project_id,
            conversation_id=conversation_id,
            options=_options_at(events, snapshot.seq),
        )
        if rebuilt != snapshot.body:
            mismatches.append({**where, "code": "snapshot_mismatch"})
    return mismatches, {"checked": checked, "stale": stale}
