"""The report's design figures (issue 18), computed from known inputs, and the slow model."""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from typing import Any

import msgspec
import pytest

from runtime.llm.base import ModelRequest
from runtime.llm.openai import OpenAIAdapter
from soak.cli import _config, build_parser, render_summary
from soak.figures import (
    appends_per_commit,
    counter_delta,
    latency_stats,
    messages_per_turn,
    overheads,
    per_live_conversation,
    per_minute,
)
from soak.model_server import ModelServer, answer_for, tag, tag_of
from soak.monitor import CpuClock, cpu_per_turn
from soak.report import CpuPerTurn, Memory, SlowModelSummary
from soak.steps import spread_conversations
from soak.verdict import SLOW_MODEL_GOALS, decide, goal, judge_goals
from tests.soak.test_report import _report

# --- counters ---------------------------------------------------------------------------


def test_the_counter_delta_takes_one_readings_own_cost_out() -> None:
    before = {"actor_message": 100, "journal_link": 10, "journal_commit": 3}
    after = {"actor_message": 190, "journal_link": 50, "journal_commit": 8, "host_link": 4}
    reading = {"actor_message": 6}
    assert counter_delta(before, after, reading) == {
        "actor_message": 84,
        "journal_link": 40,
        "journal_commit": 5,
    }
    assert counter_delta({"actor_message": 5}, {"actor_message": 7}, {"actor_message": 9}) == {
        "actor_message": 0
    }


def test_messages_per_turn_adds_actor_journal_link_and_host_link_messages() -> None:
    delta = {
        "actor_message": 64,
        "journal_link": 32,
        "host_link": 4,
        "journal_append": 16,
        "journal_commit": 4,
    }
    assert messages_per_turn(delta, 4) == 25.0
    assert messages_per_turn(delta, 3) == 33.33
    assert messages_per_turn(delta, 0) is None
    assert messages_per_turn({}, 4) is None  # a daemon without counters


def test_cpu_per_turn_sums_each_tree_process_since_the_first_reading() -> None:
    before = {10: 1.0, 11: 2.0, 12: 5.0}  # 12 ends during the load: left out
    after = {10: 1.5, 11: 2.25, 13: 0.25}  # 13 starts during the load: counted from zero

    assert cpu_per_turn(before, after, 0.1, 10) == CpuPerTurn(tree_ms=100.0, client_ms=10.0)
    assert cpu_per_turn(before, after, 0.1, 0) is None


def test_the_cpu_clock_reads_this_process_inside_its_block(tmp_path: Any) -> None:
    clock = CpuClock(str(tmp_path))  # no daemon there: an empty tree
    assert clock.per_turn(1) is None  # not measured yet
    with clock:
        end = time.process_time() + 0.05
        while time.process_time() < end:
            pass

    figures = clock.per_turn(10)
    assert figures is not None
    assert figures.tree_ms == 0
    assert figures.client_ms >= 5.0  # 50 ms of CPU over 10 turns


def test_appends_per_commit_is_batches_over_transactions() -> None:
    assert appends_per_commit({"journal_append": 45, "journal_commit": 10}) == 4.5
    assert appends_per_commit({"journal_append": 3, "journal_commit": 0}) is None
    assert appends_per_commit({}) is None


# --- throughput, memory, overhead -------------------------------------------------------


def test_turns_are_counted_in_the_minute_they_finished() -> None:
    finished = [0.5, 59.9, 60.0, 61.0, 150.0]
    assert per_minute(finished, 170.0) == [2, 2, 1]
    assert per_minute([1.0, 2.0], 0.5) == [2]  # a turn ends after the clock read: counted
    assert per_minute([], 125.0) == [0, 0, 0]
    assert per_minute([], 0.0) == []


def test_pss_per_live_conversation_is_the_peaks_growth_over_the_conversations() -> None:
    assert per_live_conversation(pss_peak=1_000_000, pss_start=400_000, live=3) == 200_000
    assert per_live_conversation(pss_peak=300, pss_start=400, live=3) == 0
    assert per_live_conversation(pss_peak=1_000, pss_start=0, live=0) is None


def test_overhead_is_each_turns_latency_minus_its_model_time() -> None:
    assert overheads([4100.0, 4020.5], [4000.0, 4000.25]) == [100.0, 20.25]
    with pytest.raises(ValueError, match=r"^2 latencies but 1 model times$"):
        overheads([1.0, 2.0], [1.0])


def test_a_goal_is_met_within_its_bound_and_never_without_a_value() -> None:
    assert goal("overhead_ms.p99", 50.0, 50.0).met is True
    assert goal("overhead_ms.p99", 50.1, 50.0).met is False
    assert goal("slow_model.live_conversations", 999, 1000, higher_is_better=True).met is False
    assert goal("overhead_ms.p99", None, 50.0).met is False


def _slow(**changes: Any) -> Any:
    summary = SlowModelSummary(
        model_latency_ms=2000,
        live_conversations=1000,
        model_requests=4000,
        start_conversation_ms=latency_stats([4.0, 9.0, 30.0]),
        overhead_first_turn_ms=latency_stats([20.0]),
        overhead_later_turns_ms=latency_stats([10.0]),
        goals=[],
        goals_met=False,
    )
    memory = Memory(
        rss_start=1,
        rss_peak=1,
        rss_end=1,
        pss_start=100_000_000,
        pss_peak=100_000_000 + 1000 * 150_000,
        pss_per_live_conversation=150_000,
    )
    fields: dict[str, Any] = {
        "scenario": "slow-model",
        "slow_model": summary,
        "memory": memory,
        "overhead_ms": latency_stats([10.0, 20.0, 45.0]),
    }
    return _report(**{**fields, **changes})


def test_slow_model_goals_are_judged_from_the_report_and_do_not_decide_passed() -> None:
    report = decide(judge_goals(_slow()))
    assert report.slow_model is not None
    assert [(g.metric, g.value, g.met) for g in report.slow_model.goals] == [
        ("slow_model.live_conversations", 1000.0, True),
        ("overhead_ms.p99", 45.0, True),
        ("memory.pss_per_live_conversation", 150_000.0, True),
        ("slow_model.start_conversation_ms.p50", 9.0, True),
    ]
    assert report.slow_model.goals_met is True
    slow = decide(judge_goals(_slow(overhead_ms=latency_stats([80.0]))))
    assert slow.slow_model is not None and slow.slow_model.goals_met is False
    assert [g.metric for g in slow.slow_model.goals if not g.met] == ["overhead_ms.p99"]
    assert (slow.passed, slow.reasons) == (True, [])  # figures, not a failure
    assert len(SLOW_MODEL_GOALS) == len(slow.slow_model.goals)


def test_the_summary_shows_the_design_figures_and_the_goals() -> None:
    report = decide(
        judge_goals(
            _slow(
                messages_per_turn=25.5,
                appends_per_commit=3.25,
                throughput=msgspec.structs.replace(_report().throughput, per_minute=[60, 58]),
            )
        )
    )
    lines = render_summary(report).splitlines()
    design = "  design         25.5 messages per turn, 3.25 appends per commit; PSS peak "
    assert lines[9].startswith(design)
    assert lines[9].endswith(", 0.143 MiB per live conversation")
    assert lines[10] == "  per minute     60 58 turns"
    assert lines[11].startswith("  overhead ms    p50 20.0  p95 45.0  p99 45.0")
    assert "start_conversation p50 9.0 p99 30.0 ms" in lines[12]
    assert lines[13] == "  goals          issue 18 (all met; reported, not part of PASSED):"
    assert lines[16] == (
        "                 memory.pss_per_live_conversation 0.143 MiB <= 0.2 MiB: met"
    )


def test_the_report_of_a_steady_run_has_the_new_fields_null_where_not_measured() -> None:
    encoded = json.loads(msgspec.json.encode(decide(_report())))
    assert encoded["throughput"]["per_minute"] == []
    assert (encoded["memory"]["pss_peak"], encoded["memory"]["pss_per_live_conversation"]) == (
        0,
        None,
    )
    for field in ("messages_per_turn", "appends_per_commit", "overhead_ms", "slow_model"):
        assert encoded[field] is None, field
    assert encoded["counters"] == {}


# --- the command line -------------------------------------------------------------------


def test_slow_model_has_its_own_defaults_and_an_explicit_option_wins() -> None:
    config = _config(build_parser().parse_args(["--scenario", "slow-model"]))
    assert (config.concurrency, config.events, config.model_latency_ms) == (1000, 2, 2000)
    assert config.timeout_ms == 120_000
    slow = _config(
        build_parser().parse_args(["--scenario", "slow-model", "--model-latency-ms", "60000"])
    )
    assert slow.timeout_ms == 240_000  # room for four model rounds at least
    given = ["--scenario", "slow-model", "--concurrency", "50", "--timeout-ms", "9000"]
    explicit = _config(build_parser().parse_args(given))
    assert (explicit.concurrency, explicit.timeout_ms) == (50, 9000)
    steady = _config(build_parser().parse_args([]))
    assert (steady.concurrency, steady.events, steady.timeout_ms) == (12, 3, 15000)


def test_slow_model_spreads_its_conversations_over_the_projects() -> None:
    assert spread_conversations(["a", "b"], 5) == [
        ("a", "c0"),
        ("b", "c0"),
        ("a", "c1"),
        ("b", "c1"),
        ("a", "c2"),
    ]
    assert spread_conversations([], 5) == []


# --- the slow model ---------------------------------------------------------------------


def test_the_model_asks_for_fs_read_first_and_answers_after_the_tool_result() -> None:
    first = answer_for({"messages": [{"role": "user", "content": "read it"}]})
    assert first["tool_calls"][0]["function"] == {
        "name": "fs__read",
        "arguments": '{"path": "README.md"}',
    }
    tool = {"role": "tool", "tool_call_id": "call_0", "content": "text"}
    assert answer_for({"messages": [{"role": "user", "content": "x"}, tool]}) == {
        "role": "assistant",
        "content": "Read README.md.",
    }


def test_a_request_is_named_by_the_tag_in_its_last_user_message() -> None:
    messages = [
        {"role": "user", "content": f"first {tag('soak-a-0')}"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": f"second {tag('soak-a-1')}"},
        {"role": "tool", "content": "[soak:not-this]"},
    ]
    assert tag_of({"messages": messages}) == "soak-a-1"
    assert tag_of({"messages": [{"role": "user", "content": "untagged"}]}) is None


def _ask(adapter: OpenAIAdapter, *messages: dict[str, Any]) -> Any:
    tools = [{"name": "fs.read", "description": "read", "input_schema": {"type": "object"}}]
    return adapter.complete(ModelRequest(messages=list(messages), tools=tools, timeout_s=60.0))


def test_the_openai_adapter_runs_a_turns_two_rounds_against_the_slow_model() -> None:
    user = {"role": "user", "content": f"read README.md {tag('t1')}"}
    with ModelServer(latency_ms=50) as server:
        adapter = OpenAIAdapter(base_url=server.base_url)
        first = _ask(adapter, user)
        call = {"id": "call_0", "name": "fs.read", "args": {"path": "README.md"}}
        result = {
            "role": "tool",
            "tool_call_id": "call_0",
            "name": "fs.read",
            "status": "ok",
            "content": "# Soak project",
        }
        second = _ask(
            adapter, user, {"role": "assistant", "content": None, "tool_calls": [call]}, result
        )
        model_ms = server.model_ms("t1")
        assert server.requests == 2
    assert [(c.name, c.args) for c in first.tool_calls] == [("fs.read", {"path": "README.md"})]
    assert (second.text, second.tool_calls, second.finish_reason) == ("Read README.md.", [], "stop")
    assert model_ms is not None and model_ms >= 2 * 50  # both rounds waited
    assert server.model_ms("never-asked") is None


def test_the_slow_model_holds_many_requests_at_once_on_one_thread() -> None:
    with ModelServer(latency_ms=2000) as server:
        before = set(threading.enumerate())
        body = json.dumps({"messages": [{"role": "user", "content": "x"}]}).encode()
        answers: list[int] = []

        def post() -> None:
            request = urllib.request.Request(
                server.base_url + "/chat/completions", data=body, method="POST"
            )
            with urllib.request.urlopen(request, timeout=60) as response:
                answers.append(response.status)

        clients = [threading.Thread(target=post) for _ in range(60)]
        for client in clients:
            client.start()
        deadline = time.monotonic() + 60
        while server.waiting < 10 and time.monotonic() < deadline:
            time.sleep(0.01)
        during = set(threading.enumerate()) - before - set(clients)
        waiting = server.waiting
        for client in clients:
            client.join(60)
    assert waiting >= 10
    assert during == set()  # no thread per request
    assert answers == [200] * 60
    assert server.requests == 60
