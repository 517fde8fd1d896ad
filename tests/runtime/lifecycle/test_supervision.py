"""Restart intensity, backoff and escalation."""

from __future__ import annotations

from runtime.lifecycle.supervision import RestartPolicy


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_crashes_within_the_intensity_are_restarted_with_growing_backoff() -> None:
    clock = FakeClock()
    policy = RestartPolicy(3, 5000, base_delay_s=0.1, max_delay_s=1.0, clock=clock)
    decisions = [policy.on_crash("conversation:c1") for _ in range(3)]
    assert [(d.restart, d.restart_count, d.delay_s) for d in decisions] == [
        (True, 1, 0.1),
        (True, 2, 0.2),
        (True, 3, 0.4),
    ]


def test_one_crash_more_than_max_restarts_within_the_period_escalates() -> None:
    clock = FakeClock()
    policy = RestartPolicy(2, 5000, clock=clock)
    policy.on_crash("runner")
    policy.on_crash("runner")
    decision = policy.on_crash("runner")
    assert (decision.restart, decision.restart_count) == (False, 3)


def test_crashes_older_than_the_period_are_forgotten() -> None:
    clock = FakeClock()
    policy = RestartPolicy(1, 1000, clock=clock)
    assert policy.on_crash("x").restart is True
    clock.now += 1.5
    assert policy.on_crash("x").restart is True
    assert policy.on_crash("x").restart is False


def test_zero_max_restarts_escalates_the_first_crash() -> None:
    policy = RestartPolicy(0, 5000, clock=FakeClock())
    assert policy.on_crash("x").restart is False


def test_children_are_counted_separately_and_backoff_is_capped() -> None:
    clock = FakeClock()
    policy = RestartPolicy(10, 60000, base_delay_s=0.5, max_delay_s=1.0, clock=clock)
    for _ in range(4):
        last = policy.on_crash("a")
    assert last.delay_s == 1.0
    assert policy.on_crash("b").restart_count == 1
    policy.forget("a")
    assert policy.on_crash("a").restart_count == 1
