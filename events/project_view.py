"""The project view: a project's state for its diagnostics, a pure fold over its events.

What it holds and the rules it follows: ``docs/projections.md``, "The project view".
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

import msgspec

from events import catalog as ev
from events.catalog import SIGNAL_TYPES, decode_data, type_names
from events.envelope import Envelope
from events.facts import Decision
from events.projections import in_seq_order
from events.view_types import ProjectDecision, ProjectView

__all__ = ["RECENT_DECISIONS_LIMIT", "project_view"]

RECENT_DECISIONS_LIMIT: Final = 200
"""How many policy decisions ``project_view`` keeps (the most recent ones)."""


_PROJECT_READS: Final = type_names(
    ev.ProjectStarted,
    ev.ProjectStopped,
    ev.ConversationStarted,
    ev.ConversationStopped,
    ev.ToolRequested,
    ev.ToolApprovalRequested,
    ev.PolicyAllowed,
    ev.PolicyDenied,
)


def _decision(
    event: Envelope,
    payload: ev.ToolApprovalRequested | ev.PolicyAllowed | ev.PolicyDenied,
    tool_names: dict[str, str],
) -> ProjectDecision:
    decision: Decision
    match payload:
        case ev.ToolApprovalRequested(call_id=call_id):
            decision, tool, reason, source = (
                "ask",
                tool_names.get(call_id),
                "approval_required",
                "policy",
            )
        case ev.PolicyAllowed(tool=tool, reason=reason, source=source):
            decision = "allow"
        case ev.PolicyDenied(tool=tool, reason=reason, source=source):
            decision = "deny"
    return {
        "at": event.at,
        "project_id": event.project_id,
        "conversation_id": event.conversation_id,
        "correlation_id": event.correlation_id,
        "tool": tool,
        "decision": decision,
        "reason": reason,
        "source": source,
    }


def project_view(events: Iterable[Envelope]) -> ProjectView:
    """Return the project's state for its diagnostics.

    ``{project_id, root, options, sandbox_layers, status, conversations, started_at,
    signal_counts, recent_decisions}``: root, options, sandbox layers and ``started_at``
    come from the last ``project.started``; ``status`` is ``running`` after it and
    ``stopped`` after ``project.stopped`` (or before any start); ``conversations`` are the
    sorted ids started and not stopped; ``recent_decisions`` the last 200
    ``policy.allowed`` / ``policy.denied`` / ``tool.approval_requested`` (decision ``ask``).
    """
    ordered = in_seq_order(events)
    project_id: str | None = ordered[0].project_id if ordered else None
    started: Envelope | None = None
    start = ev.ProjectStarted(root="")
    running = False
    conversations: set[str] = set()
    signal_counts: dict[str, int] = {}
    tool_names: dict[str, str] = {}
    decisions: list[ProjectDecision] = []
    for event in ordered:
        payload: ev.Event | None = None
        if event.type in _PROJECT_READS:
            payload = decode_data(event.type, event.data)
        match payload:
            case ev.ProjectStarted():
                started, start, running, project_id = event, payload, True, event.project_id
            case ev.ProjectStopped():
                running = False
            case ev.ConversationStarted() if event.conversation_id is not None:
                conversations.add(event.conversation_id)
            case ev.ConversationStopped() if event.conversation_id is not None:
                conversations.discard(event.conversation_id)
            case ev.ToolRequested(call_id=call_id, name=name):
                tool_names.setdefault(call_id, name)
            case ev.ToolApprovalRequested() | ev.PolicyAllowed() | ev.PolicyDenied():
                decisions.append(_decision(event, payload, tool_names))
        if event.type in SIGNAL_TYPES:
            signal_counts[event.type] = signal_counts.get(event.type, 0) + 1
    return {
        "project_id": project_id,
        "root": start.root if started is not None else None,
        "options": msgspec.to_builtins(start.options),
        "sandbox_layers": msgspec.to_builtins(start.sandbox_layers),
        "status": "running" if running else "stopped",
        "conversations": sorted(conversations),
        "started_at": started.at if started is not None else None,
        "signal_counts": dict(sorted(signal_counts.items())),
        "recent_decisions": decisions[-RECENT_DECISIONS_LIMIT:],
    }
