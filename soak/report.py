"""The soak report's shape: frozen msgspec Structs, encoded as the ``--json`` file.

The run's settings are in ``soak.config``, the figures that fill it in ``soak.figures``, the
goals and ``--compare`` in ``soak.verdict``, the integrity checks that fill
:class:`Integrity` in ``soak.integrity`` and the leak check that fills :class:`LeakCheck` in
``soak.leaks``.
"""

from __future__ import annotations

import msgspec

from soak.config import Scenario, SoakConfig

__all__ = [
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
    "SlowModelSummary",
    "SoakReport",
    "StageCounts",
    "Throughput",
]


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


class CpuPerTurn(msgspec.Struct, frozen=True, kw_only=True):
    """CPU time per finished turn of the measured load (``soak.monitor.CpuClock``).

    At many turns in flight the machine's cores are the limit, so turns/s is about the
    cores over these two figures together; unlike turns/s, neither moves much with the
    machine's other load.
    """

    tree_ms: float
    """User + system CPU of the daemon's process tree (daemon, Journal, hosts, their
    children) over the load, per turn; a process that ended during the load is left out."""
    client_ms: float
    """The harness's own CPU (its client threads, memory sampler) over the load, per turn."""


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
    cpu_ms_per_turn: CpuPerTurn | None = None
    """CPU per finished turn of the measured load, the tree's and the harness's."""
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
