"""A project's own history and its problems: the events no conversation owns.

Project-level events (``conversation_id`` null) say how the project itself fares: its
starts and stops, the assets and MCP servers it loaded or failed to load, the crashes,
restarts and escalations of its actors, a full mailbox, a failed alert. They belong to no
conversation's timeline, so :func:`project_history` lists them, and :func:`project_problems`
picks out the ones that went wrong, each marked ``resolved`` when a later event says it
is over (a restart, a fresh load, the project started again). ``diagnostics`` shows the
recent ones and reports ``health: degraded`` while one is unresolved; an incident report
names those that happened during its conversation (:func:`problems_during`).

Pure folds like the other projections: sorted by ``seq`` here, no clock, plain dicts.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

import msgspec

from events import catalog as ev
from events.catalog import decode_data
from events.envelope import Envelope
from events.report import clip, describe_event
from events.view_types import HistoryEntry, ProjectHistory, ProjectProblem

__all__ = [
    "HIDDEN_TYPES",
    "PROBLEM_READS",
    "RECENT_PROBLEMS_LIMIT",
    "problems_during",
    "project_history",
    "project_problems",
    "unresolved",
]

HIDDEN_TYPES: Final = frozenset({"journal.checkpoint"})
"""Project-level types left out of the history: the journal's seals (``roost verify``)."""

RECENT_PROBLEMS_LIMIT: Final = 20
"""How many problems ``diagnostics`` shows (the most recent ones)."""

_LOADS: Final = (ev.ProjectAssetsLoaded, ev.ProjectAssetsReloaded)
_LOAD_KINDS: Final = {
    "mcp_server": "mcp_server_failed",
    "mcp_tool": "mcp_tool_refused",
    "tool_module": "tool_module_failed",
}


def _project_level(events: Iterable[Envelope], project_id: str) -> list[Envelope]:
    return sorted(
        (
            event
            for event in events
            if event.project_id == project_id
            and event.conversation_id is None
            and event.type not in HIDDEN_TYPES
        ),
        key=lambda event: (event.seq, event.event_id),
    )


def _summary(event: Envelope) -> str:
    """A line for people: what the project-level events the report does not describe say."""
    match decode_data(event.type, event.data):
        case ev.ProjectStarted(root=root):
            return f"root {root}"
        case ev.ProjectStopped(reason=reason):
            return reason
        case (
            ev.ProjectAssetsLoaded(counts=counts, errors=errors)
            | ev.ProjectAssetsReloaded(counts=counts, errors=errors)
        ):
            loaded = ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items())) or "none"
            return f"loaded {loaded}; {len(errors)} error{'' if len(errors) == 1 else 's'}"
        case (
            ev.McpServerStarted(server=server, start_ms=start_ms)
            | ev.McpServerRestarted(server=server, start_ms=start_ms)
        ):
            return f"mcp_server {server} in {start_ms} ms"
        case ev.McpServerExited(server=server, reason=reason, detail=detail):
            return clip(f"mcp_server {server}: {reason}" + (f": {detail}" if detail else ""))
    return describe_event(event.type, event.data)


def project_history(
    events: Iterable[Envelope], project_id: str, limit: int = 100
) -> ProjectHistory:
    """Return the project's own events: ``{project_id, limit, total_entries, entries}``.

    Entries are the last ``limit`` project-level events in ``seq`` order, each ``{seq,
    event_id, at, type, correlation_id, causation_id, summary, problem, data}`` where
    ``problem`` is the kind of problem the event records (see :func:`project_problems`)
    or null. Journal checkpoints are left out (:data:`HIDDEN_TYPES`).
    """
    selected = _project_level(events, project_id)
    kinds: dict[int, str] = {}
    for problem in _problems(selected):
        kinds.setdefault(problem["seq"], problem["kind"])
    kept = selected[-limit:] if limit > 0 else []
    entries: list[HistoryEntry] = [
        {
            "seq": event.seq,
            "event_id": event.event_id,
            "at": event.at,
            "type": event.type,
            "correlation_id": event.correlation_id,
            "causation_id": event.causation_id,
            "summary": _summary(event),
            "problem": kinds.get(event.seq),
            "data": msgspec.to_builtins(event.data),
        }
        for event in kept
    ]
    return {
        "project_id": project_id,
        "limit": limit,
        "total_entries": len(selected),
        "entries": entries,
    }


def _problem(event: Envelope, kind: str, subject: str, message: str) -> ProjectProblem:
    return {
        "seq": event.seq,
        "event_id": event.event_id,
        "at": event.at,
        "type": event.type,
        "correlation_id": event.correlation_id,
        "kind": kind,
        "subject": subject,
        "summary": clip(f"{subject}: {message}" if message else subject),
        "resolved": False,
        "resolved_seq": None,
        "data": msgspec.to_builtins(event.data),
    }


def _found(event: Envelope, payload: ev.Event | None) -> list[ProjectProblem]:
    """The problems one project-level event records (none for most)."""
    match payload:
        case ev.ProjectAssetsLoaded(errors=errors) | ev.ProjectAssetsReloaded(errors=errors):
            return [
                _problem(
                    event,
                    _LOAD_KINDS.get(str(error.get("type")), "asset_load_failed"),
                    f"{error.get('type', 'asset')} {error.get('key', '?')}",
                    str(error.get("reason", "")),
                )
                for error in errors
            ]
        case ev.ActorCrashed(actor=actor, reason=reason):
            return [_problem(event, "crash", actor, reason)]
        case ev.ActorEscalated(actor=actor, reason=reason):
            return [_problem(event, "escalation", actor, reason)]
        case ev.ActorMailboxOverflow(actor=actor, phase="full", refused=refused):
            return [_problem(event, "mailbox_full", actor, f"{refused} send(s) refused")]
        case ev.McpServerExited(server=server, reason=reason, detail=detail):
            message = f"{reason}: {detail}" if detail else reason
            return [_problem(event, "mcp_server_exited", f"mcp_server {server}", message)]
        case ev.AlertFailed(event=signal, router=router, reason=reason):
            return [_problem(event, "alert_failed", f"alert {signal} via {router}", reason)]
        case ev.ProjectStopped(reason=reason) if reason != "requested":
            return [_problem(event, "not_restored", "project", reason)]
    return []


def _resolves(payload: ev.Event | None, problem: ProjectProblem) -> bool:
    """Whether a later event (``payload``) ends ``problem``."""
    kind, subject = problem["kind"], problem["subject"]
    match payload:
        case ev.ProjectStarted():
            return True
        case ev.ProjectAssetsLoaded() | ev.ProjectAssetsReloaded():
            return kind in (
                "asset_load_failed",
                "mcp_server_failed",
                "mcp_tool_refused",
                "tool_module_failed",
            )
        case ev.ActorRestarted(actor=actor):
            return kind in ("crash", "escalation") and (
                actor == subject or actor.startswith("project:")
            )
        case ev.ActorMailboxOverflow(actor=actor, phase="cleared"):
            return kind == "mailbox_full" and actor == subject
        case ev.McpServerStarted(server=server) | ev.McpServerRestarted(server=server):
            return kind == "mcp_server_exited" and subject == f"mcp_server {server}"
        case ev.AlertDispatched(event=signal, router=router):
            return kind == "alert_failed" and subject == f"alert {signal} via {router}"
    return False


PROBLEM_READS: Final = frozenset(
    {
        "project.started",
        "project.stopped",
        "project.assets_loaded",
        "project.assets_reloaded",
        "actor.crashed",
        "actor.restarted",
        "actor.escalated",
        "actor.mailbox_overflow",
        "alert.dispatched",
        "alert.failed",
        "mcp.server_started",
        "mcp.server_exited",
        "mcp.server_restarted",
    }
)
"""The project-level event types that record a problem or resolve one (``_found``,
``_resolves``): what a query of one conversation reads to find the project's problems."""


def _problems(ordered: list[Envelope]) -> list[ProjectProblem]:
    problems: list[ProjectProblem] = []
    for event in ordered:
        payload = decode_data(event.type, event.data)
        for problem in problems:
            if not problem["resolved"] and _resolves(payload, problem):
                problem["resolved"], problem["resolved_seq"] = True, event.seq
        problems.extend(_found(event, payload))
    return problems


def project_problems(events: Iterable[Envelope], project_id: str) -> list[ProjectProblem]:
    """Return the problems the project's own events record, in ``seq`` order.

    Each is ``{seq, event_id, at, type, correlation_id, kind, subject, summary, resolved,
    resolved_seq, data}`` (``resolved_seq``: the event that resolved it). Kinds:
    ``asset_load_failed``, ``mcp_server_failed``, ``mcp_tool_refused``,
    ``tool_module_failed`` (an entry of a ``project.assets_loaded``/``reloaded``'s
    ``errors``; resolved by the next load),
    ``crash`` and ``escalation`` (``actor.crashed``/``escalated``; resolved when that actor
    or its project is restarted), ``mailbox_full`` (resolved when it clears),
    ``mcp_server_exited`` (resolved when the server starts again), ``alert_failed``
    (resolved by an alert delivered through the same router), ``not_restored`` (a
    ``project.stopped`` the daemon recorded instead of restoring it). A later
    ``project.started`` resolves them all.
    """
    return _problems(_project_level(events, project_id))


def unresolved(problems: Iterable[ProjectProblem]) -> list[ProjectProblem]:
    """The problems not yet resolved."""
    return [problem for problem in problems if not problem["resolved"]]


def problems_during(
    problems: Iterable[ProjectProblem], first_seq: int | None, last_seq: int | None
) -> list[ProjectProblem]:
    """The problems that bear on the events from ``first_seq`` to ``last_seq``.

    Those recorded in that span, and those recorded before it and still unresolved at its
    start (an MCP server that failed to load at project start leaves its tools missing in
    every later turn). None when the span is empty.
    """
    if first_seq is None or last_seq is None:
        return []
    return [
        problem
        for problem in problems
        if problem["seq"] <= last_seq
        and (
            problem["seq"] >= first_seq
            or problem["resolved_seq"] is None
            or problem["resolved_seq"] > first_seq
        )
    ]
