"""Tests for events.incidents and events.report: incident timeline, report, Markdown."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from events import catalog as ev
from events.codecs import canonical_json
from events.envelope import Envelope
from events.incident_html import render_incident_html
from events.incidents import (
    conversation_exists,
    incident_report,
    incident_timeline,
    normalize_limit,
)
from events.report import describe_event, render_incident_markdown
from tests.events.test_projections import (
    Journal,
    approval_journal,
    cancel_journal,
    incident_journal,
    journals,
    started_project,
)

# --- incident timeline ------------------------------------------------------------------


def test_a_started_conversation_exists_and_another_does_not() -> None:
    events = incident_journal().events
    assert (conversation_exists(events, "c1"), conversation_exists(events, "c2")) == (True, False)


def test_timeline_entries_carry_the_envelope_fields_and_their_source() -> None:
    events = incident_journal().events
    entries = incident_timeline(events, "p1", "c1")["entries"]
    assert entries[6] == {
        "seq": 8,
        "event_id": "ev-0008",
        "at": "2024-05-01T12:00:00.059Z",
        "source": "signal",
        "type": "policy.allowed",
        "correlation_id": "corr-1",
        "causation_id": "ev-0006",
        "data": {"tool": "fs.read", "reason": "allowed", "source": "policy", "call_id": "call-1"},
    }
    assert entries[5]["source"] == "conversation"


def test_timeline_merges_events_and_signals_of_the_conversation_only() -> None:
    timeline = incident_timeline(incident_journal().events, "p1", "c1")
    assert [e["seq"] for e in timeline["entries"]] == [
        2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 15, 17, 18, 19
    ]  # fmt: skip
    assert {k: v for k, v in timeline.items() if k != "entries"} == {
        "project_id": "p1",
        "conversation_id": "c1",
        "correlation_id": None,
        "limit": 100,
        "total_entries": 16,
    }


def test_timeline_keeps_the_last_limit_entries() -> None:
    timeline = incident_timeline(incident_journal().events, "p1", "c1", limit=3)
    assert (timeline["limit"], timeline["total_entries"]) == (3, 16)
    assert [e["seq"] for e in timeline["entries"]] == [17, 18, 19]


def test_timeline_limit_is_capped_at_500() -> None:
    j = started_project()
    for n in range(600):
        j.add(ev.AssistantDelta(content=str(n)))
    timeline = incident_timeline(j.events, "p1", "c1", limit=10_000)
    assert (timeline["limit"], timeline["total_entries"], len(timeline["entries"])) == (
        500,
        601,
        500,
    )
    assert timeline["entries"][-1]["seq"] == 602


@pytest.mark.parametrize("limit", [0, -5, True, False, "5", 2.5, None])
def test_an_invalid_limit_becomes_100(limit: object) -> None:
    assert normalize_limit(limit) == 100


def test_the_correlation_filter_keeps_only_that_correlations_entries() -> None:
    j = incident_journal()
    msg = j.add(ev.UserMessage(content="again"), correlation_id="corr-9")
    j.add(ev.LlmStarted(provider="deterministic"), correlation_id="corr-9", cause=msg)
    timeline = incident_timeline(j.events, "p1", "c1", correlation_id="corr-9")
    assert (timeline["correlation_id"], timeline["total_entries"]) == ("corr-9", 2)
    assert [e["type"] for e in timeline["entries"]] == ["user.message", "llm.started"]


def test_a_timeline_of_another_project_is_empty() -> None:
    assert incident_timeline(incident_journal().events, "p2", "c1")["entries"] == []


# --- incident report --------------------------------------------------------------------


@pytest.fixture
def report() -> dict[str, Any]:
    return incident_report(incident_journal().events, "p1", "c1")


def test_the_report_summary_says_error_and_counts_the_turn(report: dict[str, Any]) -> None:
    assert report["summary"] == {
        "status": "error",
        "conversation_status": "idle",
        "event_count": 16,
        "first_seq": 2,
        "last_seq": 19,
        "turn_count": 1,
        "tool_call_count": 2,
    }


def test_the_report_says_what_was_asked(report: dict[str, Any]) -> None:
    assert report["asked"] == [
        {
            "seq": 3,
            "at": "2024-05-01T12:00:00.012Z",
            "correlation_id": "corr-1",
            "content": "fix the build",
        }
    ]


def test_the_causal_chain_follows_causation_links(report: dict[str, Any]) -> None:
    chain = [(n["seq"], n["depth"], n["parent_seq"], n["type"]) for n in report["causal_chain"]]
    assert chain == [
        (2, 0, None, "conversation.started"),
        (3, 0, None, "user.message"),
        (4, 1, 3, "llm.started"),
        (5, 2, 4, "assistant.message"),
        (6, 2, 4, "tool.requested"),
        (8, 3, 6, "policy.allowed"),
        (12, 4, 8, "tool.started"),
        (13, 5, 12, "tool.timeout"),
        (15, 6, 13, "tool.failed"),
        (17, 7, 15, "llm.started"),
        (18, 8, 17, "assistant.message"),
        (19, 8, 17, "llm.completed"),
        (7, 2, 4, "tool.requested"),
        (9, 3, 7, "policy.denied"),
        (11, 4, 9, "tool.failed"),
        (10, 3, 7, "security.sensitive_path_denied"),
    ]


def test_chain_nodes_summarize_their_event(report: dict[str, Any]) -> None:
    summaries = {n["seq"]: n["summary"] for n in report["causal_chain"]}
    assert (summaries[7], summaries[9], summaries[10]) == (
        'fs.write call-2 {"content":"x","path":".env"}',
        "fs.write call-2: sensitive_path_denied (source policy)",
        "call_id=call-2 path=.env tool=fs.write",
    )


def test_the_report_lists_every_tool_call_with_decision_outcome_and_latency(
    report: dict[str, Any],
) -> None:
    assert report["tool_calls"] == [
        {
            "call_id": "call-1",
            "name": "fs.read",
            "requested_seq": 6,
            "decision": "allow",
            "outcome": "failed",
            "code": "timeout",
            "latency_ms": 30017,
            "run_ms": 30000,
            "remote_task_id": None,
        },
        {
            "call_id": "call-2",
            "name": "fs.write",
            "requested_seq": 7,
            "decision": "deny",
            "outcome": "failed",
            "code": "sensitive_path_denied",
            "latency_ms": 9,
            "run_ms": None,
            "remote_task_id": None,
        },
    ]


def test_the_report_lists_denials_failures_timeouts_and_security_signals(
    report: dict[str, Any],
) -> None:
    def seqs(key: str) -> list[int]:
        return [entry["seq"] for entry in report[key]]

    assert {
        key: seqs(key)
        for key in (
            "denials",
            "failures",
            "timeouts",
            "cancellations",
            "security_signals",
            "actor_events",
        )
    } == {
        "denials": [9],
        "failures": [11, 15],
        "timeouts": [13],
        "cancellations": [],
        "security_signals": [10],
        "actor_events": [],
    }


def test_the_first_error_is_the_earliest_denial_failure_timeout_or_crash(
    report: dict[str, Any],
) -> None:
    first = report["first_error"]
    assert (first["seq"], first["type"], first["kind"], first["call_id"]) == (
        9,
        "policy.denied",
        "denial",
        "call-2",
    )


def test_latency_is_measured_per_stage_from_the_events_timestamps(report: dict[str, Any]) -> None:
    assert report["latency"] == {
        "turn": {"count": 1, "min_ms": 30084, "max_ms": 30084, "total_ms": 30084},
        "model_round": {"count": 2, "min_ms": 20, "max_ms": 40, "total_ms": 60},
        "policy": {"count": 2, "min_ms": 4, "max_ms": 7, "total_ms": 11},
        "approval": {"count": 0, "min_ms": None, "max_ms": None, "total_ms": 0},
        "tool_call": {"count": 2, "min_ms": 9, "max_ms": 30017, "total_ms": 30026},
    }


def test_every_stage_is_a_span_with_its_offset_and_latency(report: dict[str, Any]) -> None:
    stages = [
        (s["stage"], s["label"], s["start_seq"], s["end_seq"], s["offset_ms"], s["latency_ms"])
        for s in report["stages"]
    ]
    assert stages == [
        ("turn", '"fix the build"', 3, 19, 10, 30084),
        ("model_round", "round 1 (deterministic)", 4, 5, 12, 40),
        ("policy", "fs.read call-1", 6, 8, 53, 4),
        ("tool_call", "fs.read call-1", 6, 15, 53, 30017),
        ("policy", "fs.write call-2", 7, 9, 54, 7),
        ("tool_call", "fs.write call-2", 7, 11, 54, 9),
        ("model_round", "round 2 (deterministic)", 17, 18, 30073, 20),
    ]
    assert [(s["end_type"], s["correlation_id"]) for s in report["stages"]][3] == (
        "tool.failed",
        "corr-1",
    )


def test_latency_sums_up_the_closed_stages(report: dict[str, Any]) -> None:
    for stage, stats in report["latency"].items():
        spans = [s["latency_ms"] for s in report["stages"] if s["stage"] == stage]
        assert (stats["count"], stats["total_ms"]) == (len(spans), sum(spans))


def test_stages_still_open_have_no_end_and_no_latency() -> None:
    report = incident_report(approval_journal(None).events, "p1", "c1")
    still_open = [(s["stage"], s["end_seq"], s["latency_ms"]) for s in report["stages"]]
    assert [s for s in still_open if s[1] is None] == [
        ("turn", None, None),
        ("tool_call", None, None),
        ("approval", None, None),  # asked after the call was requested
    ]
    assert report["latency"]["approval"]["count"] == 0


def test_chain_nodes_carry_their_time_and_offset(report: dict[str, Any]) -> None:
    node = next(n for n in report["causal_chain"] if n["seq"] == 13)
    assert (node["at"], node["offset_ms"]) == ("2024-05-01T12:00:30.066Z", 30064)


def test_counts_by_type_are_sorted_by_type(report: dict[str, Any]) -> None:
    counts = report["counts_by_type"]
    assert (list(counts) == sorted(counts), counts["tool.failed"], sum(counts.values())) == (
        True,
        2,
        16,
    )


def test_an_approval_flow_measures_the_approval_stage() -> None:
    report = incident_report(approval_journal("approve").events, "p1", "c1")
    assert (report["latency"]["approval"], report["tool_calls"][0]["decision"]) == (
        {"count": 1, "min_ms": 500, "max_ms": 500, "total_ms": 500},
        "ask",
    )
    assert report["summary"]["status"] == "in_progress"


def test_a_rejected_approval_is_a_denial() -> None:
    report = incident_report(approval_journal("reject").events, "p1", "c1")
    assert [(d["type"], d["summary"]) for d in report["denials"]] == [
        ("tool.rejected", "call-3: not now")
    ]


def test_a_cancelled_conversation_reports_its_cancellations() -> None:
    report = incident_report(cancel_journal().events, "p1", "c1")
    assert [(e["seq"], e["type"], e["summary"]) for e in report["cancellations"]] == [
        (7, "conversation.cancel", "user_cancelled"),
        (8, "tool.cancelled", "command.run call-4: conversation_cancelled"),
    ]
    assert (report["summary"]["status"], report["summary"]["conversation_status"]) == (
        "cancelled",
        "cancelled",
    )
    assert report["tool_calls"][0]["code"] == "conversation_cancelled"


def test_actor_crashes_restarts_and_escalations_of_the_conversation_are_reported() -> None:
    j = started_project()
    crashed = j.add(ev.ActorCrashed(actor="conversation:c1", reason="boom", restart_count=1))
    j.add(ev.ActorRestarted(actor="conversation:c1", reason="boom", restart_count=1), cause=crashed)
    j.add(ev.ActorEscalated(actor="conversation:c1", reason="boom", restart_count=4))
    j.add(ev.ActorCrashed(actor="project:p1", reason="other"), conversation_id=None)
    report = incident_report(j.events, "p1", "c1")
    assert [(e["type"], e["summary"]) for e in report["actor_events"]] == [
        ("actor.crashed", "conversation:c1: boom (restart count 1)"),
        ("actor.restarted", "conversation:c1: boom (restart count 1)"),
        ("actor.escalated", "conversation:c1: boom (restart count 4)"),
    ]
    assert (report["first_error"]["kind"], report["first_error"]["seq"]) == ("crash", 3)


def test_a_report_scoped_to_an_unknown_correlation_is_empty() -> None:
    report = incident_report(incident_journal().events, "p1", "c1", correlation_id="corr-none")
    assert (report["summary"]["status"], report["first_error"], report["causal_chain"]) == (
        "empty",
        None,
        [],
    )


def test_a_finished_turn_without_problems_is_ok() -> None:
    j = started_project()
    msg = j.add(ev.UserMessage(content="hi"))
    r1 = j.add(ev.LlmStarted(provider="deterministic"), cause=msg)
    j.add(ev.AssistantMessage(content="Acknowledged: hi"), cause=r1)
    j.add(ev.LlmCompleted(), cause=r1)
    assert incident_report(j.events, "p1", "c1")["summary"]["status"] == "ok"


def test_assistant_deltas_are_left_out_of_the_chain_and_their_children_move_up() -> None:
    j = started_project()
    r1 = j.add(ev.LlmStarted(provider="deterministic"))
    delta = j.add(ev.AssistantDelta(content="he"), cause=r1)
    j.add(ev.AssistantMessage(content="hello"), cause=delta)
    chain = incident_report(j.events, "p1", "c1")["causal_chain"]
    assert [(n["seq"], n["depth"], n["parent_seq"]) for n in chain] == [
        (2, 0, None),
        (3, 0, None),
        (5, 1, 3),
    ]


def test_a_causation_cycle_is_broken_at_its_lowest_seq() -> None:
    j = started_project()
    j.add(ev.AssistantMessage(content="a"))
    j.add(ev.AssistantMessage(content="b"))
    a, b = j.events[2], j.events[3]
    looped = [
        *j.events[:2],
        _with_cause(a, b.event_id),
        _with_cause(b, a.event_id),
    ]
    chain = incident_report(looped, "p1", "c1")["causal_chain"]
    assert [(n["seq"], n["depth"]) for n in chain] == [(2, 0), (3, 0), (4, 1)]


def _with_cause(event: Envelope, cause: str) -> Envelope:
    import msgspec

    return msgspec.structs.replace(event, causation_id=cause)


# --- Markdown ---------------------------------------------------------------------------


def test_the_markdown_report_of_a_simple_turn_is_exactly_this() -> None:
    j = started_project()
    msg = j.add(ev.UserMessage(content="read README.md"))
    r1 = j.add(ev.LlmStarted(provider="deterministic"), cause=msg, after_ms=5)
    req = j.add(
        ev.ToolRequested(call_id="call-1", name="fs.read", args={"path": "README.md"}),
        cause=r1,
        after_ms=7,
    )
    ok = j.add(ev.PolicyAllowed(tool="fs.read", call_id="call-1"), cause=req, after_ms=2)
    done = j.add(
        ev.ToolCompleted(call_id="call-1", name="fs.read", duration_ms=3), cause=ok, after_ms=4
    )
    r2 = j.add(ev.LlmStarted(provider="deterministic", round=2), cause=done)
    j.add(ev.AssistantMessage(content="Tool fs.read completed."), cause=r2, after_ms=3)
    j.add(ev.LlmCompleted(tool_call_count=1), cause=r2)
    markdown = render_incident_markdown(incident_report(j.events, "p1", "c1", "corr-1"))
    assert markdown == EXPECTED_MARKDOWN


EXPECTED_MARKDOWN = """\
# Incident report: p1 / c1

Scope: corr-1.

## Summary

- Status: **ok**
- Conversation status: idle
- Events: 8 (seq 3 to 10)
- Turns: 1, tool calls: 1
- First error: none

## What was asked

- seq 3 · 2024-05-01T12:00:00.003Z · corr-1: "read README.md"

## Causal chain

- seq 3 `user.message` "read README.md"
  - seq 4 `llm.started` round 1 (deterministic)
    - seq 5 `tool.requested` fs.read call-1 {"path":"README.md"}
      - seq 6 `policy.allowed` fs.read call-1: allowed (source policy)
        - seq 7 `tool.completed` fs.read call-1 ok in 3 ms
          - seq 8 `llm.started` round 2 (deterministic)
            - seq 9 `assistant.message` "Tool fs.read completed."
            - seq 10 `llm.completed` stop, 1 tool call(s)

## Tool calls

| seq | call | tool | decision | outcome | code | latency ms |
|---|---|---|---|---|---|---|
| 5 | call-1 | fs.read | allow | completed | — | 6 |

## Denials

None.

## Failures

None.

## Timeouts

None.

## Cancellations

None.

## Security signals

None.

## Actor crashes, restarts and escalations

None.

## Model retries and circuit breaker

None.

## What did the agent change?

None.

## Latency

| stage | count | min ms | max ms | total ms |
|---|---|---|---|---|
| turn | 1 | 23 | 23 | 23 |
| model_round | 2 | 3 | 7 | 10 |
| policy | 1 | 2 | 2 | 2 |
| approval | 0 | — | — | 0 |
| tool_call | 1 | 6 | 6 | 6 |

## Counts by type

| type | count |
|---|---|
| assistant.message | 1 |
| llm.completed | 1 |
| llm.started | 2 |
| policy.allowed | 1 |
| tool.completed | 1 |
| tool.requested | 1 |
| user.message | 1 |
"""


def test_markdown_table_cells_escape_pipes_and_newlines() -> None:
    j = started_project()
    j.add(ev.ToolRequested(call_id="call|1\nx", name="a|b"))
    markdown = render_incident_markdown(incident_report(j.events, "p1", "c1"))
    assert "| 3 | call\\|1 x | a\\|b | — | pending | — | — |" in markdown


def test_long_values_are_clipped_in_summaries() -> None:
    summary = describe_event("user.message", {"content": "x" * 500})
    assert (len(summary), summary[-1]) == (160, "…")


def test_the_markdown_lists_the_first_error_in_the_summary() -> None:
    markdown = render_incident_markdown(incident_report(incident_journal().events, "p1", "c1"))
    assert (
        "- First error: seq 9 · 2024-05-01T12:00:00.063Z · `policy.denied` — "
        "fs.write call-2: sensitive_path_denied (source policy) (denial)\n"
    ) in markdown


# --- properties -------------------------------------------------------------------------


def _report_bytes(events: list[Envelope], correlation_id: str | None) -> tuple[bytes, str]:
    report = incident_report(events, "p1", "c1", correlation_id)
    return canonical_json(report), render_incident_markdown(report)


@settings(max_examples=60, deadline=None)
@given(journals(), st.randoms(use_true_random=False), st.sampled_from([None, "corr-0", "corr-1"]))
def test_a_shuffled_then_replayed_journal_gives_the_same_report_and_timeline(
    journal: Journal, rng: random.Random, correlation_id: str | None
) -> None:
    shuffled = list(journal.events)
    rng.shuffle(shuffled)
    replayed = sorted(shuffled, key=lambda event: event.seq)
    for events in (shuffled, replayed):
        assert _report_bytes(events, correlation_id) == _report_bytes(
            journal.events, correlation_id
        )
        assert canonical_json(
            incident_timeline(events, "p1", "c1", 7, correlation_id)
        ) == canonical_json(incident_timeline(journal.events, "p1", "c1", 7, correlation_id))


@settings(max_examples=60, deadline=None)
@given(journals())
def test_every_shown_event_appears_exactly_once_in_the_causal_chain(journal: Journal) -> None:
    chain = incident_report(journal.events, "p1", "c1")["causal_chain"]
    shown = [e.seq for e in journal.events if e.conversation_id == "c1"]
    assert sorted(node["seq"] for node in chain) == shown


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner),
    max_leaves=5,
)
FIELDS = ("call_id", "name", "args", "reason", "content", "tool", "result", "round", "actor")


@settings(max_examples=80, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(sorted(ev.PAYLOAD_TYPES)),
            st.dictionaries(st.sampled_from(FIELDS), JSON_VALUES, max_size=4),
            st.sampled_from(["corr-0", "corr-1"]),
        ),
        max_size=25,
    )
)
@pytest.mark.slow
def test_reports_and_projections_never_fail_on_odd_payloads(
    specs: list[tuple[str, dict[str, Any], str]],
) -> None:
    from events.project_view import project_view
    from events.projections import PROJECTION_KEYS, get_projection

    j = started_project()
    for kind, data, corr in specs:
        j.add(ev.ConversationStarted(), correlation_id=corr)
        last = j.events.pop()
        j.events.append(
            Envelope(
                **{
                    **{f: getattr(last, f) for f in last.__struct_fields__},
                    "type": kind,
                    "data": data,
                }
            )
        )
    report = incident_report(j.events, "p1", "c1")
    render_incident_markdown(report)
    canonical_json([get_projection(j.events, "c1", key) for key in PROJECTION_KEYS])
    canonical_json(project_view(j.events))
    assert report["summary"]["event_count"] == len(specs) + 1


def test_crashes_of_the_conversation_and_its_shared_actors_are_in_its_incident_views() -> None:
    j = started_project()
    j.add(ev.ActorCrashed(actor="conversation:c1", reason="process exited"), conversation_id=None)
    j.add(ev.ActorRestarted(actor="toolrunner", reason="restarted"), conversation_id=None)
    j.add(ev.ActorCrashed(actor="conversation:c2", reason="process exited"), conversation_id=None)
    j.add(ev.ProjectAssetsLoaded(), conversation_id=None)
    timeline = incident_timeline(j.events, "p1", "c1")
    assert [(e["type"], e["data"].get("actor")) for e in timeline["entries"]] == [
        ("conversation.started", None),
        ("actor.crashed", "conversation:c1"),
        ("actor.restarted", "toolrunner"),
    ]
    report = incident_report(j.events, "p1", "c1")
    assert [e["type"] for e in report["actor_events"]] == ["actor.crashed", "actor.restarted"]


# --- what the agent changed -------------------------------------------------------------


def changes_journal() -> Journal:
    """A conversation with one recovered ``tool.changes`` (capped lists, a quarantine)."""
    j = started_project()
    j.add(
        ev.ToolChanges(
            call_id="call-9",
            created=[{"path": "<b>x</b>.txt", "kind": "file", "size": 6, "sha256": "ab" * 32}],
            modified=[{"path": "link", "kind": "symlink", "target": "/etc/passwd"}],
            deleted=[{"path": "gone.txt", "kind": "gone"}],
            created_count=3,
            modified_count=1,
            deleted_count=1,
            quarantined=[
                {"path": "sub/.git", "reason": "git_dir_created", "kind": "dir", "moved_to": "/q"},
                {"path": "pipe", "reason": "special_file", "kind": "fifo", "moved_to": None},
            ],
            recovered=True,
        )
    )
    return j


def test_the_report_lists_what_each_run_changed_and_quarantined() -> None:
    report = incident_report(changes_journal().events, "p1", "c1")
    assert [(c["seq"], c["call_id"], c["recovered"]) for c in report["changes"]] == [
        (3, "call-9", True)
    ]
    assert report["changes"][0]["created_count"] == 3


def test_the_markdown_answers_what_did_the_agent_change() -> None:
    markdown = render_incident_markdown(incident_report(changes_journal().events, "p1", "c1"))
    section = markdown.split("## What did the agent change?\n\n", 1)[1].split("\n\n## ", 1)[0]
    call = "call-9 (recovered)"
    assert section.splitlines() == [
        "| seq | call | change | path | kind | bytes | sha256 |",
        "|---|---|---|---|---|---|---|",
        f"| 3 | {call} | quarantined: git_dir_created | sub/.git → /q | dir | — | — |",
        f"| 3 | {call} | quarantined: special_file | pipe → removed | fifo | — | — |",
        f"| 3 | {call} | created | <b>x</b>.txt | file | 6 | {'ab' * 32} |",
        f"| 3 | {call} | created | … 2 more | — | — | — |",
        f"| 3 | {call} | modified | link → /etc/passwd | symlink | — | — |",
        f"| 3 | {call} | deleted | gone.txt | gone | — | — |",
    ]


def test_a_recovered_runs_project_level_review_belongs_to_the_conversation_it_names() -> None:
    j = started_project()
    j.add(
        ev.ToolChanges(call_id="call-3", created_count=0, recovered=True, conversation_id="c1"),
        conversation_id=None,
        correlation_id="corr-recovered",
    )
    j.add(
        ev.ToolChanges(call_id="call-4", recovered=True, conversation_id="c2"),
        conversation_id=None,
    )
    report = incident_report(j.events, "p1", "c1")
    assert [c["call_id"] for c in report["changes"]] == ["call-3"]


# --- a delegated (A2A) call ---------------------------------------------------------------


def _delegated_journal(*, cancelled: bool) -> Journal:
    """A turn whose ``a2a.peer.send`` call follows a remote task (cancelled or completed)."""
    j = started_project()
    msg = j.add(ev.UserMessage(content="ask the peer"), correlation_id="corr-a2a")
    r1 = j.add(ev.LlmStarted(provider="deterministic"), correlation_id="corr-a2a", cause=msg)
    name = "a2a.peer.send"
    req = j.add(
        ev.ToolRequested(call_id="call-9", name=name, args={"text": "hi"}),
        correlation_id="corr-a2a",
        cause=r1,
    )
    started = j.add(ev.ToolStarted(call_id="call-9", name=name), correlation_id="corr-a2a")

    def update(state: str, cause: Envelope) -> None:
        payload = ev.A2aTaskUpdated(
            agent="peer", task_id="task-7", context_id="ctx-3", state=state, call_id="call-9"
        )
        j.add(payload, correlation_id="corr-a2a", cause=cause, after_ms=20)

    if cancelled:
        cancel = j.add(ev.ConversationCancel(), correlation_id="corr-cancel", after_ms=50)
        j.add(
            ev.ToolCancelled(call_id="call-9", name=name), correlation_id="corr-a2a", cause=cancel
        )
        for state in ("submitted", "working", "cancel_requested", "canceled"):
            update(state, cancel)  # recorded late, after the call's terminal event
    else:
        for state in ("submitted", "working", "completed"):
            update(state, started)
        j.add(
            ev.ToolCompleted(call_id="call-9", name=name, duration_ms=80),
            correlation_id="corr-a2a",
            cause=req,
        )
    return j


@pytest.mark.parametrize("cancelled", [False, True])
def test_a_delegated_call_is_one_stage_named_with_its_remote_task(cancelled: bool) -> None:
    report = incident_report(_delegated_journal(cancelled=cancelled).events, "p1", "c1")
    [stage] = [s for s in report["stages"] if s["stage"] == "tool_call"]
    assert stage["label"] == "a2a.peer.send call-9 · remote task task-7"
    assert stage["end_type"] == ("tool.cancelled" if cancelled else "tool.completed")
    [row] = report["tool_calls"]
    assert (row["remote_task_id"], row["outcome"]) == (
        "task-7",
        "cancelled" if cancelled else "completed",
    )
    assert "a2a.peer.send call-9 · remote task task-7</div>" in render_incident_html(report)
    summaries = [n["summary"] for n in report["causal_chain"] if n["type"] == "a2a.task_updated"]
    assert summaries[-1] == (
        "peer task task-7: canceled" if cancelled else "peer task task-7: completed"
    )
