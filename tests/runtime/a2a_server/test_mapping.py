"""The plain core of roost a2a serve: ids, the agent card, a task folded from its journal."""

from __future__ import annotations

import re
from typing import Any

import pytest
from a2a.types import TaskState

from runtime.a2a_server.mapping import (
    agent_card,
    conversation_of,
    new_task_id,
    parse_task_id,
    skills_of,
    task_from_entries,
)

CTX = "3b1f0c2e-ctx"
TASK = f"{CTX}.0123456789ab"


def entry(kind: str, correlation: str = TASK, **data: Any) -> dict[str, Any]:
    return {
        "type": kind,
        "data": data,
        "correlation_id": correlation,
        "event_id": f"ev-{kind}",
        "at": "2026-01-02T03:04:05.678Z",
    }


def test_a_context_is_the_conversation_a2a_context() -> None:
    assert conversation_of(CTX) == "a2a-3b1f0c2e-ctx"


@pytest.mark.parametrize("context_id", ["", "-x", "a/b", "x" * 61, "a b"])
def test_a_context_id_that_cannot_name_a_conversation_is_refused(context_id: str) -> None:
    with pytest.raises(ValueError, match=r"^a context id is 1-60 letters"):
        conversation_of(context_id)


def test_a_task_id_carries_its_context_and_is_read_back() -> None:
    task_id = new_task_id(CTX)
    assert re.fullmatch(re.escape(CTX) + r"\.[0-9a-f]{12}", task_id)
    assert parse_task_id(task_id) == (CTX, "a2a-" + CTX)
    assert parse_task_id("a.b.c.0123456789ab") == ("a.b.c", "a2a-a.b.c")


@pytest.mark.parametrize("task_id", ["plain", "ctx.XYZ", "ctx.0123456789", "/x.0123456789ab"])
def test_other_task_ids_are_not_this_servers(task_id: str) -> None:
    assert parse_task_id(task_id) is None


def test_commands_and_workflows_are_the_skills_other_tools_are_not() -> None:
    tools = [
        {"name": "fs.read", "description": "Read a file"},
        {"name": "workflow.run.release", "description": "Cut a release"},
        {"name": "command.run.test", "description": "Run the tests"},
        {"name": "command.run"},
    ]
    skills = [(s.id, s.name, s.description, list(s.tags)) for s in skills_of(tools)]
    assert skills == [
        ("command.run.test", "test", "Run the tests", ["roost", "command"]),
        ("workflow.run.release", "release", "Cut a release", ["roost", "workflow"]),
    ]


def test_a_card_without_commands_offers_the_conversation_as_its_skill() -> None:
    card = agent_card(project_id="p1", description="d", url="http://x/", version="1", tools=[])
    assert [s.id for s in card.skills] == ["conversation"]
    assert card.capabilities.streaming is True
    assert [i.protocol_version for i in card.supported_interfaces] == ["1.0", "0.3"]


def test_a_completed_turn_is_a_completed_task_with_its_answer() -> None:
    entries = [
        entry("user.message", content="read README.md"),
        entry("llm.started"),
        entry("tool.requested", call_id="c1", name="fs.read"),
        entry("tool.completed", call_id="c1", name="fs.read"),
        entry("assistant.message", content="Tool fs.read completed."),
        entry("llm.completed", finish_reason="stop"),
        entry("user.message", correlation="other", content="not this task"),
    ]
    task = task_from_entries(TASK, CTX, "p1", entries)
    assert task is not None
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert task.status.message.parts[0].text == "Tool fs.read completed."
    assert [p.text for a in task.artifacts for p in a.parts] == ["Tool fs.read completed."]
    assert [m.parts[0].text for m in task.history] == ["read README.md"]
    assert task.history[0].message_id == "ev-user.message"
    assert task.metadata["roost"]["conversation_id"] == "a2a-" + CTX


def test_a_call_awaiting_approval_is_input_required_until_it_is_decided() -> None:
    asked = [
        entry("user.message", content="write"),
        entry("tool.requested", call_id="c1", name="fs.write"),
        entry("tool.approval_requested", call_id="c1"),
    ]
    task = task_from_entries(TASK, CTX, "p1", asked)
    assert task is not None
    assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert task.status.message.parts[0].text == (
        "fs.write (c1) awaits approval: `roost approve p1 a2a-3b1f0c2e-ctx c1` or "
        "`roost reject p1 a2a-3b1f0c2e-ctx c1`"
    )
    approved = task_from_entries(TASK, CTX, "p1", [*asked, entry("tool.approved", call_id="c1")])
    assert approved is not None
    assert approved.status.state == TaskState.TASK_STATE_WORKING


@pytest.mark.parametrize(
    ("end", "state", "text"),
    [
        (
            entry("llm.failed", reason="conversation_cancelled"),
            "CANCELED",
            "conversation_cancelled",
        ),
        (entry("llm.failed", reason="conversation_stopped"), "CANCELED", "conversation_stopped"),
        (entry("llm.failed", reason="llm_timeout"), "FAILED", "llm_timeout"),
        (entry("budget.exceeded", budget="max_rounds"), "FAILED", "budget_exceeded: max_rounds"),
    ],
)
def test_a_turn_that_ends_otherwise_is_a_cancelled_or_failed_task(
    end: dict[str, Any], state: str, text: str
) -> None:
    task = task_from_entries(TASK, CTX, "p1", [entry("user.message", content="x"), end])
    assert task is not None
    assert task.status.state == TaskState.Value(f"TASK_STATE_{state}")
    assert task.status.message.parts[0].text == text


def test_a_task_without_its_message_in_the_journal_is_not_found() -> None:
    assert task_from_entries(TASK, CTX, "p1", [entry("llm.started")]) is None
