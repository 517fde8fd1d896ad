"""The span-building core (``runtime.telemetry.spans``) and the measures read off it."""

from __future__ import annotations

import random
from datetime import datetime

import pytest

from events import catalog as ev
from events.envelope import Envelope
from events.incidents import incident_report
from runtime.telemetry.measures import restarted_actor, turn_measures
from runtime.telemetry.spans import (
    SpanRecord,
    span_id_of,
    trace_id_of,
    turn_correlations,
    turn_spans,
)
from tests.events.test_projections import approval_journal, incident_journal, started_project


def ns(event: Envelope) -> int:
    return int(datetime.fromisoformat(event.at.replace("Z", "+00:00")).timestamp() * 1000) * 10**6


def by_event(spans: list[SpanRecord], event_id: str, kind: str) -> SpanRecord:
    return next(s for s in spans if s.attributes["roost.event_id"] == event_id and s.kind == kind)


def test_the_trace_id_is_derived_from_the_correlation_id_and_pinned() -> None:
    # pinned: a change of derivation would stop replays matching what was exported before
    assert f"{trace_id_of('corr-1'):032x}" == "ff77653fb806ddf5679fefd1173ec228"
    assert f"{span_id_of('ev-0003', 'turn'):016x}" == "437f2f5771d05eae"
    assert trace_id_of("corr-1") != trace_id_of("corr-2")
    assert span_id_of("ev-0003", "turn") != span_id_of("ev-0003", "commit")
    # the model round was the ``round`` kind before the stages were named once: same ids
    assert f"{span_id_of('ev-0004', 'model_round'):016x}" == "cf43d67b3511704c"


def test_a_turn_is_one_trace_whose_tree_follows_causation() -> None:
    spans = turn_spans(incident_journal().events, "corr-1")
    assert {s.trace_id for s in spans} == {trace_id_of("corr-1")}
    assert [(s.kind, s.attributes["roost.event_id"]) for s in spans] == [
        ("turn", "ev-0003"),
        ("model_round", "ev-0004"),
        ("tool_call", "ev-0006"),
        ("tool_call", "ev-0007"),
        ("policy", "ev-0008"),
        ("policy", "ev-0009"),
        ("tool_run", "ev-0012"),
        ("model_round", "ev-0017"),
        ("commit", "ev-0003"),
    ]
    ids = {(s.kind, s.attributes["roost.event_id"]): s.span_id for s in spans}
    parents = {(s.kind, s.attributes["roost.event_id"]): s.parent_span_id for s in spans}
    assert parents == {
        ("turn", "ev-0003"): None,
        ("model_round", "ev-0004"): ids[("turn", "ev-0003")],
        ("tool_call", "ev-0006"): ids[("model_round", "ev-0004")],
        ("tool_call", "ev-0007"): ids[("model_round", "ev-0004")],
        ("policy", "ev-0008"): ids[("tool_call", "ev-0006")],
        ("policy", "ev-0009"): ids[("tool_call", "ev-0007")],
        ("tool_run", "ev-0012"): ids[("tool_call", "ev-0006")],
        # round 2 was caused by a tool result; it still belongs to the turn
        ("model_round", "ev-0017"): ids[("turn", "ev-0003")],
        ("commit", "ev-0003"): ids[("turn", "ev-0003")],
    }
    assert all(s.span_id == span_id_of(str(s.attributes["roost.event_id"]), s.kind) for s in spans)


def test_spans_carry_the_ids_of_their_events() -> None:
    events = incident_journal().events
    denied = by_event(turn_spans(events, "corr-1"), "ev-0009", "policy")
    assert denied.name == "roost.policy.decision"
    assert denied.attributes == {
        "roost.event_id": "ev-0009",
        "roost.event_type": "policy.denied",
        "roost.seq": 9,
        "roost.correlation_id": "corr-1",
        "roost.causation_id": "ev-0007",
        "roost.conversation_id": "c1",
        "roost.project_id": "p1",
        "roost.policy.decision": "deny",
        "roost.policy.reason": "sensitive_path_denied",
        "roost.policy.source": "policy",
        "roost.tool.name": "fs.write",
        "roost.end_event_id": "ev-0009",
        "roost.end_event_type": "policy.denied",
    }


def test_denials_failures_and_timeouts_make_their_spans_errors() -> None:
    spans = turn_spans(incident_journal().events, "corr-1")
    errors = {(s.kind, s.attributes["roost.event_id"]): s.status_message for s in spans if s.error}
    assert errors == {
        ("tool_call", "ev-0006"): "tool.timeout",
        ("tool_call", "ev-0007"): "policy.denied: sensitive_path_denied",
        ("policy", "ev-0009"): "policy.denied: sensitive_path_denied",
        ("tool_run", "ev-0012"): "tool.timeout",
    }
    assert by_event(spans, "ev-0006", "tool_call").attributes["roost.tool.error_code"] == "timeout"
    assert by_event(spans, "ev-0003", "turn").attributes["roost.turn.outcome"] == "llm.completed"


def test_a_round_ends_where_the_report_says_the_model_answered() -> None:
    j = approval_journal(None)  # llm.started, then tool.requested (no assistant.message yet)
    spans = turn_spans(j.events, "corr-2")
    round_ = next(s for s in spans if s.kind == "model_round")
    assert round_.attributes["roost.end_event_type"] == "tool.requested"
    report = incident_report(j.events, "p1", "c1")
    stage = next(s for s in report["stages"] if s["stage"] == "model_round")
    assert stage["end_type"] == round_.attributes["roost.end_event_type"]


def test_span_times_are_the_events_times() -> None:
    events = {e.event_id: e for e in incident_journal().events}
    spans = turn_spans(events.values(), "corr-1")
    turn = by_event(spans, "ev-0003", "turn")
    assert (turn.start_ns, turn.end_ns) == (ns(events["ev-0003"]), ns(events["ev-0019"]))
    policy = by_event(spans, "ev-0008", "policy")  # from the request to the decision
    assert (policy.start_ns, policy.end_ns) == (ns(events["ev-0006"]), ns(events["ev-0008"]))
    run = by_event(spans, "ev-0012", "tool_run")
    assert (run.start_ns, run.end_ns) == (ns(events["ev-0012"]), ns(events["ev-0015"]))
    assert run.end_ns - run.start_ns == 30_006 * 10**6  # the timeout, a signal, the failure


def test_an_approval_wait_is_a_span_of_its_call() -> None:
    approved = turn_spans(approval_journal("approve").events, "corr-2")
    wait = next(s for s in approved if s.kind == "approval")
    call = next(s for s in approved if s.kind == "tool_call")
    assert (wait.name, wait.parent_span_id) == ("roost.approval.wait", call.span_id)
    assert (wait.attributes["roost.approval.outcome"], wait.error) == ("approved", False)
    assert wait.end_ns - wait.start_ns == 500 * 10**6
    asked = next(s for s in approved if s.kind == "policy")
    assert asked.attributes["roost.policy.decision"] == "ask"
    rejected = next(
        s for s in turn_spans(approval_journal("reject").events, "corr-2") if s.kind == "approval"
    )
    assert (rejected.error, rejected.status_message) == (True, "tool.rejected: not now")


def test_the_spans_after_a_users_approval_stay_in_their_call() -> None:
    j = approval_journal(None)
    approved = j.add(ev.ToolApproved(call_id="call-3"), correlation_id="corr-2", after_ms=700)
    allowed = j.add(
        ev.PolicyAllowed(tool="command.run", reason="approved", source="user", call_id="call-3"),
        correlation_id="corr-2",
        cause=approved,
    )
    started = j.add(
        ev.ToolStarted(call_id="call-3", name="command.run"), correlation_id="corr-2", cause=allowed
    )
    j.add(
        ev.ToolCompleted(call_id="call-3", name="command.run"),
        correlation_id="corr-2",
        cause=started,
    )
    spans = turn_spans(j.events, "corr-2")
    call = next(s for s in spans if s.kind == "tool_call")
    in_call = sorted(
        (s.kind, str(s.attributes["roost.policy.source"]) if s.kind == "policy" else "")
        for s in spans
        if s.parent_span_id == call.span_id
    )
    assert in_call == [("approval", ""), ("policy", "policy"), ("policy", "user"), ("tool_run", "")]
    wait = next(s for s in spans if s.kind == "approval")
    assert wait.end_ns - wait.start_ns == 700 * 10**6
    assert call.attributes["roost.tool.outcome"] == "completed"


def test_an_unfinished_turn_closes_at_its_last_event() -> None:
    spans = turn_spans(approval_journal(None).events, "corr-2")
    turn, wait = spans[0], next(s for s in spans if s.kind == "approval")
    assert turn.attributes["roost.turn.outcome"] == "incomplete"
    assert wait.attributes["roost.approval.outcome"] == "pending"
    assert turn.end_ns == wait.end_ns


def test_the_commit_span_shows_every_committed_event_of_the_turn() -> None:
    events = incident_journal().events
    commit = next(s for s in turn_spans(events, "corr-1") if s.kind == "commit")
    turn_events = [e for e in events if e.correlation_id == "corr-1"]
    assert [m.attributes["roost.seq"] for m in commit.marks] == [e.seq for e in turn_events]
    assert [m.name for m in commit.marks][:2] == ["user.message", "llm.started"]
    assert (
        commit.attributes["roost.journal.first_seq"],
        commit.attributes["roost.journal.last_seq"],
        commit.attributes["roost.journal.event_count"],
        commit.attributes["roost.journal.last_hash"],
    ) == (3, 19, len(turn_events), events[18].hash)


def test_the_same_events_in_any_order_give_the_same_spans() -> None:
    events = incident_journal().events
    shuffled = list(events)
    random.Random(7).shuffle(shuffled)
    assert turn_spans(shuffled, "corr-1") == turn_spans(events, "corr-1")


def test_what_the_turn_commits_after_its_end_is_left_out() -> None:
    j = incident_journal()
    before = turn_spans(j.events, "corr-1")
    j.add(ev.ToolCancelled(call_id="call-1", name="fs.read"))
    assert turn_spans(j.events, "corr-1") == before


def test_no_user_message_means_no_spans() -> None:
    assert turn_spans(incident_journal().events, "corr-sys") == []
    assert turn_spans(started_project().events, "corr-1") == []


def test_turn_correlations_lists_turns_in_order_by_conversation() -> None:
    events = incident_journal().events
    assert turn_correlations(events) == ["corr-1", "corr-x"]
    assert turn_correlations(events, "c2") == ["corr-x"]


def test_a_turn_measures_its_outcome_latency_tool_outcomes_and_denials() -> None:
    spans = turn_spans(incident_journal().events, "corr-1")
    measures = turn_measures(spans)
    assert measures is not None
    assert measures.turn == {"roost.project_id": "p1", "roost.turn.outcome": "llm.completed"}
    assert measures.duration_ms == (spans[0].end_ns - spans[0].start_ns) / 10**6
    assert measures.tool_outcomes == [
        {"roost.tool.name": "fs.read", "roost.tool.outcome": "failed"},
        {"roost.tool.name": "fs.write", "roost.tool.outcome": "failed"},
    ]
    assert measures.denials == [
        {"roost.tool.name": "fs.write", "roost.policy.reason": "sensitive_path_denied"}
    ]
    assert turn_measures([]) is None


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        (ev.ActorRestarted(actor="toolrunner:p1", reason="crash"), "toolrunner"),
        (ev.ActorRestarted(actor="conversation:c1", reason="crash"), "conversation"),
        (ev.ActorCrashed(actor="conversation:c1", reason="crash"), None),
    ],
)
def test_restarts_are_counted_by_actor_kind(payload: ev.Event, expected: str | None) -> None:
    event = started_project().add(payload, conversation_id=None)
    assert restarted_actor(event) == expected
