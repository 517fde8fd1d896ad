"""The warm-up before the leak check's first reading (issue 19): what it sends, in what order."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest

from soak import steps
from soak.config import SoakConfig
from soak.steps import WARM_UP_MAX_S, RunState, warm_up, warm_up_s
from soak.turns import Turn, TurnResult, WorkloadResult


class _Workload:
    """Records the turns it is given and whether it would go on sending; sends nothing."""

    def __init__(
        self, log: list[Any], keys: list[str], keep_going: Callable[[], bool] | None, run_id: str
    ) -> None:
        self.log = log
        self.keys = keys
        self.keep_going = keep_going
        self.run_id = run_id

    def run(self, turns: Sequence[Turn]) -> WorkloadResult:
        timed = self.keep_going is not None and self.keep_going()
        self.log.append(("round", sorted((t.project_id, t.conversation_id) for t in turns), timed))
        self.keys.extend(t.key for t in turns)
        results = [TurnResult(turn=t, ok=True, latency_ms=1.0) for t in turns]
        return WorkloadResult(
            results=results,
            elapsed_s=0.0,
            stalled=False,
            overloaded=0,
            refused=0,
            onset_inflight=None,
            max_inflight=1,
        )


def _warm_up(monkeypatch: pytest.MonkeyPatch, config: SoakConfig) -> list[Any]:
    log: list[Any] = []
    keys: list[str] = []

    def workload_for(
        _config: SoakConfig,
        _home: str,
        run: RunState,
        keep_going: Callable[[], bool] | None = None,
        *,
        warm_up: str = "",
    ) -> _Workload:
        assert warm_up
        return _Workload(log, keys, keep_going, f"{run.run_id}{warm_up}")

    monkeypatch.setattr(steps, "workload_for", workload_for)
    run = RunState(config, None)
    run.conversations = [("p1", "c0"), ("p1", "c1"), ("p2", "c0")]
    warm_up(config, "home", run, passivated=lambda: log.append("passivated"))
    assert run.failures.items() == []
    # a key sent again is the same turn to the daemon (idempotency): it would wait for it
    assert len(set(keys)) == len(keys)
    return log


def test_a_timed_run_warms_up_then_rehydrates_every_conversation_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The load's first turns rehydrate every conversation: the warm-up's last round does too.

    Without it the Supervisor's one step (relaying 12 rehydrations at once) fell after the
    *before* reading: +1.6 MiB of RSS on a 7 MiB USS, a "leak" that never grew again.
    """
    every = [("p1", "c0"), ("p1", "c1"), ("p2", "c0")]
    assert _warm_up(monkeypatch, SoakConfig(duration_s=600)) == [
        ("round", every, True),  # sends until half the duration is over
        "passivated",
        ("round", every, False),  # one turn each, on passivated conversations
    ]


def test_a_run_of_counted_turns_warms_up_with_one_round_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    every = [("p1", "c0"), ("p1", "c1"), ("p2", "c0")]
    assert _warm_up(monkeypatch, SoakConfig(events=3)) == [("round", every, False)]


def test_the_warm_up_lasts_half_the_duration_up_to_five_minutes() -> None:
    assert warm_up_s(SoakConfig(duration_s=300)) == 150.0
    assert warm_up_s(SoakConfig(duration_s=3600)) == WARM_UP_MAX_S == 300.0
    assert warm_up_s(SoakConfig(duration_s=600)) == 300.0
    assert warm_up_s(SoakConfig(events=3)) == 0.0
