"""The steps of one soak run, which :func:`soak.harness.run_soak` takes in order.

The run's mutable state (:class:`RunState`), the workloads it sends (the warm-up, then the
scenario's), the waits between them, the daemon's counters and the bare baseline.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from runtime.client import Client
from runtime.errors import RoostError
from soak.config import SoakConfig
from soak.monitor import Failures, MemorySampler, wait_until
from soak.report import BaselineSummary
from soak.scenarios import Workload
from soak.turns import TurnResult, WorkloadResult, plan_turns

if TYPE_CHECKING:
    from soak.chaos import ChaosMonkey

__all__ = [
    "WARM_UP_FRACTION",
    "WARM_UP_MAX_S",
    "RunState",
    "bare_baseline",
    "keep_going_while",
    "passivation_wait_s",
    "spread_conversations",
    "status_counters",
    "wait_passivated",
    "warm_up",
    "warm_up_s",
    "workload_for",
]


WARM_UP_FRACTION = 0.5
"""The share of ``--duration-s`` a run's warm-up lasts (up to :data:`WARM_UP_MAX_S`)."""
WARM_UP_MAX_S = 300.0
"""The longest warm-up of a ``--duration-s`` run."""


class RunState:
    """The mutable state of one run while it is under way."""

    def __init__(self, config: SoakConfig, on_progress: Callable[[int, str], None] | None):
        self.config = config
        self.on_progress = on_progress
        self.failures = Failures()
        self.run_id = secrets.token_hex(3)
        self.done = 0
        self._lock = threading.Lock()
        self.projects: list[str] = []
        self.conversations: list[tuple[str, str]] = []

    def note(self, text: str) -> None:
        """Report progress (``text``: what the run is doing now)."""
        if self.on_progress is not None:
            self.on_progress(self.done, text)

    def turn_done(self, _result: TurnResult) -> None:
        """Count one finished turn (called by the workload's workers)."""
        with self._lock:  # workers call this concurrently
            self.done += 1
        self.note("")


def keep_going_while(monkey: ChaosMonkey | None, end_at: float | None) -> Callable[[], bool] | None:
    """Whether a conversation that has sent its planned turns sends one more.

    ``chaos``: until the monkey made its kills (or found the daemon beyond repair);
    ``--duration-s``: until the time is up.
    """
    if monkey is None and end_at is None:
        return None

    def more() -> bool:
        if end_at is not None and time.monotonic() < end_at:
            return True
        return monkey is not None and not monkey.done and monkey.fatal is None

    return more


def spread_conversations(projects: list[str], count: int) -> list[tuple[str, str]]:
    """``count`` conversations (``c0``, ``c1``...) dealt round-robin over ``projects``."""
    if not projects:
        return []
    return [(projects[i % len(projects)], f"c{i // len(projects)}") for i in range(count)]


def status_counters(client: Client) -> dict[str, int]:
    """The daemon's ``status`` counters (``{}`` when it reports none or does not answer)."""
    try:
        found = client.status().get("counters")
    except RoostError:
        return {}
    return {str(k): int(v) for k, v in found.items()} if isinstance(found, dict) else {}


def passivation_wait_s(config: SoakConfig) -> float:
    """How long idle conversations may take to be passivated."""
    return config.idle_passivation_ms / 1000 + 10


def wait_passivated(
    client: Any, projects: list[str], sampler: MemorySampler, processes: int, config: SoakConfig
) -> None:
    """Wait (bounded) until the idle conversations are passivated everywhere.

    The leak check reads memory only so: a host holds its live conversations (their
    events), and gives them back when they passivate; ``processes`` (the tree's size at
    the start) are left, so no process forked for the load is still there either.
    """

    def quiet() -> bool:
        try:  # status asks the hosts; diagnostics would read each project's whole history
            live = client.status().get("live_conversations") or {}
        except RoostError:
            return False
        if any(live.get(project_id) for project_id in projects):
            return False
        return sampler.sample(refresh=True)[1] <= processes

    wait_until(quiet, passivation_wait_s(config), 0.2)


def workload_for(
    config: SoakConfig,
    home: str,
    run: RunState,
    keep_going: Callable[[], bool] | None = None,
    *,
    warm_up: str = "",
) -> Workload:
    """The workload of the run's scenario, or of a warm-up round (``warm_up``: its tag).

    A round's turns are ``RUN_ID`` + tag, so no two rounds send the same correlation id.
    """
    return Workload(
        home,
        concurrency=config.concurrency,
        timeout_ms=config.timeout_ms,
        burst=config.scenario == "burst" and not warm_up,
        keep_going=keep_going,
        on_turn=None if warm_up else run.turn_done,
        stall_s=None,
        run_id=f"{run.run_id}{warm_up}",
        connection_per_turn=config.connection_per_turn,
        start_conversations=config.scenario == "slow-model" and not warm_up,
        tag_turns=config.scenario == "slow-model",
    )


def warm_up_s(config: SoakConfig) -> float:
    """How long a ``--duration-s`` run's warm-up sends turns (0: one round only)."""
    if not config.duration_s:
        return 0.0
    return min(config.duration_s * WARM_UP_FRACTION, WARM_UP_MAX_S)


def warm_up(
    config: SoakConfig,
    home: str,
    run: RunState,
    passivated: Callable[[], None] | None = None,
) -> None:
    """Send the turns that come before the *before* reading of the leak check.

    One per conversation, and with ``--duration-s`` half the duration more (at most
    :data:`WARM_UP_MAX_S`), so what fills up to a bound (each conversation's 256 recent
    turns and closed calls, each host's 4,096 remembered tool calls and redacted ids,
    SQLite's page cache, the endpoint pool) is full first. Then, with ``--duration-s`` and
    ``passivated`` (which waits until every conversation is passivated), one more turn
    per conversation once they all passivated: each is rehydrated from its snapshot and
    the events after it, relayed through the Supervisor, as the load's first turns will
    be; the most a process ever held for that is then in the *before* reading too.
    """
    keep_going = None
    if config.duration_s:
        end_at = time.monotonic() + warm_up_s(config)

        def keep_going() -> bool:
            return time.monotonic() < end_at

    _warm_up_round(config, home, run, keep_going, "w")
    if config.duration_s and passivated is not None:
        passivated()
        _warm_up_round(config, home, run, None, "r")


def _warm_up_round(
    config: SoakConfig,
    home: str,
    run: RunState,
    keep_going: Callable[[], bool] | None,
    tag: str,
) -> None:
    workload = workload_for(config, home, run, keep_going, warm_up=tag)
    for r in workload.run(plan_turns(run.conversations, 1, workload.run_id)).results:
        if not r.ok:
            run.failures.add("warm-up", r.error_code or "error", r.error_message or "")


def bare_baseline(
    config: SoakConfig,
    run: RunState,
    result: WorkloadResult,
    *,
    batch_sizes: list[int] | None,
    committed: int,
    workdir: str,
) -> BaselineSummary | None:
    """Replay the run's pattern on bare Thespian and eventsourcing (``soak.baseline``)."""
    from soak.baseline import BaselineShape, run_baseline

    turns = sum(1 for r in result.results if r.ok)
    if batch_sizes is None:  # not a SQLite journal here: one batch per turn, same events
        per_turn = max(1, round(committed / max(turns, 1)))
        batch_sizes = [per_turn] * turns
    shape = BaselineShape(
        conversations=len(run.conversations),
        turns=turns,
        concurrency=config.concurrency,
        batch_sizes=batch_sizes,
    )
    try:
        return run_baseline(shape, workdir)
    except Exception as e:
        run.failures.add("baseline", type(e).__name__, str(e))
        return None
