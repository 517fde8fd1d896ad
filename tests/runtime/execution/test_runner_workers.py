"""The runner's worker threads (``runtime.execution.workers.Workers``): kept, capped, reset."""

from __future__ import annotations

import os
import threading

from runtime.execution.workers import Workers


def _named() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name == "tool-worker"}


def test_a_finished_worker_takes_the_next_call_and_idle_ones_are_capped() -> None:
    workers = Workers(max_idle=2)
    before = _named()
    for _ in range(5):  # one after another: one thread does them all
        done = threading.Event()
        workers.run(done.set)
        assert done.wait(10)
    assert len(_named() - before) == 1
    release = threading.Event()
    started = threading.Semaphore(0)

    def blocked() -> None:
        started.release()
        release.wait(10)

    for _ in range(5):  # at once: a thread each
        workers.run(blocked)
    for _ in range(5):
        assert started.acquire(timeout=10)
    assert len(_named() - before) == 5
    release.set()
    for thread in _named() - before:
        thread.join(0.01)

    def settled() -> bool:
        return len([t for t in _named() - before if t.is_alive()]) == 2

    deadline = threading.Event()
    for _ in range(500):
        if settled():
            break
        deadline.wait(0.02)
    assert settled()  # two wait for work, the others ended


def test_a_forked_process_starts_with_no_workers() -> None:
    workers = Workers()
    done = threading.Event()
    workers.run(done.set)
    assert done.wait(10)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: the parent's idle worker is not here; a new one must start
        ran = threading.Event()
        workers.run(ran.set)
        os.write(write, b"1" if ran.wait(10) else b"0")
        os._exit(0)
    os.close(write)
    assert os.read(read, 1) == b"1"
    os.waitpid(pid, 0)
    os.close(read)
