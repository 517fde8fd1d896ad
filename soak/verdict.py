"""Judging a soak report: whether the run passed, ``slow-model``'s goals, ``--compare``.

Light to import (``soak.cli`` loads it for every ``roost soak``): the leak check's reasons
are read from ``soak.leaks`` only when a report is decided.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import msgspec

from soak.report import Failure, Goal, Regression, SoakReport

if TYPE_CHECKING:
    from soak.monitor import Failures
    from soak.turns import TurnResult

__all__ = [
    "CHAOS_TOLERATED",
    "COMPARED_METRICS",
    "SLOW_MODEL_GOALS",
    "compare_reports",
    "decide",
    "goal",
    "judge_goals",
    "turn_failures",
]


def goal(metric: str, value: float | None, limit: float, *, higher_is_better: bool = False) -> Goal:
    """A :class:`Goal`: ``value`` at most ``limit`` (at least, when higher is better)."""
    met = value is not None and (value >= limit if higher_is_better else value <= limit)
    return Goal(metric=metric, limit=limit, higher_is_better=higher_is_better, value=value, met=met)


SLOW_MODEL_GOALS: tuple[tuple[str, float, bool], ...] = (
    ("slow_model.live_conversations", 1000, True),
    ("overhead_ms.p99", 50.0, False),
    ("memory.pss_per_live_conversation", 0.2 * 1024 * 1024, False),
    ("slow_model.start_conversation_ms.p50", 10.0, False),
)
"""Issue 18's goals for ``slow-model`` (metric, bound, whether higher is better): judged
into ``slow_model.goals``, not part of ``passed``."""


def judge_goals(report: SoakReport) -> SoakReport:
    """``report`` with ``slow_model.goals`` judged (:data:`SLOW_MODEL_GOALS`)."""
    if report.slow_model is None:
        return report
    found = msgspec.to_builtins(report)
    goals = [
        goal(metric, _lookup(found, metric), limit, higher_is_better=higher)
        for metric, limit, higher in SLOW_MODEL_GOALS
    ]
    summary = msgspec.structs.replace(
        report.slow_model, goals=goals, goals_met=all(g.met for g in goals)
    )
    return msgspec.structs.replace(report, slow_model=summary)


COMPARED_METRICS: tuple[tuple[str, bool], ...] = (
    ("throughput.turns_per_s", True),
    ("throughput.events_per_s", True),
    ("events.latency_ms.p99", False),
    ("memory.rss_peak", False),
)
"""Metrics ``--compare`` checks, and whether higher is better."""


def _lookup(report: Mapping[str, Any], path: str) -> float | None:
    value: Any = report
    for part in path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def compare_reports(
    current: Mapping[str, Any], previous: Mapping[str, Any], threshold_pct: float = 10.0
) -> list[Regression]:
    """Metrics of ``current`` worse than in ``previous`` by more than ``threshold_pct``%.

    Throughput must not drop, p99 latency and peak RSS must not rise, beyond the
    threshold. A metric missing from either report, or zero before, is not compared.
    """
    out = []
    for metric, higher_is_better in COMPARED_METRICS:
        before, now = _lookup(previous, metric), _lookup(current, metric)
        if before is None or now is None or before == 0:
            continue
        change = (now - before) / before * 100
        worse = -change if higher_is_better else change
        if worse > threshold_pct:
            out.append(
                Regression(metric=metric, previous=before, current=now, change_pct=round(change, 2))
            )
    return out


CHAOS_TOLERATED = frozenset({"timeout", "daemon_unreachable", "internal_error", "journal_error"})
"""Turn errors a ``chaos`` run expects when an actor dies under a turn."""


def turn_failures(
    failures: Failures, results: list[TurnResult], *, tolerate: bool
) -> list[Failure]:
    """Add the failed turns to ``failures`` (``tolerate``: a chaos run's interrupted ones apart)."""
    for r in results:
        if not r.ok:
            stage = "turn (chaos)" if tolerate and r.error_code in CHAOS_TOLERATED else "turn"
            failures.add(stage, r.error_code or "error", r.error_message or "")
    return failures.items()


def decide(report: SoakReport) -> SoakReport:
    """Return ``report`` with ``reasons`` and ``passed`` filled in.

    A run passes when every project and conversation started; no failure other than the
    turns a ``chaos`` kill interrupted; no acknowledged event lost, none duplicated, every
    call terminated once, every projection equal to its replay, every hash chain intact;
    ``chaos`` made at least ``kills`` kills; no always-on process's USS grew by more than
    10% (``soak.leaks``); and ``--compare`` found no regression.
    """
    from soak.leaks import leak_reasons  # psutil and the daemon's modules: only when deciding

    reasons = []
    if report.projects.failed or report.conversations.failed:
        reasons.append(
            f"{report.projects.failed} project(s) and {report.conversations.failed} "
            "conversation(s) failed to start"
        )
    for failure in report.failures:
        if failure.stage != "turn (chaos)":
            reasons.append(f"{failure.stage}: {failure.code} x{failure.count}: {failure.message}")
    if report.events.sent == 0:
        reasons.append("no turn finished")
    i = report.integrity
    if i.lost or i.duplicated or i.unterminated_calls or i.unfinished_turns or i.replay_mismatch:
        reasons.append(
            f"integrity: {i.lost} lost, {i.duplicated} duplicated, {i.unterminated_calls} "
            f"unterminated call(s), {i.unfinished_turns} unfinished turn(s), "
            f"{i.replay_mismatch} replay mismatch(es)"
        )
    if not i.hash_chain_ok:
        reasons.append("integrity: a hash chain does not verify")
    if i.unchecked_projects:
        reasons.append(
            f"integrity: {i.unchecked_projects} project(s) could not be read back; "
            "their integrity is unknown"
        )
    if report.chaos is not None and report.chaos.fatal:
        reasons.append(f"chaos: {report.chaos.fatal}")
    if report.chaos is not None and report.chaos.kills < report.config.kills:
        reasons.append(f"chaos: {report.chaos.kills} kills, fewer than {report.config.kills}")
    if report.scenario == "baseline" and report.baseline is None:
        reasons.append("baseline: the bare run did not complete")
    reasons += leak_reasons(report.leaks)
    for regression in report.regressions:
        reasons.append(
            f"regression: {regression.metric} {regression.previous:g} -> "
            f"{regression.current:g} ({regression.change_pct:+.1f}%)"
        )
    return msgspec.structs.replace(report, reasons=reasons, passed=not reasons)
