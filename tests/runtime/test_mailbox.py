"""Actor mailboxes: atomic frames, no shared write lock, writers killed mid-send."""

from __future__ import annotations

import multiprocessing
import os
import queue
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from actors.thespian import mailbox
from actors.thespian.mailbox import PIPE_BUF, MailboxQueue

CTX = multiprocessing.get_context("fork")


@pytest.fixture(autouse=True)
def _spill_dir(tmp_path: Path) -> Any:
    before = mailbox._state["dir"]
    mailbox._state["dir"] = str(tmp_path)
    yield tmp_path
    mailbox._state["dir"] = before


def _writer(q: MailboxQueue, size: int) -> None:
    payload = bytes(range(256)) * (size // 256 + 1)
    payload = payload[:size]
    n = 0
    while True:
        q.put((os.getpid(), n, payload))
        n += 1


def test_small_and_large_messages_arrive_whole_and_in_order(tmp_path: Path) -> None:
    q = MailboxQueue(ctx=CTX)
    sizes = [0, 10, PIPE_BUF - 100, PIPE_BUF, PIPE_BUF * 3, 1 << 20]
    for i, size in enumerate(sizes):
        q.put((i, b"x" * size))
    got = [q.get(timeout=5) for _ in sizes]
    assert [(i, len(b)) for i, b in got] == list(enumerate(sizes))
    assert list(tmp_path.iterdir()) == []  # every spilled message was read and removed


def test_a_full_pipe_queues_frames_in_order_without_blocking_the_sender() -> None:
    q = MailboxQueue(ctx=CTX)
    started = time.monotonic()
    for i in range(5000):  # far more than a 64 KiB pipe holds
        q.put(i)
    assert time.monotonic() - started < 30
    assert [q.get(timeout=5) for _ in range(5000)] == list(range(5000))


def test_the_write_end_takes_no_lock_shared_between_processes() -> None:
    q = MailboxQueue(ctx=CTX)
    q.put("one")
    # The standard queue would hold q._wlock during the write; here it is never taken,
    # so a writer killed at any moment cannot leave it held.
    assert q._wlock.acquire(block=False)
    q._wlock.release()
    assert q.get(timeout=5) == "one"


@pytest.mark.parametrize("size", [200, 3000, 20000])
def test_writers_sigkilled_mid_send_never_wedge_the_reader(size: int) -> None:
    """Kill writers at random moments; the reader keeps getting whole messages."""
    q = MailboxQueue(ctx=CTX)
    procs = [CTX.Process(target=_writer, args=(q, size), daemon=True) for _ in range(3)]
    for p in procs:
        p.start()
    kills, got = 0, 0
    deadline = time.monotonic() + 60
    try:
        while kills < 30:
            assert time.monotonic() < deadline, f"wedged after {kills} kills, {got} messages"
            try:
                _pid, _n, payload = q.get(timeout=5)
            except queue.Empty:
                pytest.fail(f"no message for 5 s after {kills} kills: the mailbox wedged")
            assert len(payload) == size
            got += 1
            if got % 50 == 0:
                victim = procs[kills % len(procs)]
                os.kill(victim.pid or 0, signal.SIGKILL)
                victim.join()
                procs[kills % len(procs)] = CTX.Process(target=_writer, args=(q, size), daemon=True)
                procs[kills % len(procs)].start()
                kills += 1
    finally:
        for p in procs:
            p.kill()
            p.join()


def test_the_standard_queue_does_wedge_so_the_test_above_can_fail() -> None:
    """The same kills against multiprocessing.Queue leave its write lock held."""
    q: Any = CTX.Queue()
    procs = [CTX.Process(target=_writer, args=(q, 200), daemon=True) for _ in range(3)]
    for p in procs:
        p.start()
    wedged = False
    try:
        for kill in range(400):
            try:
                for _ in range(20):
                    q.get(timeout=2)
            except queue.Empty:
                wedged = True
                break
            victim = procs[kill % 3]
            os.kill(victim.pid or 0, signal.SIGKILL)
            victim.join()
            procs[kill % 3] = CTX.Process(target=_writer, args=(q, 200), daemon=True)
            procs[kill % 3].start()
    finally:
        for p in procs:
            p.kill()
            p.join()
    assert wedged, "400 kills never left the standard queue's lock held"


def test_install_makes_thespian_build_mailbox_queues(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from thespian.system import multiprocCommon

    # Undone after the test: other tests run bare Thespian in this process.
    monkeypatch.setattr(
        multiprocCommon, "get_multiproc_context", multiprocCommon.get_multiproc_context
    )

    directory = tmp_path / "mbox"
    (directory).mkdir()
    (directory / "stale").write_bytes(b"left by a killed writer")
    mailbox.install(str(directory))
    assert oct(directory.stat().st_mode & 0o777) == "0o700"
    assert list(directory.iterdir()) == []
    ctx = multiprocCommon.get_multiproc_context({})
    assert isinstance(ctx.Queue(), MailboxQueue)
