"""Incident queries: the merged incident timeline and the incident report (JSON form).

Both are pure functions of a project's events. They sort by ``seq`` themselves, read no
clock (latencies come from the events' ``at``), and build every list in ``seq`` order and
every mapping with sorted or fixed keys, so the same events give the same bytes through
``canonical_json`` whatever order they were given in. ``render_incident_markdown`` (from
``events.report``, re-exported here) renders the report as Markdown; the stages come from
``events.stages`` and what each event type means (kind, section) from its payload's
``facts``. The sections are described in ``docs/projections.md``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Final

import msgspec

from events import catalog as ev
from events.catalog import PAYLOAD_TYPES, decode_data, facts_of, type_names
from events.envelope import Envelope
from events.facts import SECTIONS, ErrorKind, Section
from events.project_history import problems_during, project_problems
from events.projections import DECISION_TYPES, fold_status, in_seq_order, orchestration_enabled
from events.report import LATENCY_STAGES, describe_event, render_incident_markdown
from events.stages import StageSpan, cause_indexes, stage_spans
from events.view_types import (
    CausalNode,
    ChangeRun,
    EntrySource,
    FirstError,
    IncidentReport,
    IncidentTimeline,
    IncidentTimelineEntry,
    ProblemEntry,
    ProjectProblem,
    ReportStatus,
    StageEntry,
    StageLatency,
    ToolCallEntry,
    ToolChangesData,
)

__all__ = [
    "DEFAULT_LIMIT",
    "ERROR_KINDS",
    "MAX_LIMIT",
    "PROJECT_LEVEL_READS",
    "cause_indexes",
    "conversation_exists",
    "epoch_ms",
    "incident_report",
    "incident_timeline",
    "normalize_limit",
    "render_incident_markdown",
]

DEFAULT_LIMIT: Final = 100
"""Entries an incident timeline keeps when no valid limit is given."""

MAX_LIMIT: Final = 500
"""The most entries an incident timeline keeps."""

ERROR_KINDS: Final[dict[str, ErrorKind]] = {
    name: cls.facts.kind for name, cls in PAYLOAD_TYPES.items() if cls.facts.kind is not None
}
"""Event types that count as an error (for ``first_error``), mapped to their kind (each
payload class's ``facts.kind``).

Every ``security.*`` error is of kind ``security``, as in the report's
``security_signals``: the denial it comes with is the ``policy.denied`` beside it, which
``denials`` lists, so the page counts and marks each event once, under one name."""

_ACTOR_READS: Final = type_names(
    ev.ActorCrashed, ev.ActorRestarted, ev.ActorEscalated, ev.ActorMailboxOverflow
)
_RECOVERED_READS: Final = type_names(ev.ToolChanges, ev.SecurityLeftoverQuarantined)
_CALL_READS: Final = type_names(
    ev.ToolRequested,
    ev.ToolApprovalRequested,
    ev.PolicyAllowed,
    ev.PolicyDenied,
    ev.ToolCompleted,
    ev.ToolFailed,
    ev.ToolCancelled,
    ev.A2aTaskUpdated,
)
PROJECT_LEVEL_READS: Final = _ACTOR_READS | _RECOVERED_READS
"""Types of the project-level events (no conversation id) ``concerns`` may count in."""
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_MILLISECOND: Final = timedelta(milliseconds=1)


def normalize_limit(limit: object) -> int:
    """Return ``limit`` capped at ``MAX_LIMIT``; a non-int, a bool or a value < 1 gives 100."""
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        return DEFAULT_LIMIT
    return min(limit, MAX_LIMIT)


def conversation_exists(events: Iterable[Envelope], conversation_id: str) -> bool:
    """Return whether the conversation was ever started (a ``conversation.started`` exists)."""
    return any(
        event.type == "conversation.started" and event.conversation_id == conversation_id
        for event in events
    )


SHARED_ACTORS = frozenset({"toolrunner", "policy", "journal"})
"""Project actors every conversation depends on: their crashes belong to each incident."""


def concerns(event: Envelope, conversation_id: str) -> bool:
    """Tell whether ``event`` belongs to the conversation's incident views.

    Its own events and signals; the project-level ``actor.*`` signals about the
    conversation's actor or the actors it depends on (``toolrunner``, ``policy``,
    ``journal``), which the Project and the Supervisor record without a conversation id;
    and the project-level review of one of its calls that a stop or crash cut
    (``tool.changes`` and ``security.leftover_quarantined`` naming the conversation).
    """
    if event.conversation_id == conversation_id:
        return True
    if event.conversation_id is None and event.type in _RECOVERED_READS:
        return event.data.get("conversation_id") == conversation_id
    if event.conversation_id is not None or event.type not in _ACTOR_READS:
        return False
    match decode_data(event.type, event.data):
        case (
            ev.ActorCrashed(actor=actor)
            | ev.ActorRestarted(actor=actor)
            | ev.ActorEscalated(actor=actor)
            | ev.ActorMailboxOverflow(actor=actor)
        ):
            return actor == f"conversation:{conversation_id}" or actor in SHARED_ACTORS
    return False


def _select(
    events: Iterable[Envelope], project_id: str, conversation_id: str, correlation_id: str | None
) -> list[Envelope]:
    return [
        event
        for event in in_seq_order(events)
        if event.project_id == project_id
        and concerns(event, conversation_id)
        and (correlation_id is None or event.correlation_id == correlation_id)
    ]


def _source(event: Envelope) -> EntrySource:
    return "signal" if facts_of(event.type).signal else "conversation"


def incident_timeline(
    events: Iterable[Envelope],
    project_id: str,
    conversation_id: str,
    limit: object = DEFAULT_LIMIT,
    correlation_id: str | None = None,
) -> IncidentTimeline:
    """Return the conversation's events and signals merged in ``seq`` order.

    ``{project_id, conversation_id, correlation_id, limit, total_entries, entries}``:
    entries are filtered by ``correlation_id`` when given, ``total_entries`` counts them
    all, and only the last ``limit`` (see ``normalize_limit``) are kept. Each entry is
    ``{seq, event_id, at, source: conversation|signal, type, correlation_id, causation_id,
    data}``. The caller reports ``conversation_not_found`` (see ``conversation_exists``).
    """
    kept = normalize_limit(limit)
    selected = _select(events, project_id, conversation_id, correlation_id)
    entries: list[IncidentTimelineEntry] = [
        {
            "seq": event.seq,
            "event_id": event.event_id,
            "at": event.at,
            "source": _source(event),
            "type": event.type,
            "correlation_id": event.correlation_id,
            "causation_id": event.causation_id,
            "data": msgspec.to_builtins(event.data),
        }
        for event in selected[-kept:]
    ]
    return {
        "project_id": project_id,
        "conversation_id": conversation_id,
        "correlation_id": correlation_id,
        "limit": kept,
        "total_entries": len(selected),
        "entries": entries,
    }


# --- the report's parts -----------------------------------------------------------------


def epoch_ms(at: str) -> int | None:
    """Return ``at`` as milliseconds since the epoch, or None when it is not ISO 8601."""
    try:
        moment = datetime.fromisoformat(at)
    except (TypeError, ValueError):
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return (moment - _EPOCH) // _MILLISECOND


def _call_id(data: Mapping[str, object]) -> str | None:
    value = data.get("call_id")
    return value if isinstance(value, str) else None


def _entry(event: Envelope) -> ProblemEntry:
    return {
        "seq": event.seq,
        "event_id": event.event_id,
        "at": event.at,
        "type": event.type,
        "correlation_id": event.correlation_id,
        "call_id": _call_id(event.data),
        "summary": describe_event(event.type, event.data),
        "data": msgspec.to_builtins(event.data),
    }


def _causal_chain(ordered: list[Envelope], origin: int) -> list[CausalNode]:
    """Return the causation forest as a pre-order list of nodes with their depth.

    An event's parent is the event named by its ``causation_id``; events with no cause in
    the selection are roots. ``assistant.delta`` events are left out (their children hang
    from the delta's nearest shown ancestor). Children follow in ``seq`` order, except that
    a model round's ``assistant.message`` comes before the tool calls of the same round
    (it is journaled after them, but it is what the model said when it asked for them).
    Cycles, which a sound journal cannot hold, are broken at their lowest ``seq``.
    """
    parent = cause_indexes(ordered)
    shown = [event.type != "assistant.delta" for event in ordered]
    children: dict[int | None, list[int]] = {}
    for index in range(len(ordered)):
        if not shown[index]:
            continue
        up, steps = parent[index], 0
        while up is not None and not shown[up] and steps <= len(ordered):
            up, steps = parent[up], steps + 1
        if up is not None and not shown[up]:
            up = None
        children.setdefault(up, []).append(index)
    for parent_index, kids in children.items():  # a round's message before its tool calls
        if parent_index is not None:
            kids.sort(key=lambda i: (ordered[i].type != "assistant.message", i))
    nodes: list[CausalNode] = []
    visited: set[int] = set()
    starts = children.get(None, []) + [i for i in range(len(ordered)) if shown[i]]
    for start in starts:
        if start in visited:
            continue
        stack: list[tuple[int, int, int | None]] = [(start, 0, None)]
        while stack:
            index, depth, parent_seq = stack.pop()
            if index in visited:
                continue
            visited.add(index)
            event = ordered[index]
            nodes.append(
                {
                    "seq": event.seq,
                    "event_id": event.event_id,
                    "depth": depth,
                    "parent_seq": parent_seq,
                    "at": event.at,
                    "offset_ms": _offset(event, origin),
                    "type": event.type,
                    "summary": describe_event(event.type, event.data),
                }
            )
            stack.extend(
                (child, depth + 1, event.seq) for child in reversed(children.get(index, []))
            )
    return nodes


def _stats(values: list[int]) -> StageLatency:
    return {
        "count": len(values),
        "min_ms": min(values) if values else None,
        "max_ms": max(values) if values else None,
        "total_ms": sum(values),
    }


def _label(event: Envelope) -> str:
    if event.type in ("llm.started", "user.message"):
        return describe_event(event.type, event.data)
    name, call_id = event.data.get("name"), _call_id(event.data)
    return " ".join(str(part) for part in (name, call_id) if isinstance(part, str))


def _remote_tasks(ordered: list[Envelope]) -> dict[str, str]:
    """The first remote task id each delegated call saw (its ``a2a.task_updated``)."""
    found: dict[str, str] = {}
    for event in ordered:
        if event.type == "a2a.task_updated":
            call_id, task_id = _call_id(event.data), event.data.get("task_id")
            if call_id is not None and isinstance(task_id, str) and task_id:
                found.setdefault(call_id, task_id)
    return found


def _origin(ordered: list[Envelope]) -> int:
    """Return the earliest ``at`` in scope (ms since the epoch): offsets count from it."""
    times = [at for at in (epoch_ms(event.at) for event in ordered) if at is not None]
    return min(times, default=0)


def _offset(event: Envelope, origin: int) -> int | None:
    at = epoch_ms(event.at)
    return None if at is None else at - origin


def _stages(ordered: list[Envelope], origin: int) -> list[StageEntry]:
    """Return every measured stage span in start order (``seq``, then ``LATENCY_STAGES``).

    The spans are ``events.stages``'s. A call's stages are labelled with its request (a
    delegated call's ``tool_call`` also with its remote task); events with no valid ``at``
    are left out. A stage still open at the end of the scope has no end and no latency.
    """
    timed = [event for event in ordered if epoch_ms(event.at) is not None]
    walk = stage_spans(timed)
    requests = {
        span.call_id: _label(timed[span.start])
        for span in walk.spans
        if span.stage == "tool_call" and span.call_id is not None
    }
    remote = _remote_tasks(timed)

    def label(span: StageSpan) -> str:
        opener = timed[span.start]
        if span.call_id is None:
            return _label(opener)
        text = requests.get(span.call_id) or _label(opener)
        task = remote.get(span.call_id) if span.stage == "tool_call" else None
        return text if task is None else f"{text} · remote task {task}"

    rank = {stage: index for index, stage in enumerate(LATENCY_STAGES)}
    spans = sorted(
        (span for span in walk.spans if span.stage in rank),
        key=lambda span: (timed[span.start].seq, rank[span.stage], span.end is None),
    )
    stages: list[StageEntry] = []
    for span in spans:
        start, end = timed[span.start], None if span.end is None else timed[span.end]
        start_at = epoch_ms(start.at) or 0
        end_at = None if end is None else epoch_ms(end.at)
        stages.append(
            {
                "stage": span.stage,
                "label": label(span),
                "correlation_id": start.correlation_id,
                "start_seq": start.seq,
                "end_seq": None if end is None else end.seq,
                "end_type": None if end is None else end.type,
                "offset_ms": start_at - origin,
                "latency_ms": None if end_at is None else end_at - start_at,
            }
        )
    return stages


def _latency(stages: list[StageEntry]) -> dict[str, StageLatency]:
    """Measure each stage kind over its closed spans: count, min, max and total ms."""
    measured: dict[str, list[int]] = {stage: [] for stage in LATENCY_STAGES}
    for stage in stages:
        if stage["latency_ms"] is not None:
            measured[stage["stage"]].append(stage["latency_ms"])
    return {stage: _stats(values) for stage, values in measured.items()}


def _tool_calls(ordered: list[Envelope]) -> list[ToolCallEntry]:
    """Return each requested call with its decision, outcome, reason code and latency.

    ``latency_ms`` runs from ``tool.requested`` to the call's end (the decision, the wait
    for a runner, the run, the result's checks); ``run_ms`` is the run alone, the
    ``duration_ms`` the runner reported (None when the call never ran).
    """
    calls: dict[str, ToolCallEntry] = {}
    request_at: dict[str, int | None] = {}
    request_of_event: dict[str, str] = {}
    for event in ordered:
        call_id = _call_id(event.data)
        if event.type in DECISION_TYPES and call_id is None and event.causation_id is not None:
            call_id = request_of_event.get(event.causation_id)
        if call_id is None:
            continue
        call = calls.get(call_id)
        if event.type not in _CALL_READS:
            continue
        payload = decode_data(event.type, event.data)
        if call is None:
            if isinstance(payload, ev.ToolRequested):
                calls[call_id] = {
                    "call_id": call_id,
                    "name": payload.name,
                    "requested_seq": event.seq,
                    "decision": None,
                    "outcome": "pending",
                    "code": None,
                    "latency_ms": None,
                    "run_ms": None,
                    "remote_task_id": None,
                }
                request_at[call_id] = epoch_ms(event.at)
                request_of_event[event.event_id] = call_id
            continue
        match payload:
            case ev.A2aTaskUpdated(task_id=task_id) if task_id:
                call["remote_task_id"] = call["remote_task_id"] or task_id
            case ev.ToolApprovalRequested() | ev.PolicyAllowed() | ev.PolicyDenied():
                if call["decision"] is None:
                    call["decision"] = DECISION_TYPES[event.type]
            case ev.ToolCompleted() | ev.ToolFailed() | ev.ToolCancelled() as terminal:
                if call["outcome"] != "pending":
                    continue
                call["outcome"] = event.type.removeprefix("tool.")
                match terminal:
                    case ev.ToolCompleted(duration_ms=ran):
                        call["run_ms"] = ran
                    case ev.ToolFailed(reason=reason, duration_ms=ran):
                        call["code"] = reason.get("code")
                        call["run_ms"] = ran or None
                    case ev.ToolCancelled(reason=reason):
                        call["code"] = reason if reason is not None else "conversation_cancelled"
                end, start = epoch_ms(event.at), request_at[call_id]
                call["latency_ms"] = end - start if end is not None and start is not None else None
    return list(calls.values())


def _sections(ordered: list[Envelope]) -> dict[Section, list[ProblemEntry]]:
    """Each problem list: the events whose type declares it (``facts.section``), in order.

    An event whose type says so (``facts.timeout_when``, an ``llm.failed`` of reason
    ``timeout``) is listed under ``timeouts`` too.
    """
    found: dict[Section, list[ProblemEntry]] = {key: [] for key in SECTIONS}
    for event in ordered:
        facts = facts_of(event.type)
        if facts.section is not None:
            found[facts.section].append(_entry(event))
        if facts.timeout_when is not None:
            payload = decode_data(event.type, event.data)
            if payload is not None and facts.timeout_when(payload):
                found["timeouts"].append(_entry(event))
    return found


def _changes(ordered: list[Envelope]) -> list[ChangeRun]:
    """Each ``tool.changes`` in scope: what one run changed and what was quarantined."""
    found: list[ChangeRun] = []
    for event in ordered:
        if event.type != "tool.changes":
            continue
        payload = decode_data(event.type, event.data)
        if not isinstance(payload, ev.ToolChanges):
            continue
        fields: ToolChangesData = msgspec.to_builtins(payload)
        found.append({"seq": event.seq, "at": event.at, **fields})
    return found


def _first_error(event: Envelope) -> FirstError:
    return {**_entry(event), "kind": ERROR_KINDS[event.type]}


def incident_report(
    events: Iterable[Envelope],
    project_id: str,
    conversation_id: str,
    correlation_id: str | None = None,
) -> IncidentReport:
    """Return the incident report of a conversation (or of one correlation in it), as JSON.

    Sections: ``summary`` (status ``empty|error|cancelled|in_progress|ok``, the
    conversation's status, counts, the seq span), ``asked`` (each ``user.message``),
    ``causal_chain`` (the causation tree as a pre-order list with depths), ``tool_calls``,
    ``denials``, ``failures``, ``timeouts``, ``cancellations``, ``security_signals``,
    ``actor_events``, ``project_problems`` (the project's own problems that bear on the
    selected events: recorded during them, or before them and unresolved at their start,
    see ``events.project_history``; those already in the selection are not repeated),
    ``model_retries`` (each ``llm.retried`` and ``llm.breaker_changed``: what the model
    calls met on the way, a turn that then succeeded included), ``changes`` (each
    ``tool.changes``: what a run changed in the root and what was quarantined),
    ``latency`` (count/min/max/total ms per stage), ``first_error`` and
    ``counts_by_type``.
    """
    everything = in_seq_order(events)
    conversation = [
        event
        for event in everything
        if event.project_id == project_id and concerns(event, conversation_id)
    ]
    selected = [
        event
        for event in conversation
        if correlation_id is None or event.correlation_id == correlation_id
    ]
    orchestration = orchestration_enabled(everything)
    first_error = next((event for event in selected if event.type in ERROR_KINDS), None)
    counts: dict[str, int] = {}
    for event in selected:
        counts[event.type] = counts.get(event.type, 0) + 1
    tool_calls = _tool_calls(selected)
    origin = _origin(selected)
    stages = _stages(selected, origin)
    sections = _sections(selected)
    shown = {event.seq for event in selected}
    project: list[ProjectProblem] = [
        {
            **problem,
            "summary": problem["summary"]
            + (
                f" (resolved at seq {problem['resolved_seq']})"
                if problem["resolved"]
                else " (unresolved)"
            ),
        }
        for problem in problems_during(
            project_problems(everything, project_id),
            selected[0].seq if selected else None,
            selected[-1].seq if selected else None,
        )
        if problem["seq"] not in shown
    ]
    status: ReportStatus
    if not selected:
        status = "empty"
    elif first_error is not None:
        status = "error"
    elif sections["cancellations"]:
        status = "cancelled"
    elif fold_status(selected, orchestration=orchestration) != "idle":
        status = "in_progress"
    else:
        status = "ok"
    return {
        "project_id": project_id,
        "conversation_id": conversation_id,
        "correlation_id": correlation_id,
        "summary": {
            "status": status,
            "conversation_status": fold_status(conversation, orchestration=orchestration),
            "event_count": len(selected),
            "first_seq": selected[0].seq if selected else None,
            "last_seq": selected[-1].seq if selected else None,
            "turn_count": counts.get("user.message", 0),
            "tool_call_count": len(tool_calls),
        },
        "asked": [
            {
                "seq": event.seq,
                "at": event.at,
                "correlation_id": event.correlation_id,
                "content": event.data.get("content", ""),
            }
            for event in selected
            if event.type == "user.message"
        ],
        "causal_chain": _causal_chain(selected, origin),
        "tool_calls": tool_calls,
        "denials": sections["denials"],
        "failures": sections["failures"],
        "timeouts": sections["timeouts"],
        "cancellations": sections["cancellations"],
        "security_signals": sections["security_signals"],
        "actor_events": sections["actor_events"],
        "project_problems": project,
        "model_retries": sections["model_retries"],
        "changes": _changes(selected),
        "stages": stages,
        "latency": _latency(stages),
        "first_error": None if first_error is None else _first_error(first_error),
        "counts_by_type": dict(sorted(counts.items())),
    }
