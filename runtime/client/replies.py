"""The JSON shapes of the daemon's answers that only the client reads (``status``, acks, ...).

Each is a ``TypedDict``: a type only, the value is the plain dict the wire decoded. The
views the daemon computes from events (timeline, incident report, project history) have
their shapes in ``events.view_types``; the client names them from there. An open part
(settings, a tool's result, a mismatch's own fields) stays ``dict[str, object]``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NotRequired, TypedDict

if TYPE_CHECKING:  # types only: the client does not load the events package
    from events.deletion import DeletionSummary
    from events.seal import SealProblem
    from events.view_types import ProjectDecision

__all__ = [
    "DaemonStatus",
    "DeletedProject",
    "Health",
    "Pong",
    "ProjectDescription",
    "ProjectDiagnostics",
    "ProjectSummary",
    "ProtocolCheck",
    "RecentProblem",
    "SealSummary",
    "ShutdownAck",
    "VerifyReport",
]


class Pong(TypedDict):
    """``ping``'s answer."""

    pong: bool
    pid: int


class ShutdownAck(TypedDict):
    """``shutdown``'s answer, sent before the daemon exits."""

    stopping: bool
    pid: int


class DaemonStatus(TypedDict):
    """``status``: the gateway's fields, then the backend's (or ``backend_error``)."""

    pid: int
    home: str
    uptime_s: float
    version: str
    journal: str
    config_file: str | None
    settings: dict[str, object]
    socket: str
    log: str
    connections: int
    inflight: int
    projects: int | None
    actor_system: NotRequired[str]
    actors: NotRequired[dict[str, int]]
    admin_pid: NotRequired[int | None]
    telemetry: NotRequired[dict[str, object]]
    endpoints: NotRequired[dict[str, int]]
    host_links: NotRequired[dict[str, int]]
    counters: NotRequired[dict[str, int]]
    live_conversations: NotRequired[dict[str, int]]
    backend_error: NotRequired[str]


class DeletedProject(TypedDict):
    """``delete_project``'s answer."""

    project_id: str
    deleted_events: int
    deletion_seq: int
    deleted_at: str
    deleted_by: str


class ProjectSummary(TypedDict):
    """One of ``list_projects`` (with ``all``: its ``state``, ``stopped_at``, ``reason`` too)."""

    project_id: str
    root: str | None
    conversation_count: int
    started_at: str | None
    state: NotRequired[str]
    stopped_at: NotRequired[str | None]
    reason: NotRequired[str | None]


class Health(TypedDict):
    """A project's ``health``: ``ok``, ``degraded``, ``failed`` or ``stopped``, and why."""

    status: str
    reason: NotRequired[str | None]
    unresolved_problems: NotRequired[int]
    problems: NotRequired[dict[str, dict[str, object]]]


class RecentProblem(TypedDict):
    """One of the diagnostics' ``recent_problems``."""

    seq: int
    at: str
    kind: str
    summary: str
    resolved: bool


class ProjectDiagnostics(TypedDict):
    """``diagnostics``: a project's health, options, decisions and problems."""

    project_id: str
    root: str | None
    options: dict[str, object] | None
    health: Health
    sandbox_layers: dict[str, object]
    recent_decisions: list[ProjectDecision]
    signal_counts: dict[str, int]
    conversations: list[str]
    active_conversations: list[str]
    actors: dict[str, int]
    recent_problems: list[RecentProblem]


class ProjectDescription(TypedDict):
    """``describe_project``: the first paragraph of the project's README, or nulls."""

    project_id: str
    description: str | None
    source: str | None


class ProtocolCheck(TypedDict):
    """``check_protocol``: whether the project lets ``protocol`` serve it."""

    protocol: str
    allowed: bool


class SealSummary(TypedDict):
    """``verify``'s ``seal``: the anchor and the checkpoints that seal the chain."""

    anchor: str
    checkpoints: int
    sealed_through: int
    sealed_seq: int | None
    sealed_at: str | None
    unsealed_events: int


class VerifyReport(TypedDict):
    """``verify``: the hash chain, the snapshots, the live projections and the seals."""

    ok: bool
    checked_events: int
    chain_ok: bool
    mismatches: list[dict[str, object]]
    conversations_compared: list[str]
    snapshots: dict[str, int]
    anchor_ok: bool
    anchor_problems: list[SealProblem]
    deletions: list[DeletionSummary]
    seal: SealSummary | None
