"""Tests for runtime.daemon.activity: the daemon log's lines from committed events."""

from __future__ import annotations

from typing import Any

import pytest

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


def test_the_described_types_are_the_payloads_the_lines_match() -> None:
    """``_DESCRIBED_TYPES`` (what the follower reads beyond the steps) names every case."""
    import inspect
    import re

    from events.catalog import PAYLOAD_TYPES
    from runtime.daemon import activity

    source = inspect.getsource(activity._described)
    matched = {PAYLOAD_TYPES_BY_CLASS[name] for name in re.findall(r"ev\.(\w+)\(", source)}
    assert matched == activity._DESCRIBED_TYPES
    for kind in PAYLOAD_TYPES:  # a type the follower skips has no step and no description
        if kind not in activity.LINE_TYPES:
            assert kind not in activity._STEPS and not kind.startswith("security.")
            assert kind not in matched


def _classes() -> dict[str, str]:
    from events.catalog import PAYLOAD_TYPES

    return {cls.__name__: kind for kind, cls in PAYLOAD_TYPES.items()}


PAYLOAD_TYPES_BY_CLASS = _classes()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(request: pytest.FixtureRequest, tmp_path: Any) -> Any:
    from runtime.journal.store import Journal as Store

    if request.param == "sqlite":
        return Store("sqlite", sqlite_path=str(tmp_path / "j.sqlite"))
    return Store("postgres", env=request.getfixturevalue("postgres_env"))


def test_the_follower_reads_only_line_types_and_does_not_look_back(store: Any) -> None:
    """A real journal: deltas and messages are not read; a page ends where it says."""
    from runtime.daemon.activity import LineEvents
    from tests.runtime.journal.test_journal import make_event

    try:
        quiet = [make_event(kind="assistant.delta", data={"content": "x"}) for _ in range(6)]
        store.append([make_event(), *quiet])
        read = LineEvents(store, page=2)
        assert [e.type for e in read(0)] == ["user.message"]
        assert read.through == 7  # the head: the deltas after it were skipped, once
        assert read(1) == []  # the follower's cursor is the message: not looked at again
        store.append([*quiet, make_event(), make_event(), make_event()])
        page = read(1)
        assert [e.seq for e in page] == [14, 15]  # a full page: read on from its last
        assert read.through == 15
        assert [e.seq for e in read(15)] == [16]
    finally:
        store.close()
