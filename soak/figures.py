"""The figures of a soak report: nearest-rank latency percentiles and the design's figures.

Plain functions of what the run measured (``soak.harness`` fills the report with them);
what each figure means: ``docs/performance.md``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from fractions import Fraction

from soak.report import LatencyStats

__all__ = [
    "BOUNDARY_KINDS",
    "appends_per_commit",
    "counter_delta",
    "latency_stats",
    "messages_per_turn",
    "overheads",
    "per_live_conversation",
    "per_minute",
    "percentile",
]


def percentile(values: Sequence[float], pct: float) -> float:
    """The nearest-rank ``pct`` percentile: the smallest value with ``pct``% at or below it.

    ``rank = ceil(pct / 100 * n)`` (at least 1) in the sorted values. Raises ``ValueError``
    for no values or ``pct`` outside 0..100.
    """
    if not values:
        raise ValueError("percentile of no values")
    if not 0 <= pct <= 100:
        raise ValueError(f"percentile must be within 0..100, got {pct}")
    ordered = sorted(values)
    rank = math.ceil(Fraction(str(pct)) * len(ordered) / 100)
    return ordered[max(rank, 1) - 1]


def latency_stats(values_ms: Sequence[float]) -> LatencyStats:
    """Summarize latencies (milliseconds, rounded to 0.001); all zero when there are none."""
    if not values_ms:
        return LatencyStats(count=0, min=0.0, max=0.0, avg=0.0, p50=0.0, p95=0.0, p99=0.0)

    def r(x: float) -> float:
        return round(x, 3)

    return LatencyStats(
        count=len(values_ms),
        min=r(min(values_ms)),
        max=r(max(values_ms)),
        avg=r(sum(values_ms) / len(values_ms)),
        p50=r(percentile(values_ms, 50)),
        p95=r(percentile(values_ms, 95)),
        p99=r(percentile(values_ms, 99)),
    )


# --- the design's figures --------------------------------------------------------------

BOUNDARY_KINDS = ("actor_message", "journal_link", "host_link")
"""The counters that are process-boundary messages (``messages_per_turn``)."""


def counter_delta(
    before: Mapping[str, int], after: Mapping[str, int], reading: Mapping[str, int] | None = None
) -> dict[str, int]:
    """``after - before`` per counter, less ``reading`` (what one ``status`` call counts).

    A counter missing from either side is left out; none goes below zero.
    """
    cost = reading or {}
    return {
        kind: max(0, after[kind] - before[kind] - cost.get(kind, 0))
        for kind in after
        if kind in before
    }


def messages_per_turn(delta: Mapping[str, int], turns: int) -> float | None:
    """Process-boundary messages (:data:`BOUNDARY_KINDS`) per turn; None without counters."""
    if not turns or not any(kind in delta for kind in BOUNDARY_KINDS):
        return None
    return round(sum(delta.get(kind, 0) for kind in BOUNDARY_KINDS) / turns, 2)


def appends_per_commit(delta: Mapping[str, int]) -> float | None:
    """Journal appends per commit; None without counters or commits."""
    commits = delta.get("journal_commit", 0)
    if not commits:
        return None
    return round(delta.get("journal_append", 0) / commits, 2)


def per_minute(finished_s: Sequence[float], elapsed_s: float) -> list[int]:
    """Turns finished in each minute since the workload's start.

    ``finished_s``: seconds since the start, one per turn. There are as many minutes as
    ``elapsed_s`` began (more if a turn finished later).
    """
    minutes = max([math.ceil(elapsed_s / 60)] + [math.floor(t / 60) + 1 for t in finished_s])
    counts = [0] * minutes
    for t in finished_s:
        counts[max(0, math.floor(t / 60))] += 1
    return counts


def per_live_conversation(pss_peak: int, pss_start: int, live: int) -> int | None:
    """``(pss_peak - pss_start) / live`` in whole bytes (not below 0); None when none lived."""
    if live <= 0:
        return None
    return max(0, pss_peak - pss_start) // live


def overheads(latency_ms: Sequence[float], model_ms: Sequence[float]) -> list[float]:
    """Each turn's latency minus its model time (pairwise, in milliseconds)."""
    if len(latency_ms) != len(model_ms):
        raise ValueError(f"{len(latency_ms)} latencies but {len(model_ms)} model times")
    return [round(total - model, 3) for total, model in zip(latency_ms, model_ms, strict=True)]
