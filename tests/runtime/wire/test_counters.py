"""The shared counters: per-process rows summed on read, across real forks."""

from __future__ import annotations

import multiprocessing
import subprocess
import sys
import threading

from runtime.wire import counters

CTX = multiprocessing.get_context("fork")


def _count_in_child(kind: counters.Kind, times: int, by: int) -> None:
    for _ in range(times):
        counters.count(kind, by)


def _run_child(kind: counters.Kind, times: int, by: int = 1) -> None:
    child = CTX.Process(target=_count_in_child, args=(kind, times, by))
    child.start()
    child.join(60)
    assert child.exitcode == 0


def test_counts_made_in_forked_children_are_summed_in_the_parent() -> None:
    counters.enable()
    before = counters.snapshot()
    children = [CTX.Process(target=_count_in_child, args=("journal_link", 500, 1)) for _ in "abcd"]
    for child in children:
        child.start()
    for child in children:
        child.join(60)
        assert child.exitcode == 0
    counters.count("journal_commit", 3)
    after = counters.snapshot()
    assert after["journal_link"] - before["journal_link"] == 2000
    assert after["journal_commit"] - before["journal_commit"] == 3
    assert after["actor_message"] == before["actor_message"]
    assert set(after) == set(counters.KINDS)


def test_the_counts_of_exited_children_stay_in_the_sums() -> None:
    counters.enable()
    before = counters.snapshot()["journal_append"]
    for _ in range(counters.ROWS // 256):  # more processes in turn than a row each would need
        _run_child("journal_append", 1, by=7)
    _run_child("journal_append", 10)
    assert counters.snapshot()["journal_append"] - before == 7 * (counters.ROWS // 256) + 10


def test_threads_of_one_process_lose_no_update() -> None:
    counters.enable()
    before = counters.snapshot()["host_link"]

    def add() -> None:
        for _ in range(20_000):
            counters.count("host_link")

    threads = [threading.Thread(target=add) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert counters.snapshot()["host_link"] - before == 80_000


def test_a_process_that_never_enabled_them_counts_nothing() -> None:
    code = (
        "from runtime.wire import counters\n"
        "counters.count('actor_message', 5)\n"
        "print(counters.enabled(), counters.snapshot())\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "False {}"
