"""The journal link's commit window: when a commit waits for more appends, and for how long."""

from __future__ import annotations

from typing import Any

from events import catalog as ev
from events.envelope import NewEvent, new_event
from runtime.journal.commit_window import CommitWindow, gather


def _batch(conversation: str, project: str = "p1") -> list[NewEvent]:
    return [
        new_event(
            ev.UserMessage(content="hi"),
            project_id=project,
            at="2026-11-22T10:00:00.000Z",
            conversation_id=conversation,
            correlation_id="corr-00000000000000000001",
        )
    ]


def _window(active: int, now: float = 100.0) -> CommitWindow:
    window = CommitWindow(target=4, max_wait_s=0.006, gap_s=0.003, active_s=0.25)
    window.note([_batch(f"c{i}") for i in range(active)], now)
    return window


def test_a_lone_conversation_never_waits() -> None:
    window = _window(active=1)
    assert window.wait_s(1, 100.0, 100.0, 100.0) == 0.0


def test_fewer_active_conversations_than_the_target_never_wait() -> None:
    window = _window(active=3)
    assert window.wait_s(1, 100.0, 100.0, 100.0) == 0.0


def test_with_enough_conversations_active_a_commit_waits_for_the_gap_or_the_first_deadline() -> (
    None
):
    window = _window(active=4)
    assert round(window.wait_s(1, 100.0, 100.0, 100.0), 6) == 0.003  # the gap after the last one
    assert round(window.wait_s(2, 100.0, 100.004, 100.004), 6) == 0.002  # the first's deadline
    assert window.wait_s(2, 100.0, 100.001, 100.0045) == 0.0  # nothing came within the gap
    assert window.wait_s(2, 100.0, 100.005, 100.006) == 0.0  # the first waited its most


def test_the_target_in_hand_or_nothing_in_hand_commits_at_once() -> None:
    window = _window(active=8)
    assert window.wait_s(4, 100.0, 100.0, 100.0) == 0.0
    assert window.wait_s(0, 100.0, 100.0, 100.0) == 0.0


def test_conversations_quiet_for_longer_than_active_s_are_forgotten() -> None:
    window = _window(active=4, now=100.0)
    assert window.wait_s(1, 100.2, 100.2, 100.2) > 0
    assert window.wait_s(1, 100.3, 100.3, 100.3) == 0.0
    assert window.seen == {}


def test_the_same_conversation_in_two_projects_counts_twice() -> None:
    window = _window(active=2)
    window.note([_batch("c0", "p2"), _batch("c1", "p2")], 100.0)
    assert window.active(100.0) == 4


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_gather_reads_while_appends_keep_coming_and_stops_at_the_target() -> None:
    window = _window(active=6)
    clock = _Clock()
    arrivals: list[list[Any]] = [["b"], [], ["c", "d"], ["e"]]
    timeouts: list[float] = []

    def read(timeout: float) -> list[Any]:
        timeouts.append(timeout)
        clock.now += 0.001
        return arrivals.pop(0)

    pending = gather(window, ["a"], len, read, clock)
    assert pending == ["a", "b", "c", "d"]  # four in hand: the target
    assert len(timeouts) == 3 and all(t > 0 for t in timeouts)
    assert window.waits == 1


def test_gather_without_a_window_or_with_a_lone_conversation_reads_nothing_more() -> None:
    def read(timeout: float) -> list[Any]:
        raise AssertionError("read more")

    assert gather(None, ["a"], len, read, _Clock()) == ["a"]
    window = _window(active=1)
    assert gather(window, ["a"], len, read, _Clock()) == ["a"]
    assert window.waits == 0


def test_gather_stops_when_nothing_comes_within_the_gap() -> None:
    window = _window(active=6)
    clock = _Clock()

    def read(timeout: float) -> list[Any]:
        clock.now += timeout
        return []

    assert gather(window, ["a"], len, read, clock) == ["a"]
    assert round(clock.now, 9) == 100.003
