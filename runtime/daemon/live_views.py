"""The daemon's views of projects that join the journal with what the live actors answer.

``list_projects``, ``project list --all``, ``diagnostics`` and ``status``'s live
conversation counts: each reads the journal in the daemon process and asks a running
project's host for what only it knows (its health, its live conversations). ``ask`` is the
backend's way down the actor tree; ``live`` is the Supervisor's answer to ``list_projects``
(project → its state).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypedDict

from events.project_history import RECENT_PROBLEMS_LIMIT, project_problems, unresolved
from events.project_view import project_view
from runtime.client.replies import Health, ProjectDiagnostics, ProjectSummary
from runtime.errors import ProjectNotFoundError, RoostError
from runtime.journal import views as journal_views
from runtime.journal.store import Journal
from runtime.wire.op_args import ProjectArgs
from runtime.wire.ops import Call

__all__ = [
    "Ask",
    "LiveProject",
    "all_projects",
    "diagnostics",
    "live_conversation_counts",
    "live_status",
    "project_events",
    "running_projects",
]

Ask = Callable[[Call[Any], float], Any]
"""Send a request down the actor tree and wait (until the deadline) for its result."""


class LiveProject(TypedDict, total=False):
    """A project the Supervisor holds (its answer to ``list_projects``): running or failed."""

    status: str
    root: str
    started_at: str
    reason: str


def live_status(project_id: str) -> Call[ProjectArgs]:
    """The daemon's own ``live_status`` request for a running project."""
    return Call(op="live_status", args=ProjectArgs(project_id=project_id))


def project_events(journal: Journal, project_id: str) -> list[Any]:
    """The project's whole history; ``project_not_found`` when the journal has none."""
    events = journal.read_project(project_id)
    if not events:
        raise ProjectNotFoundError(
            f"no project {project_id!r} in the journal", project_id=project_id
        )
    return events


def _running_ids(live: dict[str, LiveProject]) -> list[str]:
    """The projects the Supervisor runs now (not the failed ones), sorted."""
    return sorted(
        project_id for project_id, info in live.items() if info.get("status") == "running"
    )


def live_conversation_counts(
    live: dict[str, LiveProject], ask: Ask, deadline: float
) -> dict[str, int]:
    """Each running project's live (not passivated) conversations, asked of its host.

    A cheap read for ``status`` (no journal read), which the soak harness polls to wait
    for passivation.
    """
    counts: dict[str, int] = {}
    for project_id in _running_ids(live):
        try:
            status = ask(live_status(project_id), deadline)
        except RoostError:
            continue  # restarting or stopping: nothing to count now
        counts[project_id] = len(status.get("active_conversations", []))
    return counts


def running_projects(
    journal: Journal, live: dict[str, LiveProject], ask: Ask, deadline: float
) -> list[ProjectSummary]:
    """The running projects; each one's conversations are counted by its host.

    The host folds them from the same events (``conversation.started`` /
    ``conversation.stopped``) the journal's project view does; asking it costs one
    request, where reading the project back cost its whole history. A host that does
    not answer (restarting) is counted from the journal.
    """
    out: list[ProjectSummary] = []
    for project_id in _running_ids(live):
        info = live[project_id]
        try:
            status = ask(live_status(project_id), deadline)
            count = len(status.get("conversations", []))
        except RoostError:
            view = project_view(journal.read_project(project_id))
            count = len(view.get("conversations", []))
        out.append(
            {
                "project_id": project_id,
                "root": info.get("root"),
                "conversation_count": count,
                "started_at": info.get("started_at"),
            }
        )
    return out


def all_projects(
    journal: Journal, live: dict[str, LiveProject], running: list[ProjectSummary]
) -> list[ProjectSummary]:
    """Every project the journal knows, with its state (``project list --all``)."""
    by_id = {p["project_id"]: p for p in running}
    out: list[ProjectSummary] = []
    for known in journal_views.journal_projects(journal):
        project_id = known["project_id"]
        info = live.get(project_id) or {}
        if project_id in by_id:
            out.append({**known, **by_id[project_id], "state": "running"})
        elif info.get("status") == "failed":
            out.append({**known, "state": "failed", "reason": info.get("reason")})
        else:
            out.append({**known, "state": "stopped"})
    return out


def diagnostics(
    journal: Journal, project_id: str, live: dict[str, LiveProject], ask: Ask, deadline: float
) -> ProjectDiagnostics:
    """The project's health, options, decisions and problems (``diagnostics``)."""
    state = live.get(project_id)
    events = project_events(journal, project_id)
    view = project_view(events)
    health: Health = {"status": "stopped"}
    active: list[str] = []
    pids: dict[str, int] = {}
    if state is not None and state.get("status") == "running":
        status = ask(live_status(project_id), deadline)
        health = status.get("health", {"status": "ok"})
        active = status.get("active_conversations", [])
        pids = status.get("pids", {})
    elif state is not None:
        health = {"status": "failed", "reason": state.get("reason")}
    problems = project_problems(events, project_id)
    open_problems = unresolved(problems)
    if health.get("status") == "ok" and open_problems:
        health = {
            "status": "degraded",
            "reason": open_problems[0]["summary"],
            "unresolved_problems": len(open_problems),
        }
    return {
        "project_id": project_id,
        "root": view.get("root"),
        "options": view.get("options"),
        "health": health,
        "sandbox_layers": view.get("sandbox_layers", {}),
        "recent_decisions": view.get("recent_decisions", []),
        "signal_counts": view.get("signal_counts", {}),
        "conversations": view.get("conversations", []),
        "active_conversations": active,
        "actors": pids,
        "recent_problems": [
            {
                "seq": p["seq"],
                "at": p["at"],
                "kind": p["kind"],
                "summary": p["summary"],
                "resolved": p["resolved"],
            }
            for p in problems[-RECENT_PROBLEMS_LIMIT:]
        ],
    }
