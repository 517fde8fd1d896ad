"""``a2a_agents``: option validation, tool description, what a delegated task folds to.

No daemon and no agent: the SDK's own message types are folded as an agent would send
them; ``tests/integration/test_a2a_client.py`` runs the real thing.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from a2a.types.a2a_pb2 import (
    Artifact,
    Message,
    Part,
    Role,
    StreamResponse,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)

from events import catalog as ev
from runtime.errors import InvalidRuntimeOptError
from runtime.policy.a2a_agents import PROBLEMS
from runtime.policy.options import validate_options
from runtime.tools.a2a_client.task import (
    ON_PAYLOAD,
    Delegation,
    card_from_json,
    card_to_json,
    open_client,
)
from runtime.tools.a2a_client.tools import a2a_tools, describe_card, tool_name


def _problem(agents: Any) -> tuple[str, int | None]:
    with pytest.raises(InvalidRuntimeOptError) as caught:
        validate_options({"a2a_agents": agents})
    error = caught.value
    assert error.key == "a2a_agents" and error.reason == "invalid_entry"
    assert error.details["problem"] in PROBLEMS
    return error.details["problem"], error.details.get("index")


def test_valid_entries_are_normalized_and_sorted_by_name() -> None:
    options = validate_options(
        {
            "a2a_agents": [
                {"name": "writer", "url": " https://agents.example.com/writer "},
                {"name": "coder", "url": "http://127.0.0.1:9999"},
            ]
        }
    )
    assert options["a2a_agents"] == [
        {"name": "coder", "url": "http://127.0.0.1:9999"},
        {"name": "writer", "url": "https://agents.example.com/writer"},
    ]
    assert validate_options({})["a2a_agents"] == []


@pytest.mark.parametrize(
    ("agents", "problem", "index"),
    [
        ({"name": "peer", "url": "http://h/"}, "expected_list", None),
        (["peer"], "expected_object", 0),
        ([{"name": "peer", "url": "http://h/", "command": ["x"]}], "unknown_field", 0),
        ([{"name": "Peer", "url": "http://h/"}], "invalid_name", 0),
        ([{"name": "a.b", "url": "http://h/"}], "invalid_name", 0),
        ([{"url": "http://h/"}], "invalid_name", 0),
        (
            [{"name": "peer", "url": "http://h/"}, {"name": "peer", "url": "http://i/"}],
            "duplicate_name",
            1,
        ),
        ([{"name": "peer"}], "no_url", 0),
        ([{"name": "peer", "url": ""}], "invalid_url", 0),
        ([{"name": "peer", "url": "http:///x"}], "invalid_url", 0),
        ([{"name": "peer", "url": "a2a://h/"}], "url_scheme_not_http", 0),
        ([{"name": f"a{i}", "url": "http://h/"} for i in range(33)], "expected_list", None),
    ],
)
def test_a_bad_entry_is_refused_with_its_problem_and_index(
    agents: Any, problem: str, index: int | None
) -> None:
    assert _problem(agents) == (problem, index)


def test_the_tool_is_described_from_the_agent_card() -> None:
    card = {
        "name": "Reviewer",
        "description": "Reviews patches.",
        "skills": [
            {"id": "review", "name": "Review", "description": "Reads a diff and comments."},
            {"id": "lint"},
        ],
    }
    text = describe_card("rev", card)
    assert text.splitlines() == [
        "Delegate a task to the remote A2A agent 'Reviewer': Reviews patches.",
        "Skills:",
        "- Review: Reads a diff and comments.",
        "- lint",
        "Returns the remote task's state, text and artifacts; pass its context_id to continue.",
    ]
    long = describe_card("rev", {"description": "x" * 5000})
    assert len(long) == 1024 and long.endswith("...")
    assert tool_name("rev") == "a2a.rev.send"


def test_without_a2a_in_protocol_allowlist_no_card_is_fetched() -> None:
    options = validate_options(
        {
            # an address nothing listens on: fetching would fail differently
            "a2a_agents": [{"name": "peer", "url": "http://127.0.0.1:9"}],
            "protocol_allowlist": ["mcp"],
        }
    )
    specs, fns, errors = a2a_tools("/", options)
    assert (specs, fns) == ([], {})
    assert errors == [
        {
            "type": "a2a_agent",
            "key": "peer",
            "reason": "protocol_not_allowed: a2a is not in protocol_allowlist; no card was fetched",
        }
    ]


def _status(state: int, text: str = "") -> StreamResponse:
    status = TaskStatus(state=state)
    if text:
        status.message.CopyFrom(Message(role=Role.ROLE_AGENT, parts=[Part(text=text)]))
    update = TaskStatusUpdateEvent(task_id="t1", context_id="ctx", status=status)
    return StreamResponse(status_update=update)


def _chunk(text: str, *, append: bool) -> StreamResponse:
    artifact = Artifact(artifact_id="a1", name="answer", parts=[Part(text=text)])
    update = TaskArtifactUpdateEvent(
        task_id="t1", context_id="ctx", artifact=artifact, append=append
    )
    return StreamResponse(artifact_update=update)


def test_a_streamed_task_folds_into_the_result_and_one_signal_per_state() -> None:
    signals: list[ev.Event] = []
    delegation = Delegation("peer", "call-1", signals)
    task = Task(id="t1", context_id="ctx", status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED))
    for response in (
        StreamResponse(task=task),
        _status(TaskState.TASK_STATE_WORKING),
        _status(TaskState.TASK_STATE_WORKING),  # the same state again: no new signal
        _chunk("first ", append=False),
        _chunk("second", append=True),
        _status(TaskState.TASK_STATE_COMPLETED),
    ):
        delegation.absorb(response)
    assert not delegation.waiting
    assert delegation.result() == {
        "agent": "peer",
        "task_id": "t1",
        "context_id": "ctx",
        "state": "completed",
        "text": "first \nsecond",
        "artifacts": [
            {
                "artifact_id": "a1",
                "name": "answer",
                "parts": [{"text": "first "}, {"text": "second"}],
            }
        ],
    }
    assert all(isinstance(s, ev.A2aTaskUpdated) for s in signals)
    assert [(s.state, s.task_id, s.call_id) for s in signals] == [  # type: ignore[attr-defined]
        ("submitted", "t1", "call-1"),
        ("working", "t1", "call-1"),
        ("completed", "t1", "call-1"),
    ]
    elapsed = [s.elapsed_ms for s in signals]  # type: ignore[attr-defined]
    assert elapsed == sorted(elapsed) and all(ms >= 0 for ms in elapsed)


def test_a_question_from_the_agent_is_the_result_text() -> None:
    delegation = Delegation("peer", "call-1", [])
    delegation.absorb(_status(TaskState.TASK_STATE_INPUT_REQUIRED, "Which colour?"))
    assert not delegation.waiting
    result = delegation.result()
    assert (result["state"], result["text"], result["task_id"]) == (
        "input_required",
        "Which colour?",
        "t1",
    )


def test_a_direct_message_reply_has_no_task() -> None:
    signals: list[ev.Event] = []
    delegation = Delegation("peer", "call-1", signals)
    reply = Message(role=Role.ROLE_AGENT, context_id="ctx", parts=[Part(text="hi")])
    delegation.absorb(StreamResponse(message=reply))
    assert delegation.result()["text"] == "hi" and delegation.result()["task_id"] is None
    assert not delegation.waiting and signals == []


def test_every_payload_a_stream_response_can_carry_has_a_handler() -> None:
    payloads = StreamResponse.DESCRIPTOR.oneofs_by_name["payload"].fields
    assert set(ON_PAYLOAD) == {None, *(field.name for field in payloads)}


def test_an_answer_without_a_payload_changes_nothing() -> None:
    signals: list[ev.Event] = []
    delegation = Delegation("peer", "call-1", signals)
    delegation.absorb(StreamResponse())
    assert delegation.result()["task_id"] is None and delegation.waiting and signals == []


def test_a_card_survives_its_json_form() -> None:
    data = {
        "name": "Fixture agent",
        "supportedInterfaces": [{"url": "http://h/", "protocolBinding": "JSONRPC"}],
        "capabilities": {"streaming": True},
        "skills": [{"id": "echo", "name": "Echo"}],
    }
    card = card_from_json(data)
    assert card.capabilities.streaming and card.skills[0].name == "Echo"
    assert card_to_json(card) == data


def test_a_card_without_a_binding_roost_speaks_opens_no_client() -> None:
    grpc_only = card_from_json(
        {"name": "g", "supportedInterfaces": [{"url": "h:1", "protocolBinding": "GRPC"}]}
    )
    rest = card_from_json(
        {"name": "r", "supportedInterfaces": [{"url": "http://h/", "protocolBinding": "HTTP+JSON"}]}
    )

    async def both() -> None:
        async with httpx.AsyncClient() as http:
            assert open_client(rest, http, streaming=False) is not None
            with pytest.raises(ValueError, match="no compatible transports"):
                open_client(grpc_only, http, streaming=False)

    asyncio.run(both())
