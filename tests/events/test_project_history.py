"""Tests for events.project_history: a project's own history and its problems."""

from __future__ import annotations

from events import catalog as ev
from events.incidents import incident_report
from events.project_history import (
    problems_during,
    project_history,
    project_problems,
    unresolved,
)
from events.report import render_incident_markdown
from tests.events.test_projections import Journal, started_project

MCP_ERROR = {"type": "mcp_server", "key": "docs", "reason": "tool_error: the server exited (1)"}
SKILL_ERROR = {"type": "skills", "key": "bad", "reason": "invalid_frontmatter"}


def _project(j: Journal, payload: ev.Event) -> None:
    j.add(payload, conversation_id=None, correlation_id="corr-p")


def loaded_with_errors() -> Journal:
    j = Journal()
    _project(j, ev.ProjectStarted(root="/srv/repo"))
    _project(j, ev.ProjectAssetsLoaded(counts={"skills": 1}, errors=[SKILL_ERROR, MCP_ERROR]))
    return j


def test_the_history_holds_the_project_level_events_but_not_the_seals() -> None:
    j = started_project()
    _project(j, ev.ProjectAssetsLoaded(counts={"skills": 2}))
    seal = ev.JournalCheckpoint(
        index=1,
        head_position=3,
        head_hash="0" * 64,
        prev_checkpoint="0" * 64,
        sealed_at="2026-01-01T00:00:00.000Z",
        reason="count",
        key_id="0" * 16,
        mac="0" * 64,
    )
    _project(j, seal)
    _project(j, ev.ProjectStopped())
    history = project_history(j.events, "p1")
    assert [(e["seq"], e["type"], e["summary"]) for e in history["entries"]] == [
        (1, "project.started", "root /srv/repo"),
        (3, "project.assets_loaded", "loaded 2 skills; 0 errors"),
        (5, "project.stopped", "requested"),
    ]
    assert history["total_entries"] == 3
    assert project_history(j.events, "p1", limit=1)["entries"][0]["seq"] == 5
    assert project_history(j.events, "other")["entries"] == []


def test_load_errors_are_unresolved_problems_until_the_next_load() -> None:
    j = loaded_with_errors()
    problems = project_problems(j.events, "p1")
    assert [(p["kind"], p["summary"], p["resolved"]) for p in problems] == [
        ("asset_load_failed", "skills bad: invalid_frontmatter", False),
        ("mcp_server_failed", "mcp_server docs: tool_error: the server exited (1)", False),
    ]
    history = project_history(j.events, "p1")
    assert [e["problem"] for e in history["entries"]] == [None, "asset_load_failed"]
    _project(j, ev.ProjectAssetsReloaded(counts={"skills": 2}))
    assert unresolved(project_problems(j.events, "p1")) == []


def test_a_crash_is_resolved_by_the_restart_of_that_actor_or_of_its_project() -> None:
    j = started_project()
    _project(j, ev.ActorCrashed(actor="toolrunner", reason="process exited"))
    _project(j, ev.ActorCrashed(actor="policy", reason="process exited"))
    _project(j, ev.ActorRestarted(actor="toolrunner", reason="restarted"))
    open_ = unresolved(project_problems(j.events, "p1"))
    assert [(p["kind"], p["subject"]) for p in open_] == [("crash", "policy")]
    _project(j, ev.ActorEscalated(actor="policy", reason="too many restarts"))
    _project(j, ev.ActorRestarted(actor="project:p1", reason="restarted from its events"))
    assert unresolved(project_problems(j.events, "p1")) == []


def test_an_exited_mcp_server_is_resolved_when_it_starts_again() -> None:
    j = started_project()
    _project(j, ev.McpServerExited(server="docs", reason="connection_closed", detail="EOF"))
    (problem,) = unresolved(project_problems(j.events, "p1"))
    assert problem["summary"] == "mcp_server docs: connection_closed: EOF"
    _project(j, ev.McpServerRestarted(server="docs"))
    assert unresolved(project_problems(j.events, "p1")) == []


def test_a_new_project_start_resolves_every_earlier_problem() -> None:
    j = loaded_with_errors()
    _project(j, ev.ProjectStopped(reason="invalid_root_path: contains_roost_home"))
    assert [p["kind"] for p in unresolved(project_problems(j.events, "p1"))] == [
        "asset_load_failed",
        "mcp_server_failed",
        "not_restored",
    ]
    _project(j, ev.ProjectStarted(root="/srv/repo"))
    assert unresolved(project_problems(j.events, "p1")) == []


def test_problems_during_a_span_include_the_ones_still_open_at_its_start() -> None:
    j = loaded_with_errors()
    _project(j, ev.ActorCrashed(actor="policy", reason="boom"))  # seq 3
    _project(j, ev.ActorRestarted(actor="policy", reason="restarted"))  # seq 4
    _project(j, ev.ActorCrashed(actor="toolrunner", reason="later"))  # seq 5
    problems = project_problems(j.events, "p1")
    assert [p["seq"] for p in problems_during(problems, 4, 4)] == [2, 2]
    assert [p["seq"] for p in problems_during(problems, 3, 4)] == [2, 2, 3]
    assert [p["seq"] for p in problems_during(problems, 5, 9)] == [2, 2, 5]
    assert problems_during(problems, None, None) == []


def test_an_incident_report_names_the_project_problems_that_bore_on_it() -> None:
    j = loaded_with_errors()
    j.add(ev.ConversationStarted(), correlation_id="corr-c1")
    j.add(ev.UserMessage(content="search the docs"), correlation_id="corr-1")
    report = incident_report(j.events, "p1", "c1")
    assert [(p["kind"], p["summary"]) for p in report["project_problems"]] == [
        ("asset_load_failed", "skills bad: invalid_frontmatter (unresolved)"),
        ("mcp_server_failed", "mcp_server docs: tool_error: the server exited (1) (unresolved)"),
    ]
    text = render_incident_markdown(report)
    assert "## Project problems during it\n\n- seq 2 · " in text
    assert "`project.assets_loaded` — mcp_server docs: tool_error: the server exited" in text


def test_a_report_without_project_problems_has_no_such_section() -> None:
    j = started_project()
    j.add(ev.UserMessage(content="hi"), correlation_id="corr-1")
    report = incident_report(j.events, "p1", "c1")
    assert report["project_problems"] == []
    assert "Project problems" not in render_incident_markdown(report)
