"""The events of a run's review: ``tool.changes`` and one ``security.leftover_quarantined`` each.

Every caller that runs a tool process (``command.run`` and the asset commands through it, a
dead run's recovery) turns the :class:`runtime.guard.review.leftovers.ChangeReport` into events
here.
"""

from __future__ import annotations

import msgspec

from events.catalog import Event, SecurityLeftoverQuarantined, ToolChanges
from runtime.guard.review.leftovers import ChangeReport

__all__ = ["change_events"]


def change_events(
    report: ChangeReport | None,
    *,
    tool: str,
    call_id: str,
    recovered: bool = False,
    conversation_id: str | None = None,
) -> list[Event]:
    """``tool.changes`` (when anything changed) and a quarantine signal per entry taken out.

    ``conversation_id`` is named in the payloads of a recovered run's events, which are
    recorded at project level (the conversation's actor did not make them).
    """
    if report is None or (report.empty and not report.quarantined):
        return []
    out: list[Event] = [
        SecurityLeftoverQuarantined(
            path=q.path,
            reason=q.reason,
            kind=q.kind,
            moved_to=q.moved_to,
            error=q.error,
            tool=tool,
            call_id=call_id,
            conversation_id=conversation_id,
        )
        for q in report.quarantined
    ]
    out.append(
        ToolChanges(
            call_id=call_id,
            tool=tool,
            method=report.method,
            detail=report.detail,
            created=msgspec.to_builtins(report.created),
            modified=msgspec.to_builtins(report.modified),
            deleted=msgspec.to_builtins(report.deleted),
            created_count=report.created_count,
            modified_count=report.modified_count,
            deleted_count=report.deleted_count,
            quarantined=msgspec.to_builtins(report.quarantined),
            recovered=recovered,
            conversation_id=conversation_id,
        )
    )
    return out
