"""Tests for runtime.daemon.activity: the daemon log's lines from committed events."""

from __future__ import annotations

from typing import Any

from events import catalog as ev
from runtime.daemon.activity import ActivityLog
from tests.events.test_projections import Journal


def _lines(j: Journal) -> list[tuple[str, str, dict[str, Any]]]:
    fold = ActivityLog()
    return [line for event in j.events for line in fold.lines(event)]


def test_a_project_its_conversation_a_turn_and_a_tool_call_get_one_line_each() -> None:
    j = Journal()
    j.add(ev.ProjectStarted(root="/srv/repo"), conversation_id=None, correlation_id="corr-p")
    j.add(
        ev.ProjectAssetsLoaded(
            counts={"skills": 1}, errors=[{"type": "mcp_server", "key": "docs", "reason": "x"}]
        ),
        conversation_id=None,
        correlation_id="corr-p",
    )
    j.add(ev.ConversationStarted(), correlation_id="corr-c")
    j.add(ev.UserMessage(content="read a"), after_ms=10)
    j.add(ev.LlmStarted(round=1, provider="deterministic"))
    j.add(ev.ToolRequested(call_id="call-1", name="fs.read", args={"path": "a"}))
    j.add(ev.PolicyAllowed(tool="fs.read", call_id="call-1"))
    j.add(ev.ToolStarted(call_id="call-1", name="fs.read"))
    j.add(ev.ToolFailed(call_id="call-1", name="fs.read", duration_ms=7, reason={"code": "x"}))
    j.add(ev.LlmCompleted(), after_ms=100)
    j.add(ev.ProjectStopped(), conversation_id=None, correlation_id="corr-s")
    lines = _lines(j)
    assert [(level, name) for level, name, _ in lines] == [
        ("info", "project_started"),
        ("info", "project_assets_loaded"),
        ("warning", "project_load_failed"),
        ("info", "conversation_started"),
        ("info", "turn_started"),
        ("warning", "tool_call_ended"),
        ("info", "turn_ended"),
        ("info", "project_stopped"),
    ]
    fields = {name: f for _, name, f in lines}
    assert fields["project_started"] == {"seq": 1, "project_id": "p1", "root": "/srv/repo"}
    assert fields["project_load_failed"]["key"] == "docs"
    assert fields["tool_call_ended"] == {
        "seq": 9,
        "project_id": "p1",
        "conversation_id": "c1",
        "correlation_id": "corr-1",
        "tool": "fs.read",
        "call_id": "call-1",
        "outcome": "failed",
        "duration_ms": 7,
        "code": "x",
        "error": None,
    }
    assert fields["turn_ended"] == {
        "seq": 10,
        "project_id": "p1",
        "conversation_id": "c1",
        "correlation_id": "corr-1",
        "outcome": "llm.completed",
        "duration_ms": 105,
    }


def test_a_failed_turn_and_a_crash_are_warnings_and_errors() -> None:
    j = Journal()
    j.add(ev.UserMessage(content="hi"))
    j.add(ev.LlmFailed(reason="http_error", message="HTTP 500"), after_ms=3)
    j.add(ev.ActorCrashed(actor="toolrunner", reason="process exited"), conversation_id=None)
    lines = _lines(j)
    assert [(level, name) for level, name, _ in lines] == [
        ("info", "turn_started"),
        ("warning", "turn_ended"),
        ("error", "actor_crashed"),
    ]
    assert lines[1][2]["code"] == "http_error"
    assert lines[1][2]["duration_ms"] == 3
    assert lines[2][2]["actor"] == "toolrunner"


def test_a_turn_whose_start_came_before_the_daemon_has_no_duration() -> None:
    j = Journal()
    j.add(ev.UserMessage(content="hi"))
    j.add(ev.LlmCompleted())
    fold = ActivityLog()
    (line,) = fold.lines(j.events[1])
    assert line[1] == "turn_ended"
    assert "duration_ms" not in line[2]
