"""Restart intensity, backoff and escalation."""

from __future__ import annotations

import os
import signal
import subprocess

import psutil
import pytest

from runtime.guard.sandbox.cgroupfs import join_argv
from runtime.guard.sandbox.freezer import FreezerCgroup, probe_freezer
from runtime.lifecycle.supervision import RestartPolicy, process_exited
from tests.runtime.daemon_helpers import wait_for


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


def _exited_says(pid: int) -> bool:
    """What ``waitid`` alone says: whether the child ``pid`` has exited."""
    return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None


def test_a_child_being_killed_counts_as_exited_before_its_exit_ends() -> None:
    available, detail, via = probe_freezer()
    if via != "cgroup_v1":  # on v2 a fatal signal ends a frozen process at once
        pytest.skip(f"no cgroup v1 freezer here: {detail if not available else via}")
    group = FreezerCgroup.create()
    child = subprocess.Popen([*join_argv(group), "/bin/sleep", "60"])
    try:
        wait_for(lambda: child.pid in group.pids(), 10, "the child to join its cgroup")
        assert group.freeze()
        assert not process_exited(child.pid)  # frozen, not killed: alive
        os.kill(child.pid, signal.SIGKILL)  # frozen, it cannot act on it: its exit waits
        assert not _exited_says(child.pid)
        assert process_exited(child.pid)
    finally:
        group.close()  # thawed, it dies
        child.wait(10)
    assert process_exited(child.pid)


def test_a_stopped_child_with_other_signals_pending_is_alive() -> None:
    child = subprocess.Popen(["/bin/sleep", "60"])
    try:
        os.kill(child.pid, signal.SIGSTOP)
        wait_for(lambda: psutil.Process(child.pid).status() == "stopped", 10, "the stop")
        os.kill(child.pid, signal.SIGTERM)  # pending until it runs again
        assert not process_exited(child.pid)
    finally:
        child.kill()
        child.wait(10)
