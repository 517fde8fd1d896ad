"""Queries of one conversation that read what they return: timeline, report, its events.

:mod:`events.incidents` folds a conversation's story from events; these functions choose
which events to give it, through the journal's indexes (:mod:`runtime.journal.scope`), so
a query's cost follows the conversation (or the page asked for), not the project's history:

- a conversation's own events: by ``(project, conversation, seq)``;
- the project-level events its incident views take in (``actor.*`` about its actor or the
  actors it depends on, the review of a call a stop cut; see
  :func:`events.incidents.concerns`): the project-level events of those types only;
- its correlation's: by ``(project, correlation, seq)``;
- a page: ``limit`` and the ``after_seq``/``before_seq`` cursor go into the ``SELECT``.

The results are those of the pure functions over the whole project's events (the tests
compare both), with one addition: a timeline page.
"""

from __future__ import annotations

from typing import Final

from events.envelope import Envelope
from events.incidents import (
    PROJECT_LEVEL_READS,
    concerns,
    incident_report,
    incident_timeline,
    normalize_limit,
)
from events.project_history import PROBLEM_READS
from events.view_types import IncidentReport, TimelinePage
from runtime.errors import BadRequestError, ConversationNotFoundError, ProjectNotFoundError
from runtime.journal.scope import Scope
from runtime.journal.store import Journal

__all__ = [
    "check_conversation",
    "conversation_events",
    "conversation_report",
    "conversation_timeline",
    "shared_events",
]

_STARTED: Final = ("conversation.started",)
_PROJECT_READS: Final = tuple(sorted(PROBLEM_READS))


def check_conversation(journal: Journal, project_id: str, conversation_id: str) -> None:
    """Raise ``project_not_found`` or ``conversation_not_found`` unless both exist.

    A conversation exists once its ``conversation.started`` is committed.
    """
    if not journal.has_project(project_id):
        raise ProjectNotFoundError(
            f"no project {project_id!r} in the journal", project_id=project_id
        )
    started = Scope(conversation_id=conversation_id, topics=_STARTED)
    if not journal.read_scope(project_id, started, limit=1):
        raise ConversationNotFoundError(
            f"no conversation {conversation_id!r} in project {project_id!r}",
            project_id=project_id,
            conversation_id=conversation_id,
        )


def shared_events(
    journal: Journal, project_id: str, conversation_id: str, correlation_id: str | None = None
) -> list[Envelope]:
    """The project-level events that belong to the conversation's incident views."""
    scope = Scope(
        conversation_id=None,
        correlation_id=correlation_id,
        topics=tuple(sorted(PROJECT_LEVEL_READS)),
    )
    return [e for e in journal.read_scope(project_id, scope) if concerns(e, conversation_id)]


def conversation_events(
    journal: Journal,
    project_id: str,
    conversation_id: str,
    *,
    correlation_id: str | None = None,
    limit: int | None = None,
    after_seq: int | None = None,
    before_seq: int | None = None,
) -> list[Envelope]:
    """The events of the conversation's incident views (its own and the project-level ones).

    In ``seq`` order; only those of ``correlation_id`` when given, and only those between
    the cursors. With ``limit``, a page: the first ``limit`` after ``after_seq`` when it is
    given, otherwise the last ``limit`` (before ``before_seq`` when given).
    """
    if after_seq is not None and before_seq is not None and before_seq <= after_seq:
        raise BadRequestError(
            f"before_seq ({before_seq}) must be greater than after_seq ({after_seq}): "
            "no seq lies between them; widen the window",
            reason="empty_seq_window",
            after_seq=after_seq,
            before_seq=before_seq,
        )
    forward = after_seq is not None
    low = after_seq or 0
    own = Scope(
        conversation_id=conversation_id,
        correlation_id=correlation_id,
        after_seq=low,
        before_seq=before_seq,
    )
    events = journal.read_scope(project_id, own, limit=limit, newest=not forward)
    events += [
        e
        for e in shared_events(journal, project_id, conversation_id, correlation_id)
        if e.seq > low and (before_seq is None or e.seq < before_seq)
    ]
    events.sort(key=lambda e: e.seq)
    if limit is None:
        return events
    return events[:limit] if forward else events[-limit:]


def _own_total(
    journal: Journal, project_id: str, conversation_id: str, correlation_id: str | None
) -> int:
    """How many of the conversation's own events (of ``correlation_id``) there are.

    Without a correlation: the stream version of its last event, which counts them.
    """
    if correlation_id is not None:
        scope = Scope(conversation_id=conversation_id, correlation_id=correlation_id)
        return journal.count_scope(project_id, scope)
    last = journal.read_scope(
        project_id, Scope(conversation_id=conversation_id), limit=1, newest=True
    )
    return last[0].stream_version if last else 0


def conversation_timeline(
    journal: Journal,
    project_id: str,
    conversation_id: str,
    *,
    limit: object = 100,
    correlation_id: str | None = None,
    after_seq: int | None = None,
    before_seq: int | None = None,
) -> TimelinePage:
    """The conversation's incident timeline (:func:`events.incidents.incident_timeline`).

    ``total_entries`` counts every entry of the conversation (of ``correlation_id``), the
    cursors aside; ``entries`` is the page (see :func:`conversation_events`), and
    ``after_seq``/``before_seq`` echo the cursors.
    """
    check_conversation(journal, project_id, conversation_id)
    kept = normalize_limit(limit)
    page = conversation_events(
        journal,
        project_id,
        conversation_id,
        correlation_id=correlation_id,
        limit=kept,
        after_seq=after_seq,
        before_seq=before_seq,
    )
    result = incident_timeline(page, project_id, conversation_id, kept, correlation_id)
    shared = shared_events(journal, project_id, conversation_id, correlation_id)
    own = _own_total(journal, project_id, conversation_id, correlation_id)
    return {
        **result,
        "total_entries": own + len(shared),
        "after_seq": after_seq,
        "before_seq": before_seq,
    }


def conversation_report(
    journal: Journal, project_id: str, conversation_id: str, correlation_id: str | None = None
) -> IncidentReport:
    """The conversation's incident report (:func:`events.incidents.incident_report`).

    It reads the conversation's events and the project-level events that record or resolve
    the project's problems (``events.project_history.PROBLEM_READS``; ``project.started``
    among them, which says whether the model loop runs), not the rest of the project.
    """
    check_conversation(journal, project_id, conversation_id)
    events = conversation_events(journal, project_id, conversation_id)
    seen = {e.seq for e in events}
    project_level = Scope(conversation_id=None, topics=_PROJECT_READS)
    events += [e for e in journal.read_scope(project_id, project_level) if e.seq not in seen]
    events.sort(key=lambda e: e.seq)
    return incident_report(events, project_id, conversation_id, correlation_id)
