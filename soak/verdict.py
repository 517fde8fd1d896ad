"""Judging a soak report: ``slow-model``'s goals and ``--compare``'s regressions."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from soak.report import Goal, Regression, SoakReport

__all__ = [
    "COMPARED_METRICS",
    "SLOW_MODEL_GOALS",
    "compare_reports",
    "goal",
    "judge_goals",
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
