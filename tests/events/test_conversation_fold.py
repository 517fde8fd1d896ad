"""The one fold of a conversation's status and pending calls, event by event."""

from __future__ import annotations

import pytest

from events import catalog as ev
from events.conversation_fold import CONVERSATION_STATUSES, ConversationFold
from tests.events.test_projections import Journal, started_project


def _fold(j: Journal, orchestration: bool = True) -> ConversationFold:
    return ConversationFold.of(j.events, "c1", orchestration=orchestration)


@pytest.mark.parametrize(
    ("decisions", "phase", "status"),
    [
        ([], "requested", "running"),
        ([ev.ToolApprovalRequested(call_id="k")], "awaiting_approval", "awaiting_approval"),
        ([ev.PolicyAllowed(tool="fs.read", call_id="k")], "allowed", "running"),
        ([ev.PolicyDenied(tool="fs.read", reason="no", call_id="k")], "denied", "running"),
        (
            [ev.ToolApprovalRequested(call_id="k"), ev.ToolApproved(call_id="k")],
            "allowed",
            "running",
        ),
        (
            [ev.ToolApprovalRequested(call_id="k"), ev.ToolRejected(call_id="k")],
            "denied",
            "running",
        ),
        (
            [
                ev.PolicyAllowed(tool="fs.read", call_id="k"),
                ev.ToolStarted(call_id="k", name="fs.read"),
            ],
            "started",
            "running",
        ),
    ],
)
def test_a_call_moves_through_its_phases_and_shows_the_spec_status(
    decisions: list[ev.Event], phase: str, status: str
) -> None:
    j = started_project(orchestration=False)
    requested = j.add(ev.ToolRequested(call_id="k", name="fs.read", args={"path": "a"}))
    last = requested
    for payload in decisions:
        last = j.add(payload)
    fold = _fold(j, orchestration=False)
    call = fold.calls["k"]
    assert (call.phase, call.last_event_id, call.correlation_id) == (
        phase,
        last.event_id,
        "corr-1",
    )
    assert fold.pending_calls() == [
        {
            "call_id": "k",
            "name": "fs.read",
            "args": {"path": "a"},
            "run_mode": "sync",
            "status": status,
            "requested_seq": requested.seq,
        }
    ]
    assert fold.status() == status


def test_a_closed_call_is_not_reopened_by_a_late_or_repeated_request() -> None:
    j = started_project()
    j.add(ev.ToolFailed(call_id="early", name="fs.read", reason={"code": "x"}))
    j.add(ev.ToolRequested(call_id="early", name="fs.read"))
    j.add(ev.ToolRequested(call_id="k", name="fs.read", args={"n": 1}))
    j.add(ev.ToolRequested(call_id="k", name="fs.write", args={"n": 2}))
    j.add(ev.ToolCompleted(call_id="k", name="fs.read"))
    j.add(ev.ToolRequested(call_id="k", name="fs.read"))
    fold = _fold(j)
    assert (fold.calls, fold.status()) == ({}, "idle")


def test_the_first_request_of_a_call_is_the_one_kept() -> None:
    j = started_project()
    j.add(ev.ToolRequested(call_id="k", name="fs.read", args={"n": 1}))
    j.add(ev.ToolRequested(call_id="k", name="fs.write", args={"n": 2}))
    assert [(c["name"], c["args"]) for c in _fold(j).pending_calls()] == [("fs.read", {"n": 1})]


@pytest.mark.parametrize(("orchestration", "status"), [(True, "running"), (False, "idle")])
def test_a_message_opens_a_turn_only_while_the_model_loop_runs(
    orchestration: bool, status: str
) -> None:
    j = started_project(orchestration)
    j.add(ev.UserMessage(content="one"), correlation_id="a")
    j.add(ev.UserMessage(content="two"), correlation_id="b")
    fold = _fold(j, orchestration)
    assert (fold.status(), list(fold.open_turns)) == (
        status,
        ["a", "b"] if orchestration else [],
    )
    assert fold.diagnostics() == {
        "event_count": 3,
        "pending_tool_call_count": 0,
        "last_event_type": "user.message",
        "status": status,
    }


@pytest.mark.parametrize(
    ("closing", "status"),
    [
        (ev.LlmCompleted(), "idle"),
        (ev.LlmFailed(reason="timeout"), "idle"),
        (ev.BudgetExceeded(budget="max_rounds", limit=1, used=1), "idle"),
        (ev.ConversationStopped(), "idle"),
        (ev.ConversationCancel(), "cancelled"),
    ],
)
def test_a_turn_closes_with_its_end_a_stop_or_a_cancel(closing: ev.Event, status: str) -> None:
    j = started_project()
    j.add(ev.UserMessage(content="hi"), correlation_id="a")
    j.add(closing, correlation_id="a")
    fold = _fold(j)
    assert (fold.open_turns, fold.status()) == ({}, status)


def test_a_message_while_cancelled_opens_no_turn_and_resume_does_not_reopen_one() -> None:
    j = started_project()
    j.add(ev.UserMessage(content="before"), correlation_id="a")
    j.add(ev.ConversationCancel(), correlation_id="x")
    j.add(ev.UserMessage(content="during"), correlation_id="b")
    j.add(ev.ConversationResume(), correlation_id="y")
    fold = _fold(j)
    assert (fold.open_turns, fold.status(), fold.cancelled) == ({}, "idle", False)


def test_only_the_conversations_own_events_are_folded_whatever_their_order() -> None:
    j = started_project()
    j.add(ev.UserMessage(content="mine"), correlation_id="a")
    j.add(ev.UserMessage(content="theirs"), conversation_id="c2", correlation_id="z")
    j.add(ev.ToolRequested(call_id="k", name="fs.read"), conversation_id="c2")
    fold = ConversationFold.of(list(reversed(j.events)), "c1")
    assert (fold.event_count, fold.last_seq, list(fold.open_turns), fold.calls) == (
        2,
        3,
        ["a"],
        {},
    )
    assert fold.status() in CONVERSATION_STATUSES


def test_the_pending_view_hands_out_copies_of_the_args() -> None:
    j = started_project()
    j.add(ev.ToolRequested(call_id="k", name="fs.read", args={"path": "a"}))
    fold = _fold(j)
    fold.pending_calls()[0]["args"]["path"] = "changed"
    assert fold.pending_calls()[0]["args"] == {"path": "a"}
