"""Tests for events.projections: timeline, pending calls, model context, status, project view."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from events import catalog as ev
from events.chain import chain_hash, verify_chain
from events.codecs import canonical_json
from events.envelope import GENESIS_HASH, Envelope, NewEvent, format_at
from events.project_view import project_view
from events.projections import (
    PROJECTION_KEYS,
    LlmContextFold,
    conversation_status,
    diagnostics,
    get_projection,
    in_seq_order,
    llm_context,
    pending_tool_calls,
    timeline,
)

START = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)


class Journal:
    """Builds a realistic committed journal of one project: seqs, versions, hash chain."""

    def __init__(self, project_id: str = "p1") -> None:
        self.project_id = project_id
        self.events: list[Envelope] = []
        self.clock_ms = 0
        self._versions: dict[str | None, int] = {}

    def add(
        self,
        payload: ev.Event,
        *,
        conversation_id: str | None = "c1",
        correlation_id: str = "corr-1",
        cause: Envelope | None = None,
        after_ms: int = 1,
    ) -> Envelope:
        """Commit ``payload`` ``after_ms`` after the previous event and return its envelope."""
        self.clock_ms += after_ms
        seq = len(self.events) + 1
        stream = conversation_id
        version = self._versions.get(stream, 0) + 1
        self._versions[stream] = version
        new = NewEvent(
            event_id=f"ev-{seq:04d}",
            type=payload.__struct_config__.tag,  # type: ignore[arg-type]
            at=format_at(START + timedelta(milliseconds=self.clock_ms)),
            project_id=self.project_id,
            conversation_id=conversation_id,
            correlation_id=correlation_id,
            causation_id=cause.event_id if cause is not None else None,
            data=ev.payload_to_data(payload),
        )
        prev = self.events[-1].hash if self.events else GENESIS_HASH
        envelope = Envelope(
            seq=seq,
            stream_version=version,
            event_id=new.event_id,
            type=new.type,
            at=new.at,
            project_id=new.project_id,
            conversation_id=new.conversation_id,
            correlation_id=new.correlation_id,
            causation_id=new.causation_id,
            data=new.data,
            hash=chain_hash(prev, new, version),
            prev_hash=prev,
        )
        self.events.append(envelope)
        return envelope


def started_project(orchestration: bool = True) -> Journal:
    """A journal with a started project and a started conversation ``c1``."""
    j = Journal()
    j.add(
        ev.ProjectStarted(root="/srv/repo", options={"orchestration": orchestration}),
        conversation_id=None,
        correlation_id="corr-start",
    )
    j.add(ev.ConversationStarted(), correlation_id="corr-c1")
    return j


def incident_journal() -> Journal:
    """One turn: two tool calls, one denied, one timed out and failed; noise elsewhere.

    seq 1 project.started, 2 conversation.started, 3 user.message, 4 llm.started,
    5 assistant.message, 6/7 tool.requested (call-1 fs.read, call-2 fs.write),
    8 policy.allowed call-1, 9 policy.denied call-2, 10 security.sensitive_path_denied,
    11 tool.failed call-2, 12 tool.started call-1, 13 tool.timeout call-1, 14 actor signal
    without conversation, 15 tool.failed call-1, 16 event of conversation c2,
    17 llm.started round 2, 18 assistant.message, 19 llm.completed.
    """
    j = started_project()
    msg = j.add(ev.UserMessage(content="fix the build"), after_ms=10)
    r1 = j.add(ev.LlmStarted(provider="deterministic", round=1), cause=msg, after_ms=2)
    j.add(ev.AssistantMessage(content="Reading and writing."), cause=r1, after_ms=40)
    read = j.add(
        ev.ToolRequested(call_id="call-1", name="fs.read", args={"path": "README.md"}),
        cause=r1,
    )
    write = j.add(
        ev.ToolRequested(call_id="call-2", name="fs.write", args={"path": ".env", "content": "x"}),
        cause=r1,
    )
    allowed = j.add(ev.PolicyAllowed(tool="fs.read", call_id="call-1"), cause=read, after_ms=3)
    denied = j.add(
        ev.PolicyDenied(tool="fs.write", reason="sensitive_path_denied", call_id="call-2"),
        cause=write,
        after_ms=4,
    )
    j.add(
        ev.SecuritySensitivePathDenied(tool="fs.write", path=".env", call_id="call-2"),
        cause=write,
    )
    j.add(
        ev.ToolFailed(call_id="call-2", name="fs.write", reason={"code": "sensitive_path_denied"}),
        cause=denied,
    )
    started = j.add(ev.ToolStarted(call_id="call-1", name="fs.read"), cause=allowed)
    timeout = j.add(ev.ToolTimeout(call_id="call-1", tool="fs.read"), cause=started, after_ms=30000)
    j.add(
        ev.ActorRestarted(actor="toolrunner:p1", reason="timeout"),
        conversation_id=None,
        correlation_id="corr-sys",
    )
    failed = j.add(
        ev.ToolFailed(
            call_id="call-1",
            name="fs.read",
            duration_ms=30000,
            reason={"code": "timeout", "timeout_ms": 30000},
        ),
        cause=timeout,
        after_ms=5,
    )
    j.add(ev.UserMessage(content="elsewhere"), conversation_id="c2", correlation_id="corr-x")
    r2 = j.add(ev.LlmStarted(provider="deterministic", round=2), cause=failed, after_ms=2)
    j.add(ev.AssistantMessage(content="Tool fs.read failed: timeout"), cause=r2, after_ms=20)
    j.add(ev.LlmCompleted(finish_reason="stop", tool_call_count=2), cause=r2)
    return j


def approval_journal(decision: str | None = "approve") -> Journal:
    """A turn whose only call needs approval; ``decision`` None stops before the answer."""
    j = started_project()
    msg = j.add(ev.UserMessage(content="deploy"), correlation_id="corr-2")
    r1 = j.add(ev.LlmStarted(provider="deterministic"), correlation_id="corr-2", cause=msg)
    req = j.add(
        ev.ToolRequested(call_id="call-3", name="command.run", args={"command": "make deploy"}),
        correlation_id="corr-2",
        cause=r1,
    )
    j.add(ev.ToolApprovalRequested(call_id="call-3"), correlation_id="corr-2", cause=req)
    if decision == "approve":
        j.add(ev.ToolApproved(call_id="call-3"), correlation_id="corr-2", after_ms=500)
    elif decision == "reject":
        j.add(ev.ToolRejected(call_id="call-3", reason="not now"), correlation_id="corr-2")
    return j


def cancel_journal() -> Journal:
    """A turn whose async call is cancelled with the conversation."""
    j = started_project()
    msg = j.add(ev.UserMessage(content="run tests"), correlation_id="corr-3")
    r1 = j.add(ev.LlmStarted(provider="deterministic"), correlation_id="corr-3", cause=msg)
    req = j.add(
        ev.ToolRequested(
            call_id="call-4", name="command.run", args={"command": "pytest"}, run_mode="async"
        ),
        correlation_id="corr-3",
        cause=r1,
    )
    j.add(ev.ToolStarted(call_id="call-4", name="command.run"), correlation_id="corr-3", cause=req)
    cancel = j.add(ev.ConversationCancel(reason="user_cancelled"), correlation_id="corr-cancel")
    j.add(
        ev.ToolCancelled(call_id="call-4", name="command.run"),
        correlation_id="corr-3",
        cause=cancel,
    )
    j.add(
        ev.ToolChildProcessesTerminated(call_id="call-4", reason="cancel", count=2),
        correlation_id="corr-3",
        cause=cancel,
    )
    return j


# --- timeline ---------------------------------------------------------------------------


def test_the_builder_makes_a_journal_whose_hash_chain_verifies() -> None:
    assert verify_chain(incident_journal().events).ok is True


def test_timeline_lists_the_conversations_events_and_signals_in_seq_order() -> None:
    events = incident_journal().events
    seqs = [entry["seq"] for entry in timeline(events, "c1")]
    assert seqs == [2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 15, 17, 18, 19]


def test_timeline_entries_are_the_envelopes_as_plain_dicts() -> None:
    events = incident_journal().events
    assert timeline(events, "c1")[0] == msgspec.to_builtins(events[1])


def test_timeline_leaves_out_signals_without_a_conversation() -> None:
    types = [entry["type"] for entry in timeline(incident_journal().events, "c1")]
    assert "actor.restarted" not in types


def test_timeline_of_an_unknown_conversation_is_empty() -> None:
    assert timeline(incident_journal().events, "nope") == []


# --- pending tool calls -----------------------------------------------------------------


def test_a_requested_call_is_pending_and_running_until_its_terminal_event() -> None:
    j = started_project()
    j.add(ev.UserMessage(content="read"))
    j.add(ev.ToolRequested(call_id="call-9", name="fs.read", args={"path": "a"}))
    assert pending_tool_calls(j.events, "c1") == [
        {
            "call_id": "call-9",
            "name": "fs.read",
            "args": {"path": "a"},
            "run_mode": "sync",
            "status": "running",
            "requested_seq": 4,
        }
    ]
    j.add(ev.ToolCompleted(call_id="call-9", name="fs.read"))
    assert pending_tool_calls(j.events, "c1") == []


def test_a_call_awaits_approval_after_approval_is_requested() -> None:
    calls = pending_tool_calls(approval_journal(decision=None).events, "c1")
    assert [(c["call_id"], c["status"]) for c in calls] == [("call-3", "awaiting_approval")]


def test_an_approved_call_is_running_again() -> None:
    calls = pending_tool_calls(approval_journal("approve").events, "c1")
    assert [(c["call_id"], c["status"]) for c in calls] == [("call-3", "running")]


def test_a_rejected_call_is_running_until_its_terminal_failure() -> None:
    j = approval_journal("reject")
    assert [c["status"] for c in pending_tool_calls(j.events, "c1")] == ["running"]
    j.add(
        ev.ToolFailed(call_id="call-3", name="command.run", reason={"code": "approval_rejected"}),
        correlation_id="corr-2",
    )
    assert pending_tool_calls(j.events, "c1") == []


def test_pending_calls_are_sorted_by_requested_seq() -> None:
    j = started_project()
    for call_id in ("call-b", "call-a", "call-c"):
        j.add(ev.ToolRequested(call_id=call_id, name="fs.read"))
    calls = pending_tool_calls(list(reversed(j.events)), "c1")
    assert [(c["call_id"], c["requested_seq"]) for c in calls] == [
        ("call-b", 3),
        ("call-a", 4),
        ("call-c", 5),
    ]


def test_cancelled_calls_are_no_longer_pending() -> None:
    assert pending_tool_calls(cancel_journal().events, "c1") == []


# --- llm context ------------------------------------------------------------------------


def test_llm_context_has_the_user_message_the_rounds_and_the_tool_results() -> None:
    assert llm_context(incident_journal().events, "c1") == [
        {"role": "user", "content": "fix the build"},
        {
            "role": "assistant",
            "content": "Reading and writing.",
            "tool_calls": [
                {"id": "call-1", "name": "fs.read", "args": {"path": "README.md"}},
                {"id": "call-2", "name": "fs.write", "args": {"path": ".env", "content": "x"}},
            ],
        },
        {
            "role": "tool",
            "tool_call_id": "call-2",
            "name": "fs.write",
            "status": "error",
            "content": '{"code":"sensitive_path_denied"}',
            "code": "sensitive_path_denied",
        },
        {
            "role": "tool",
            "tool_call_id": "call-1",
            "name": "fs.read",
            "status": "error",
            "content": '{"code":"timeout","timeout_ms":30000}',
            "code": "timeout",
        },
        {"role": "assistant", "content": "Tool fs.read failed: timeout", "tool_calls": []},
    ]


def test_a_completed_call_is_an_ok_tool_message_with_its_result_as_json() -> None:
    j = started_project()
    r1 = j.add(ev.LlmStarted(provider="deterministic"))
    j.add(ev.ToolRequested(call_id="call-1", name="fs.list"), cause=r1)
    j.add(ev.ToolCompleted(call_id="call-1", name="fs.list", result={"b": 2, "a": [1]}))
    assert llm_context(j.events, "c1")[-1] == {
        "role": "tool",
        "tool_call_id": "call-1",
        "name": "fs.list",
        "status": "ok",
        "content": '{"a":[1],"b":2}',
        "code": None,
    }


def test_a_cancelled_call_is_an_error_tool_message_with_code_conversation_cancelled() -> None:
    assert llm_context(cancel_journal().events, "c1")[-1] == {
        "role": "tool",
        "tool_call_id": "call-4",
        "name": "command.run",
        "status": "error",
        "content": '{"code":"conversation_cancelled"}',
        "code": "conversation_cancelled",
    }


def test_calls_requested_outside_a_model_round_are_not_in_the_context() -> None:
    j = started_project()
    j.add(ev.ToolRequested(call_id="call-1", name="fs.read"), correlation_id="corr-run")
    j.add(ev.ToolCompleted(call_id="call-1", name="fs.read"), correlation_id="corr-run")
    assert llm_context(j.events, "c1") == []


def test_a_round_that_produced_nothing_is_left_out_of_the_context() -> None:
    j = started_project()
    j.add(ev.UserMessage(content="hi"))
    j.add(ev.LlmStarted(provider="deterministic"))
    j.add(ev.LlmFailed(reason="timeout"))
    assert llm_context(j.events, "c1") == [{"role": "user", "content": "hi"}]


# --- status and diagnostics -------------------------------------------------------------


def test_a_conversation_with_no_turn_is_idle() -> None:
    assert conversation_status(started_project().events, "c1") == "idle"


def test_a_conversation_with_an_open_turn_is_running() -> None:
    j = started_project()
    j.add(ev.UserMessage(content="hi"))
    assert conversation_status(j.events, "c1") == "running"


def test_a_conversation_whose_turn_ended_is_idle() -> None:
    assert conversation_status(incident_journal().events, "c1") == "idle"


def test_a_conversation_whose_pending_calls_all_await_approval_awaits_approval() -> None:
    assert conversation_status(approval_journal(None).events, "c1") == "awaiting_approval"


def test_a_conversation_is_cancelled_until_it_is_resumed() -> None:
    j = cancel_journal()
    assert conversation_status(j.events, "c1") == "cancelled"
    j.add(ev.ConversationResume(), correlation_id="corr-resume")
    assert conversation_status(j.events, "c1") == "idle"


def test_without_orchestration_a_user_message_opens_no_turn() -> None:
    j = started_project(orchestration=False)
    j.add(ev.UserMessage(content="hi"))
    assert conversation_status(j.events, "c1") == "idle"


def test_diagnostics_count_events_and_pending_calls() -> None:
    assert diagnostics(approval_journal(None).events, "c1") == {
        "event_count": 5,
        "pending_tool_call_count": 1,
        "last_event_type": "tool.approval_requested",
        "status": "awaiting_approval",
    }


def test_diagnostics_of_an_unknown_conversation_are_empty() -> None:
    assert diagnostics(started_project().events, "nope") == {
        "event_count": 0,
        "pending_tool_call_count": 0,
        "last_event_type": None,
        "status": "idle",
    }


# --- project view -----------------------------------------------------------------------


def test_project_view_reports_options_conversations_signals_and_decisions() -> None:
    j = incident_journal()
    j.add(ev.ConversationStarted(), conversation_id="c2", correlation_id="corr-c2")
    j.add(ev.ConversationStopped(), correlation_id="corr-stop")
    view = project_view(j.events)
    assert {k: v for k, v in view.items() if k != "recent_decisions"} == {
        "project_id": "p1",
        "root": "/srv/repo",
        "options": {"orchestration": True},
        "sandbox_layers": {},
        "status": "running",
        "conversations": ["c2"],
        "started_at": "2024-05-01T12:00:00.001Z",
        "signal_counts": {
            "actor.restarted": 1,
            "policy.allowed": 1,
            "policy.denied": 1,
            "security.sensitive_path_denied": 1,
            "tool.timeout": 1,
        },
    }
    assert view["recent_decisions"] == [
        {
            "at": "2024-05-01T12:00:00.059Z",
            "project_id": "p1",
            "conversation_id": "c1",
            "correlation_id": "corr-1",
            "tool": "fs.read",
            "decision": "allow",
            "reason": "allowed",
            "source": "policy",
        },
        {
            "at": "2024-05-01T12:00:00.063Z",
            "project_id": "p1",
            "conversation_id": "c1",
            "correlation_id": "corr-1",
            "tool": "fs.write",
            "decision": "deny",
            "reason": "sensitive_path_denied",
            "source": "policy",
        },
    ]


def test_an_approval_request_is_a_recent_decision_ask_with_the_tools_name() -> None:
    decisions = project_view(approval_journal(None).events)["recent_decisions"]
    assert [(d["tool"], d["decision"], d["reason"]) for d in decisions] == [
        ("command.run", "ask", "approval_required")
    ]


def test_project_view_keeps_only_the_last_200_decisions() -> None:
    j = started_project()
    for n in range(205):
        j.add(ev.PolicyAllowed(tool=f"tool-{n}"))
    decisions = project_view(j.events)["recent_decisions"]
    assert (len(decisions), decisions[0]["tool"], decisions[-1]["tool"]) == (
        200,
        "tool-5",
        "tool-204",
    )


def test_a_stopped_project_is_stopped() -> None:
    j = started_project()
    j.add(ev.ProjectStopped(), conversation_id=None, correlation_id="corr-stop")
    assert project_view(j.events)["status"] == "stopped"


# --- dispatch ---------------------------------------------------------------------------


@pytest.mark.parametrize("key", PROJECTION_KEYS)
def test_get_projection_dispatches_by_name(key: str) -> None:
    events = incident_journal().events
    expected = {
        "timeline": timeline,
        "pending_tool_calls": pending_tool_calls,
        "llm_context": llm_context,
        "diagnostics": diagnostics,
    }[key](events, "c1")
    assert get_projection(events, "c1", key) == expected


def test_get_projection_raises_key_error_for_an_unknown_key() -> None:
    with pytest.raises(KeyError, match=r"unknown projection 'state'; expected one of: diag"):
        get_projection([], "c1", "state")


# --- properties -------------------------------------------------------------------------

OPS = (
    "message",
    "round",
    "request",
    "ask",
    "approve",
    "reject",
    "end",
    "signal",
    "finish",
    "cancel",
    "resume",
)


@st.composite
def journals(draw: st.DrawFn) -> Journal:
    """Random but well-formed conversations: each call gets at most one terminal event."""
    j = started_project()
    open_calls: list[str] = []
    asked: list[str] = []
    count = 0
    for op, pick in draw(st.lists(st.tuples(st.sampled_from(OPS), st.integers(0, 9)), max_size=40)):
        corr = f"corr-{pick % 3}"
        after = draw(st.integers(0, 50))
        conversation = "c1" if pick % 4 else "c2"
        if op == "message":
            j.add(
                ev.UserMessage(content=f"m{pick}"),
                correlation_id=corr,
                conversation_id=conversation,
            )
        elif op == "round":
            j.add(ev.LlmStarted(provider="deterministic", round=pick), correlation_id=corr)
        elif op == "request":
            count += 1
            call_id = f"call-{count}"
            open_calls.append(call_id)
            j.add(
                ev.ToolRequested(call_id=call_id, name="fs.read"),
                correlation_id=corr,
                after_ms=after,
            )
        elif op == "ask" and open_calls:
            call_id = open_calls[pick % len(open_calls)]
            asked.append(call_id)
            j.add(ev.ToolApprovalRequested(call_id=call_id), correlation_id=corr)
        elif op in ("approve", "reject") and asked:
            call_id = asked.pop(pick % len(asked))
            payload: ev.Event = (
                ev.ToolApproved(call_id=call_id)
                if op == "approve"
                else ev.ToolRejected(call_id=call_id)
            )
            j.add(payload, correlation_id=corr)
        elif op == "end" and open_calls:
            call_id = open_calls.pop(pick % len(open_calls))
            terminal = (
                ev.ToolCompleted(call_id=call_id, name="fs.read", result={"n": pick}),
                ev.ToolFailed(call_id=call_id, name="fs.read", reason={"code": "timeout"}),
                ev.ToolCancelled(call_id=call_id, name="fs.read"),
            )[pick % 3]
            j.add(terminal, correlation_id=corr, after_ms=after)
        elif op == "signal":
            j.add(
                ev.PolicyDenied(tool="fs.read", reason="denied"),
                correlation_id=corr,
                conversation_id=None if pick % 2 else "c1",
            )
        elif op == "finish":
            j.add(ev.LlmCompleted(), correlation_id=corr)
        elif op == "cancel":
            j.add(ev.ConversationCancel(), correlation_id=corr)
        elif op == "resume":
            j.add(ev.ConversationResume(), correlation_id=corr)
    return j


def _all_projections(events: list[Envelope]) -> bytes:
    parts: dict[str, Any] = {key: get_projection(events, "c1", key) for key in PROJECTION_KEYS}
    parts["status"] = conversation_status(events, "c1")
    parts["project"] = project_view(events)
    return canonical_json(parts)


@settings(max_examples=60, deadline=None)
@given(journals(), st.randoms(use_true_random=False))
def test_projections_are_the_same_bytes_whatever_order_the_events_come_in(
    journal: Journal, rng: random.Random
) -> None:
    shuffled = list(journal.events)
    rng.shuffle(shuffled)
    decoded = msgspec.json.decode(msgspec.json.encode(journal.events), type=list[Envelope])
    original = _all_projections(journal.events)
    assert _all_projections(shuffled) == original
    assert _all_projections(decoded) == original


@settings(max_examples=60, deadline=None)
@given(journals())
def test_every_terminal_event_closes_exactly_one_pending_call(journal: Journal) -> None:
    requested = [e.data["call_id"] for e in journal.events if e.type == "tool.requested"]
    terminated = [e.data["call_id"] for e in journal.events if e.type in ev.TERMINAL_TOOL_TYPES]
    pending = [call["call_id"] for call in pending_tool_calls(journal.events, "c1")]
    assert not set(pending) & set(terminated)
    assert len(pending) == len(requested) - len(terminated)
    assert sorted(pending) == sorted(set(requested) - set(terminated))


@settings(max_examples=60, deadline=None)
@given(journals())
def test_the_incremental_llm_context_fold_equals_the_full_fold_after_every_event(
    journal: Journal,
) -> None:
    fold = LlmContextFold()
    seen: list[Envelope] = []
    for event in in_seq_order(journal.events):
        seen.append(event)
        if event.conversation_id == "c1":
            fold.apply(event)
        assert fold.messages() == llm_context(seen, "c1")


def test_the_fold_hands_out_copies_its_state_cannot_be_changed_through() -> None:
    fold = LlmContextFold()
    for event in incident_journal().events:
        if event.conversation_id == "c1":
            fold.apply(event)
    first = fold.messages()
    first[1]["tool_calls"].clear()
    first[0]["content"] = "changed"
    assert fold.messages() == llm_context(incident_journal().events, "c1")
