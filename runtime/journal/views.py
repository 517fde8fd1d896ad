"""Views of the journal that need no actor: what the daemon and an offline ``roost`` share.

The incident timeline and report, a project's own history and the list of every project
the journal knows are pure functions of committed events (``events.incidents``,
``events.project_history``). The daemon serves them from its read connection; ``roost
timeline``, ``incident``, ``project events`` and ``project list --all`` compute them here
from the journal itself when no daemon answers (SQLite is read beside a running writer;
PostgreSQL likewise). Missing ids raise ``project_not_found`` / ``conversation_not_found``
as the daemon does.
"""

from __future__ import annotations

from typing import Final

from events import catalog as ev
from events.catalog import decode_data
from events.envelope import Envelope
from events.incident_html import render_incident_html
from events.project_history import project_history, project_problems, unresolved
from events.report import render_incident_markdown
from events.view_types import (
    IncidentReport,
    JournalProject,
    ProblemHistoryEntry,
    ProjectEvents,
    TimelinePage,
)
from runtime.errors import ProjectNotFoundError
from runtime.journal.queries import conversation_report, conversation_timeline
from runtime.journal.store import Journal
from runtime.wire.op_args import ProjectEventsArgs, ReportArgs, TimelineArgs

__all__ = [
    "LIFECYCLE_TYPES",
    "journal_projects",
    "project_events",
    "project_events_view",
    "report_view",
    "timeline_view",
]

LIFECYCLE_TYPES: Final = (
    "project.started",
    "project.stopped",
    "conversation.started",
    "conversation.stopped",
)
"""The event types ``journal_projects`` reads: enough to list every project."""


def project_events(journal: Journal, project_id: str) -> list[Envelope]:
    """Every event of the project; ``project_not_found`` when the journal has none."""
    events = journal.read_project(project_id)
    if not events:
        raise ProjectNotFoundError(
            f"no project {project_id!r} in the journal", project_id=project_id
        )
    return events


def timeline_view(journal: Journal, args: TimelineArgs) -> TimelinePage:
    """``incident_timeline`` with the op's arguments: one page, read through the index."""
    return conversation_timeline(
        journal,
        args.project_id,
        args.conversation_id,
        limit=args.limit,
        correlation_id=args.correlation_id,
        after_seq=args.after_seq,
        before_seq=args.before_seq,
    )


_RENDERERS = {"md": render_incident_markdown, "html": render_incident_html}
"""``incident_report``'s formats other than ``json`` (the report itself)."""


def report_view(journal: Journal, args: ReportArgs) -> IncidentReport | str:
    """``incident_report`` with the op's arguments: JSON, Markdown or the HTML page."""
    report = conversation_report(
        journal, args.project_id, args.conversation_id, args.correlation_id
    )
    render = _RENDERERS.get(args.format)
    return render(report) if render is not None else report


def project_events_view(journal: Journal, args: ProjectEventsArgs) -> ProjectEvents:
    """``project_events``: the project's own history and its unresolved problems.

    ``{project_id, limit, total_entries, entries, problems, unresolved_problems}``, with
    ``problems_only`` keeping only the entries that record a problem.
    """
    project_id, limit = args.project_id, args.limit
    events = project_events(journal, project_id)
    problems = project_problems(events, project_id)
    unresolved_count = len(unresolved(problems))
    if args.problems_only:
        kept = problems[-limit:]
        entries: list[ProblemHistoryEntry] = [
            {
                "seq": p["seq"],
                "event_id": p["event_id"],
                "at": p["at"],
                "type": p["type"],
                "correlation_id": p["correlation_id"],
                "summary": p["summary"],
                "resolved": p["resolved"],
                "data": p["data"],
                "problem": p["kind"],
            }
            for p in kept
        ]
        return {
            "project_id": project_id,
            "limit": limit,
            "total_entries": len(problems),
            "entries": entries,
            "unresolved_problems": unresolved_count,
        }
    return {**project_history(events, project_id, limit), "unresolved_problems": unresolved_count}


def journal_projects(journal: Journal) -> list[JournalProject]:
    """Every project the journal knows, from its lifecycle events, sorted by id.

    Each is ``{project_id, state, root, conversation_count, started_at, stopped_at,
    reason}``: ``state`` is ``running`` after its last ``project.started`` and ``stopped``
    after a ``project.stopped`` (``reason`` says why); the daemon knows better which ones
    run now.
    """
    projects: dict[str, JournalProject] = {}
    conversations: dict[str, set[str]] = {}
    for event in journal.read_types(LIFECYCLE_TYPES):
        entry = projects.setdefault(
            event.project_id,
            {
                "project_id": event.project_id,
                "state": "stopped",
                "root": None,
                "conversation_count": 0,
                "started_at": None,
                "stopped_at": None,
                "reason": None,
            },
        )
        open_ = conversations.setdefault(event.project_id, set())
        match decode_data(event.type, event.data):
            case ev.ProjectStarted(root=root):
                entry["state"], entry["root"], entry["started_at"] = "running", root, event.at
                entry["reason"] = entry["stopped_at"] = None
            case ev.ProjectStopped(reason=reason):
                entry["state"], entry["stopped_at"], entry["reason"] = "stopped", event.at, reason
            case ev.ConversationStarted() if event.conversation_id is not None:
                open_.add(event.conversation_id)
            case ev.ConversationStopped() if event.conversation_id is not None:
                open_.discard(event.conversation_id)
        entry["conversation_count"] = len(open_)
    return [projects[key] for key in sorted(projects)]
