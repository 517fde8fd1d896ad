"""The soak report: nearest-rank percentiles, --compare regressions, the pass decision."""

from __future__ import annotations

import json
from fractions import Fraction
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from soak.cli import main, render_summary
from soak.config import SoakConfig
from soak.figures import latency_stats, percentile
from soak.report import (
    Backpressure,
    ChaosSummary,
    EventCounts,
    Failure,
    Integrity,
    Memory,
    Regression,
    SoakReport,
    StageCounts,
    Throughput,
)
from soak.verdict import compare_reports, decide

# --- percentiles ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pct", "expected"),
    [(5, 15), (30, 20), (40, 20), (50, 35), (100, 50), (0, 15)],
)
def test_percentiles_are_the_nearest_rank_of_the_sorted_values(pct: float, expected: int) -> None:
    assert percentile([35, 20, 50, 15, 40], pct) == expected


def test_p99_of_a_hundred_values_is_the_99th_and_of_a_thousand_the_990th() -> None:
    assert percentile(list(range(1, 101)), 99) == 99
    assert percentile(list(range(1, 1001)), 99) == 990
    assert percentile(list(range(1, 1001)), 99.9) == 999


def test_p95_of_twenty_values_needs_no_rounding_error() -> None:
    # 0.95 * 20 is 19 exactly; floating point would give 19.000000000000004 and rank 20.
    assert percentile(list(range(1, 21)), 95) == 19


def test_a_percentile_of_no_values_is_an_error() -> None:
    with pytest.raises(ValueError, match=r"^percentile of no values$"):
        percentile([], 50)


def test_a_percentile_outside_zero_to_a_hundred_is_an_error() -> None:
    with pytest.raises(ValueError, match=r"^percentile must be within 0\.\.100, got 101$"):
        percentile([1.0], 101)


@settings(max_examples=150)
@given(
    values=st.lists(st.floats(0, 1e6, allow_nan=False), min_size=1, max_size=200),
    pct=st.integers(1, 100),
)
def test_the_nearest_rank_is_the_smallest_value_with_pct_percent_at_or_below(
    values: list[float], pct: int
) -> None:
    result = percentile(values, pct)
    at_or_below = sum(1 for v in values if v <= result)
    below = sum(1 for v in values if v < result)
    assert result in values
    assert at_or_below >= Fraction(pct, 100) * len(values)
    assert below < Fraction(pct, 100) * len(values)


def test_latency_stats_summarize_and_round_to_microseconds() -> None:
    stats = latency_stats([10.0, 30.0, 20.0, 40.12345])
    assert msgspec.to_builtins(stats) == {
        "count": 4,
        "min": 10.0,
        "max": 40.123,
        "avg": 25.031,
        "p50": 20.0,
        "p95": 40.123,
        "p99": 40.123,
    }


def test_latency_stats_of_no_turns_are_zero() -> None:
    assert latency_stats([]) == latency_stats([]).__class__(
        count=0, min=0.0, max=0.0, avg=0.0, p50=0.0, p95=0.0, p99=0.0
    )


# --- compare ----------------------------------------------------------------------------


def _metrics(turns: float, events: float, p99: float, rss: int) -> dict[str, Any]:
    return {
        "throughput": {"turns_per_s": turns, "events_per_s": events},
        "events": {"latency_ms": {"p99": p99}},
        "memory": {"rss_peak": rss},
    }


def test_changes_within_the_threshold_are_not_regressions() -> None:
    before = _metrics(200, 2000, 100, 1000)
    now = _metrics(181, 1810, 109.9, 1099)
    assert compare_reports(now, before, 10) == []


def test_lower_throughput_higher_p99_and_rss_beyond_the_threshold_are_regressions() -> None:
    before = _metrics(200, 2000, 100, 1000)
    now = _metrics(150, 2500, 150, 1200)
    assert compare_reports(now, before, 10) == [
        Regression(metric="throughput.turns_per_s", previous=200, current=150, change_pct=-25.0),
        Regression(metric="events.latency_ms.p99", previous=100, current=150, change_pct=50.0),
        Regression(metric="memory.rss_peak", previous=1000, current=1200, change_pct=20.0),
    ]


def test_improvements_are_never_regressions() -> None:
    assert compare_reports(_metrics(400, 4000, 10, 10), _metrics(200, 2000, 100, 1000), 1) == []


def test_the_threshold_is_a_percentage() -> None:
    before, now = _metrics(200, 2000, 100, 1000), _metrics(200, 2000, 104, 1000)
    assert compare_reports(now, before, 5) == []
    assert [r.metric for r in compare_reports(now, before, 3)] == ["events.latency_ms.p99"]


def test_metrics_missing_or_zero_in_the_earlier_report_are_not_compared() -> None:
    before = {"throughput": {"turns_per_s": 0}, "memory": {}}
    assert compare_reports(_metrics(1, 1, 1e9, 10**12), before, 10) == []


# --- the pass decision ------------------------------------------------------------------


def _report(**changes: Any) -> SoakReport:
    base = SoakReport(
        started_at="2026-11-22T10:00:00.000Z",
        elapsed_ms=1000.0,
        total_ms=5000.0,
        scenario="steady",
        config=SoakConfig(),
        projects=StageCounts(requested=3, started=3, failed=0),
        conversations=StageCounts(requested=12, started=12, failed=0),
        events=EventCounts(requested=36, sent=36, failed=0, latency_ms=latency_stats([1.0])),
        throughput=Throughput(turns_per_s=36.0, events_per_s=400.0, events_committed=400),
        memory=Memory(rss_start=100, rss_peak=200, rss_end=100),
        integrity=Integrity(
            checked_events=414,
            lost=0,
            duplicated=0,
            unterminated_calls=0,
            unfinished_turns=0,
            replay_mismatch=0,
            hash_chain_ok=True,
        ),
        restarts=0,
        crashes=0,
        failures=[],
        backpressure=Backpressure(overloaded=0, retries=0, onset_inflight=None, max_inflight=12),
    )
    return msgspec.structs.replace(base, **changes)


def test_a_clean_run_passes() -> None:
    report = decide(_report())
    assert (report.passed, report.reasons) == (True, [])


def test_a_lost_event_fails_the_run() -> None:
    bad = msgspec.structs.replace(_report().integrity, lost=1)
    report = decide(_report(integrity=bad))
    assert report.passed is False
    assert report.reasons == [
        "integrity: 1 lost, 0 duplicated, 0 unterminated call(s), 0 unfinished turn(s), "
        "0 replay mismatch(es)"
    ]


def test_a_failed_turn_fails_a_steady_run() -> None:
    failure = Failure(stage="turn", code="timeout", count=2, message="too slow")
    report = decide(_report(failures=[failure]))
    assert report.reasons == ["turn: timeout x2: too slow"]


def test_turns_interrupted_by_chaos_are_tolerated_but_too_few_kills_are_not() -> None:
    failure = Failure(stage="turn (chaos)", code="timeout", count=2, message="killed")
    chaos = ChaosSummary(
        seed=1, kills=9, by_role={"journal": 9}, interrupted_turns=2, identification="tree"
    )
    report = decide(_report(scenario="chaos", failures=[failure], chaos=chaos))
    assert report.reasons == ["chaos: 9 kills, fewer than 10"]


def test_a_regression_fails_the_run_and_is_listed() -> None:
    regression = Regression(
        metric="memory.rss_peak", previous=100.0, current=150.0, change_pct=50.0
    )
    report = decide(_report(regressions=[regression]))
    assert report.reasons == ["regression: memory.rss_peak 100 -> 150 (+50.0%)"]


def test_the_summary_names_the_compared_report_and_its_regressions() -> None:
    regression = Regression(metric="memory.rss_peak", previous=1.0, current=2.0, change_pct=100.0)
    report = decide(_report(compared_with="before.json", regressions=[regression]))
    lines = render_summary(report).splitlines()
    assert "  compare        with before.json (threshold 10%): 1 regression(s)" in lines
    assert lines[-1] == "  NOT PASSED     regression: memory.rss_peak 1 -> 2 (+100.0%)"


def test_the_summary_says_passed_and_shows_the_percentiles() -> None:
    text = render_summary(decide(_report()))
    assert text.splitlines()[0] == "roost soak: steady: PASSED (5.0 s in all)"
    assert "  latency ms     p50 1.0  p95 1.0  p99 1.0" in text


# --- the command line -------------------------------------------------------------------


def test_a_bad_option_is_a_usage_error_with_status_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--projects", "0"]) == 2
    assert capsys.readouterr().err == (
        "roost: usage: argument --projects: expected a positive integer, got '0' "
        "(see `roost soak --help`)\n"
    )


def test_an_unreadable_compare_file_is_a_usage_error(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nope.json"
    assert main(["--compare", str(missing)]) == 2
    assert capsys.readouterr().err == (
        f"roost: usage: cannot read --compare {missing}: No such file or directory\n"
    )


def test_the_report_encodes_with_every_field_of_the_spec() -> None:
    encoded = json.loads(msgspec.json.encode(decide(_report())))
    assert {
        "started_at",
        "elapsed_ms",
        "config",
        "projects",
        "conversations",
        "events",
        "throughput",
        "memory",
        "integrity",
        "restarts",
        "failures",
        "passed",
        "scenario",
    } <= set(encoded)
    assert set(encoded["events"]["latency_ms"]) == {
        "count",
        "min",
        "max",
        "avg",
        "p50",
        "p95",
        "p99",
    }
