"""The JSON shapes the views return: projections, incident timeline and report, history.

Each is a ``TypedDict``: a type only, so at run time the value is the plain dict it always
was and ``canonical_json`` gives the same bytes. ``docs/projections.md`` describes each
shape under the name it has here. ``data`` is an event's payload as it was journaled (a
type the catalog does not know keeps every field), so it stays an open JSON object.
"""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict

from events.facts import Decision, ErrorKind, Stage

__all__ = [
    "AskedEntry",
    "CausalNode",
    "ChangeRun",
    "ChangedPath",
    "Diagnostics",
    "EntrySource",
    "FirstError",
    "HistoryEntry",
    "IncidentReport",
    "IncidentTimeline",
    "IncidentTimelineEntry",
    "JournalProject",
    "PendingToolCall",
    "ProblemEntry",
    "ProblemHistoryEntry",
    "ProjectDecision",
    "ProjectEvents",
    "ProjectHistory",
    "ProjectProblem",
    "ProjectView",
    "QuarantinedPath",
    "ReportStatus",
    "ReportSummary",
    "StageEntry",
    "StageLatency",
    "TimelineEvent",
    "TimelinePage",
    "ToolCallEntry",
    "ToolChangesData",
]


# --- conversation projections -----------------------------------------------------------


class TimelineEvent(TypedDict):
    """One ``timeline`` entry: the whole committed envelope."""

    seq: int
    stream_version: int
    event_id: str
    type: str
    at: str
    project_id: str
    conversation_id: str | None
    correlation_id: str
    causation_id: str | None
    data: dict[str, object]
    hash: str
    prev_hash: str


class PendingToolCall(TypedDict):
    """One ``pending_tool_calls`` entry; ``name``, ``args`` and ``run_mode`` as requested."""

    call_id: str
    name: object
    args: object
    run_mode: object
    status: Literal["awaiting_approval", "running"]
    requested_seq: int


class Diagnostics(TypedDict):
    """The ``diagnostics`` projection."""

    event_count: int
    pending_tool_call_count: int
    last_event_type: str | None
    status: str


# --- the project ------------------------------------------------------------------------


class ProjectDecision(TypedDict):
    """One of a project view's ``recent_decisions``."""

    at: str
    project_id: str
    conversation_id: str | None
    correlation_id: str
    tool: str | None
    decision: Decision
    reason: str
    source: str


class ProjectView(TypedDict):
    """``project_view``: a project's state for its diagnostics."""

    project_id: str | None
    root: str | None
    options: dict[str, object]
    sandbox_layers: dict[str, object]
    status: Literal["running", "stopped"]
    conversations: list[str]
    started_at: str | None
    signal_counts: dict[str, int]
    recent_decisions: list[ProjectDecision]


class HistoryEntry(TypedDict):
    """One ``project_history`` entry; ``problem``: the kind it records, or None."""

    seq: int
    event_id: str
    at: str
    type: str
    correlation_id: str
    causation_id: str | None
    summary: str
    problem: str | None
    data: dict[str, object]


class ProjectHistory(TypedDict):
    """``project_history``: the last ``limit`` of the project's own events."""

    project_id: str
    limit: int
    total_entries: int
    entries: list[HistoryEntry]


class ProblemHistoryEntry(TypedDict):
    """One ``project_events`` entry with ``problems_only``: a problem, as a history entry."""

    seq: int
    event_id: str
    at: str
    type: str
    correlation_id: str
    summary: str
    resolved: bool
    data: dict[str, object]
    problem: str


class ProjectEvents(TypedDict):
    """``project_events``: the project's history (or its problems) and how many are open."""

    project_id: str
    limit: int
    total_entries: int
    entries: list[HistoryEntry] | list[ProblemHistoryEntry]
    unresolved_problems: int


class JournalProject(TypedDict):
    """A project as its lifecycle events in the journal tell it (``project list --all``)."""

    project_id: str
    state: str
    root: str | None
    conversation_count: int
    started_at: str | None
    stopped_at: str | None
    reason: str | None


class ProjectProblem(TypedDict):
    """One of ``project_problems``: what went wrong, and whether a later event ended it."""

    seq: int
    event_id: str
    at: str
    type: str
    correlation_id: str
    kind: str
    subject: str
    summary: str
    resolved: bool
    resolved_seq: int | None
    data: dict[str, object]


# --- incident timeline ------------------------------------------------------------------


EntrySource = Literal["conversation", "signal"]
"""Where an incident timeline entry comes from: the conversation's events or a signal."""


class IncidentTimelineEntry(TypedDict):
    """One ``incident_timeline`` entry."""

    seq: int
    event_id: str
    at: str
    source: EntrySource
    type: str
    correlation_id: str
    causation_id: str | None
    data: dict[str, object]


class IncidentTimeline(TypedDict):
    """``incident_timeline``: the last ``limit`` entries, of ``total_entries``."""

    project_id: str
    conversation_id: str
    correlation_id: str | None
    limit: int
    total_entries: int
    entries: list[IncidentTimelineEntry]


class TimelinePage(IncidentTimeline):
    """One page of the timeline, read through the journal's index, with its cursors."""

    after_seq: int | None
    before_seq: int | None


# --- incident report --------------------------------------------------------------------


ReportStatus = Literal["empty", "error", "cancelled", "in_progress", "ok"]
"""The summary's ``status``: what the events in scope came to."""


class ReportSummary(TypedDict):
    """The report's ``summary``."""

    status: ReportStatus
    conversation_status: str
    event_count: int
    first_seq: int | None
    last_seq: int | None
    turn_count: int
    tool_call_count: int


class AskedEntry(TypedDict):
    """One of the report's ``asked``: a ``user.message``."""

    seq: int
    at: str
    correlation_id: str
    content: object


class CausalNode(TypedDict):
    """One node of the report's ``causal_chain`` (a pre-order list)."""

    seq: int
    event_id: str
    depth: int
    parent_seq: int | None
    at: str
    offset_ms: int | None
    type: str
    summary: str


class ToolCallEntry(TypedDict):
    """One of the report's ``tool_calls``."""

    call_id: str
    name: str
    requested_seq: int
    decision: Decision | None
    outcome: str
    code: object
    latency_ms: int | None
    run_ms: int | None
    remote_task_id: str | None


class ProblemEntry(TypedDict):
    """One entry of a report's problem list (``denials``, ``failures``, ...)."""

    seq: int
    event_id: str
    at: str
    type: str
    correlation_id: str
    call_id: str | None
    summary: str
    data: dict[str, object]


class FirstError(ProblemEntry):
    """The report's ``first_error``: a problem entry and its kind."""

    kind: ErrorKind


class StageEntry(TypedDict):
    """One of the report's ``stages``; the end fields are None while the stage is open."""

    stage: Stage
    label: str
    correlation_id: str
    start_seq: int
    end_seq: int | None
    end_type: str | None
    offset_ms: int
    latency_ms: int | None


class StageLatency(TypedDict):
    """One stage's ``latency``: over its closed spans (min/max None when there are none)."""

    count: int
    min_ms: int | None
    max_ms: int | None
    total_ms: int


class ChangedPath(TypedDict):
    """An entry a run created, modified or deleted (the defaults a writer left out absent)."""

    path: str
    kind: NotRequired[str]
    size: NotRequired[int | None]
    sha256: NotRequired[str | None]
    target: NotRequired[str | None]
    outside_root: NotRequired[bool]


class QuarantinedPath(TypedDict):
    """An entry the review took out of the root (``error``: it could not, it is still in)."""

    path: str
    reason: str
    kind: str
    moved_to: NotRequired[str | None]
    error: NotRequired[str | None]


class ToolChangesData(TypedDict):
    """A ``tool.changes`` payload as built-ins (its ``type`` tag included)."""

    type: str
    call_id: str
    tool: str
    method: str
    detail: str
    created: list[ChangedPath]
    modified: list[ChangedPath]
    deleted: list[ChangedPath]
    created_count: int
    modified_count: int
    deleted_count: int
    quarantined: list[QuarantinedPath]
    recovered: bool
    conversation_id: str | None


class ChangeRun(ToolChangesData):
    """One of the report's ``changes``: where the ``tool.changes`` is, and what it says."""

    seq: int
    at: str


class IncidentReport(TypedDict):
    """``incident_report``: the JSON form both renderings read."""

    project_id: str
    conversation_id: str
    correlation_id: str | None
    summary: ReportSummary
    asked: list[AskedEntry]
    causal_chain: list[CausalNode]
    tool_calls: list[ToolCallEntry]
    denials: list[ProblemEntry]
    failures: list[ProblemEntry]
    timeouts: list[ProblemEntry]
    cancellations: list[ProblemEntry]
    security_signals: list[ProblemEntry]
    actor_events: list[ProblemEntry]
    project_problems: list[ProjectProblem]
    model_retries: list[ProblemEntry]
    changes: list[ChangeRun]
    stages: list[StageEntry]
    latency: dict[str, StageLatency]
    first_error: FirstError | None
    counts_by_type: dict[str, int]
