"""The soak report: its shape, nearest-rank latency percentiles and ``--compare``.

Plain data (frozen msgspec Structs, encoded as the ``--json`` file) and plain functions.
The integrity checks that fill :class:`Integrity` are in ``soak.integrity``, the leak check
that fills :class:`LeakCheck` in ``soak.leaks``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any, Literal

import msgspec

__all__ = [
    "COMPARED_METRICS",
    "SLOW_MODEL_GOALS",
    "Backpressure",
    "BaselineSummary",
    "ChaosSummary",
    "EventCounts",
    "Failure",
    "Goal",
    "Integrity",
    "LatencyStats",
    "LeakCheck",
    "Memory",
    "ProcessMemory",
    "Regression",
    "Scenario",
    "SlowModelSummary",
    "SoakConfig",
    "SoakReport",
    "StageCounts",
    "Throughput",
    "appends_per_commit",
    "compare_reports",
    "counter_delta",
    "goal",
    "judge_goals",
    "latency_stats",
    "messages_per_turn",
    "overheads",
    "per_live_conversation",
    "per_minute",
    "percentile",
]

Scenario = Literal["steady", "burst", "chaos", "baseline", "slow-model"]
"""The workload shapes of ``roost soak --scenario``."""


class SoakConfig(msgspec.Struct, frozen=True, kw_only=True):
    """What one soak run does (the command line, normalized)."""

    projects: int = 3
    """Projects started."""
    conversations: int = 4
    """Conversations per project."""
    events: int = 3
    """``user.message`` turns per conversation."""
    concurrency: int = 12
    """Turns in flight at once (worker threads)."""
    timeout_ms: int = 15000
    """Longest a turn may take before it counts as failed."""
    scenario: Scenario = "steady"
    """Workload shape."""
    duration_s: float | None = None
    """Keep sending for this long instead of stopping after ``events`` per conversation."""
    home: str | None = None
    """A running daemon's ``ROOST_HOME`` to use; a temporary one is spawned when null."""
    kills: int = 10
    """``chaos``: the least number of actor processes killed."""
    kill_interval_ms: int = 500
    """``chaos``: pause between kills."""
    idle_passivation_ms: int = 5000
    """The soak projects' ``idle_passivation_ms`` (memory must come back after the run)."""
    threshold_pct: float = 10.0
    """``--compare``: a metric worse by more than this is a regression."""
    seed: int | None = None
    """Seed of ``chaos``'s random choices (a fresh one when null; reported)."""
    connection_per_turn: bool = False
    """Each turn on a new client connection (as the CLI and scripts make them)."""
    model_latency_ms: int = 2000
    """``slow-model``: how long the loopback model server waits before each answer."""


class LatencyStats(msgspec.Struct, frozen=True, kw_only=True):
    """Turn latency in milliseconds; percentiles by nearest rank."""

    count: int
    """Samples."""
    min: float
    """Fastest."""
    max: float
    """Slowest."""
    avg: float
    """Mean."""
    p50: float
    """Median (nearest rank)."""
    p95: float
    """95th percentile (nearest rank)."""
    p99: float
    """99th percentile (nearest rank)."""


class StageCounts(msgspec.Struct, frozen=True, kw_only=True):
    """Projects or conversations: asked for, started, failed to start."""

    requested: int
    """Asked for."""
    started: int
    """Started."""
    failed: int
    """Failed to start."""


class EventCounts(msgspec.Struct, frozen=True, kw_only=True):
    """The ``user.message`` turns."""

    requested: int
    """Turns the workload issued."""
    sent: int
    """Turns acknowledged and finished."""
    failed: int
    """Turns that failed (error or timeout)."""
    latency_ms: LatencyStats
    """Latency of the finished turns, send to end of turn."""


class Throughput(msgspec.Struct, frozen=True, kw_only=True):
    """Rates over the workload's elapsed time."""

    turns_per_s: float
    """Finished turns per second."""
    events_per_s: float
    """Journal events committed during the workload per second."""
    events_committed: int
    """Journal events committed during the workload."""
    per_minute: list[int] = []
    """Turns finished in each minute of the workload (the first entry is its first minute;
    a last, shorter minute is counted as it is)."""


class Memory(msgspec.Struct, frozen=True, kw_only=True):
    """RSS of the daemon's whole process tree (bytes), sampled every ~100 ms."""

    rss_start: int
    """After the projects started, before the conversations."""
    rss_peak: int
    """Highest sample."""
    rss_end: int
    """After the run, once idle conversations were passivated."""
    samples: int = 0
    """Samples taken."""
    processes_start: int = 0
    """Processes in the tree at the start."""
    processes_peak: int = 0
    """Most processes seen."""
    processes_end: int = 0
    """Processes at the end."""
    pss_start: int = 0
    """Proportional set size at the start: shared pages counted once (RSS counts the
    pages forked actor processes share with each other in every one of them)."""
    pss_end: int = 0
    """Proportional set size at the end."""
    pss_peak: int = 0
    """Highest PSS of the tree sampled during the run (every ~2 s, and at the start and
    the end)."""
    pss_per_live_conversation: int | None = None
    """``(pss_peak - pss_start) / conversations started``, in bytes: what each live
    conversation costs the tree (every started conversation is live under the load);
    null when none started."""


class Integrity(msgspec.Struct, frozen=True, kw_only=True):
    """What reading the journal back found."""

    checked_events: int
    """Events read back."""
    lost: int
    """Acknowledged events missing from the journal."""
    duplicated: int
    """Events (or inbound messages) present more than once."""
    unterminated_calls: int
    """``tool.requested`` without exactly one terminal event (or terminals without one)."""
    unfinished_turns: int
    """Inbound messages whose turn never ended."""
    replay_mismatch: int
    """Differences ``verify`` found between live projections and their replay."""
    hash_chain_ok: bool
    """Every project's hash chain holds (checked here and by ``verify``)."""
    problems: list[str] = []
    """The first few problems, readable."""
    unchecked_projects: int = 0
    """Projects whose journal could not be read back (their figures are not counted)."""


class Failure(msgspec.Struct, frozen=True, kw_only=True):
    """Errors of one kind at one stage."""

    stage: str
    """``daemon``, ``project``, ``conversation``, ``turn``, ``journal``, ``cleanup``..."""
    code: str
    """The error code."""
    count: int
    """How many times."""
    message: str
    """One of the messages."""


class Regression(msgspec.Struct, frozen=True, kw_only=True):
    """A metric worse than in the compared report by more than the threshold."""

    metric: str
    """Dotted path in the report."""
    previous: float
    """Value in the earlier report."""
    current: float
    """Value now."""
    change_pct: float
    """Relative change, signed (negative: lower than before)."""


class Backpressure(msgspec.Struct, frozen=True, kw_only=True):
    """``overloaded`` answers and what the harness did about them."""

    overloaded: int
    """Requests refused with ``overloaded``."""
    retries: int
    """Re-sends after a refusal (with backoff)."""
    onset_inflight: int | None
    """Turns the harness had in flight when the first refusal came."""
    refused_connections: int = 0
    """Connections refused with ``EAGAIN`` (the daemon's listen backlog was full)."""
    max_inflight: int
    """Most turns the harness had in flight at once."""


class ChaosSummary(msgspec.Struct, frozen=True, kw_only=True):
    """What ``chaos`` killed."""

    seed: int
    """Seed of the random choices."""
    kills: int
    """Processes killed with SIGKILL."""
    by_role: dict[str, int]
    """Kills per role (``conversation``, ``toolrunner``, ``journal``)."""
    interrupted_turns: int
    """Turns that failed because an actor died under them (tolerated)."""
    identification: str
    """How actor processes were told apart (``actor_pids``, ``names`` or ``tree``)."""
    problems: list[str] = []
    """What the monkey could not do (no target found, no replacement seen)."""
    fatal: str | None = None
    """Set when a killed Journal was not replaced (the run fails)."""
    kill_log: list[str] = []
    """One line per kill: when (since the first), what, how long the replacement took."""


class BaselineSummary(msgspec.Struct, frozen=True, kw_only=True):
    """The bare Thespian + eventsourcing run with Roost's message and append pattern."""

    turns: int
    """Turns replayed."""
    turns_per_s: float
    """Turns per second."""
    events_per_s: float
    """Events appended per second."""
    actor_messages: int
    """Messages sent between actors (each ask is two)."""
    events: int
    """Events appended."""
    batches: int
    """Appends (one transaction each)."""
    elapsed_ms: float
    """Wall time."""
    latency_ms: LatencyStats
    """Per-turn latency."""
    ask_share: float
    """Share of the workers' busy time spent in actor round trips (the rest: appends)."""


class Goal(msgspec.Struct, frozen=True, kw_only=True):
    """A figure the scenario is meant to reach (issue 18), and whether it did."""

    metric: str
    """Dotted path in the report."""
    limit: float
    """The bound."""
    higher_is_better: bool = False
    """``false``: the figure must be at most ``limit``; ``true``: at least."""
    value: float | None
    """The figure measured (null when the run did not produce it)."""
    met: bool
    """Whether ``value`` is within ``limit``."""


class SlowModelSummary(msgspec.Struct, frozen=True, kw_only=True):
    """``slow-model``: many live conversations waiting on a slow model at once."""

    model_latency_ms: int
    """The model server's wait before each answer."""
    live_conversations: int
    """Conversations started (each had its turns in flight at the same time)."""
    model_requests: int
    """Chat-completions requests the model server answered."""
    model_peak_waiting: int = 0
    """Most requests the model server held at once (the turns really waiting together)."""
    start_conversation_ms: LatencyStats
    """``start_conversation`` latency, all of them started at once."""
    overhead_first_turn_ms: LatencyStats
    """``overhead_ms`` of each conversation's first turn (its actor starts under it)."""
    overhead_later_turns_ms: LatencyStats
    """``overhead_ms`` of the turns after the first."""
    goals: list[Goal]
    """Issue 18's goals for this scenario; reported, not part of ``passed``."""
    goals_met: bool
    """Every goal met."""


class ProcessMemory(msgspec.Struct, frozen=True, kw_only=True):
    """One always-on process, before and after the load."""

    name: str
    pid: int
    uss_before: int
    """Bytes, after the warm-up."""
    uss_after: int | None
    """Bytes, after the load and the settle; null when the process was gone by then."""
    rss_before: int = 0
    """Resident bytes (shared pages included), after the warm-up."""
    rss_after: int | None = None
    """Resident bytes, after the load and the settle."""
    growth_pct: float | None
    """USS ``(after - before) / before``, in percent; null when not compared."""
    leaked: bool
    """USS and RSS both grew by more than the limit (of the USS before)."""


class LeakCheck(msgspec.Struct, frozen=True, kw_only=True):
    """The leak check of one run."""

    limit_pct: float
    settle_s: float
    processes: list[ProcessMemory]
    """Each always-on process read before the load, in the order read."""
    load_s: float = 0.0
    """Seconds between the two readings, the settle left out."""
    judged: bool = True
    """Whether a growth beyond the limit fails the run: only after ``soak.leaks``'
    ``MIN_JUDGED_LOAD_S`` of load (a shorter run measures its own warm-up, not a leak)."""


class SoakReport(msgspec.Struct, frozen=True, kw_only=True):
    """Everything one ``roost soak`` run measured and decided."""

    started_at: str
    """UTC start time."""
    elapsed_ms: float
    """The workload's wall time (rates are over this)."""
    total_ms: float
    """The whole run: daemon start, bootstrap, workload, checks, shutdown."""
    scenario: Scenario
    """Workload shape."""
    config: SoakConfig
    """The options of the run."""
    projects: StageCounts
    """Projects."""
    conversations: StageCounts
    """Conversations."""
    events: EventCounts
    """Turns."""
    throughput: Throughput
    """Rates."""
    memory: Memory
    """Daemon tree RSS."""
    integrity: Integrity
    """Journal checks."""
    restarts: int
    """``actor.restarted`` events during the run."""
    crashes: int
    """``actor.crashed`` events during the run."""
    failures: list[Failure]
    """Errors, grouped."""
    backpressure: Backpressure
    """``overloaded`` answers."""
    messages_per_turn: float | None = None
    """Process-boundary messages inside the daemon's tree per finished turn of the measured
    load: actor messages + journal-link frames + host-link frames (``counters``) over
    ``events.sent``; null when the daemon does not report counters."""
    appends_per_commit: float | None = None
    """Journal appends (batches) per commit (transaction) during the measured load."""
    counters: dict[str, int] = {}
    """The daemon's ``status`` counters over the measured load (after - before, the
    reading's own cost taken out)."""
    overhead_ms: LatencyStats | None = None
    """The runtime's own time per finished turn: its latency minus the model's time for
    it, as the model server measured it. ``slow-model`` only (null otherwise: the
    deterministic model's time is not measured apart)."""
    slow_model: SlowModelSummary | None = None
    """``slow-model`` only."""
    leaks: LeakCheck | None = None
    """The always-on processes' USS after the warm-up and after the load (``soak.leaks``);
    null when the run broke off before both readings."""
    chaos: ChaosSummary | None = None
    """``chaos`` only."""
    baseline: BaselineSummary | None = None
    """``baseline`` only."""
    ratio: float | None = None
    """``baseline`` only: Roost turns/s over bare turns/s."""
    compared_with: str | None = None
    """``--compare``: the earlier report's file."""
    regressions: list[Regression] = []
    """``--compare``: metrics worse than before."""
    reasons: list[str] = []
    """Why the run did not pass (empty when it did)."""
    kept: str | None = None
    """A run that did not pass keeps its temporary directory (project roots and, when
    the harness spawned the daemon, its ``home``: journal and logs) here."""
    passed: bool = False
    """Exit status 0 only when true."""


# --- latency ----------------------------------------------------------------------------


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


# --- compare ----------------------------------------------------------------------------

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
