"""Actor mailboxes: atomic frames, no shared lock, writers killed mid-send, a bounded
backlog, threads and descriptors that end with the mailbox, nothing on disk."""

from __future__ import annotations

import gc
import multiprocessing
import os
import queue
import resource
import signal
import threading
import time
from collections.abc import Iterator
from multiprocessing.synchronize import SemLock
from typing import Any

import pytest

from actors.thespian import mailbox
from actors.thespian.mailbox import PIPE_BUF, MailboxFull, MailboxQueue, Overflow

CTX = multiprocessing.get_context("fork")


def _writer(q: MailboxQueue, size: int) -> None:
    payload = bytes(range(256)) * (size // 256 + 1)
    payload = payload[:size]
    n = 0
    while True:
        q.put((os.getpid(), n, payload))
        n += 1


def _wait_for(predicate: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"timed out after {timeout_s} s waiting for {what}"
        time.sleep(0.01)


def _feeders() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "MailboxFeeder"]


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


PAD = b"p" * 100
FILL = 3000
"""Messages of ``(i, PAD)`` that fill a 64 KiB pipe several times over."""


def _fill(q: MailboxQueue) -> None:
    for i in range(FILL):
        q.put((i, PAD))


def _drain(q: MailboxQueue) -> list[int]:
    return [q.get(timeout=5)[0] for _ in range(FILL)]


@pytest.fixture
def bound(monkeypatch: pytest.MonkeyPatch) -> Iterator[int]:
    """A small backlog bound (256 KiB) and a short wait, and no report left over."""
    monkeypatch.setattr(mailbox, "MAX_BACKLOG_BYTES", 256 * 1024)
    monkeypatch.setattr(mailbox, "OVERFLOW_WAIT_S", 0.3)
    mailbox.take_overflows()
    yield 256 * 1024
    mailbox.take_overflows()


def test_small_and_large_messages_arrive_whole_and_in_order() -> None:
    q = MailboxQueue(ctx=CTX)
    chunk = PIPE_BUF - 13  # a chunk's data
    sizes = [0, 10, PIPE_BUF - 100, PIPE_BUF, chunk, chunk + 1, PIPE_BUF * 3, 1 << 20]
    received: list[Any] = []
    reader = threading.Thread(target=lambda: received.extend(q.get(timeout=5) for _ in sizes))
    reader.start()
    for i, size in enumerate(sizes):
        q.put((i, b"x" * size))
    reader.join(10)
    assert [(i, len(b)) for i, b in received] == list(enumerate(sizes))


def _put_large_with_no_file_writes(q: MailboxQueue) -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a file write fails with EFBIG instead
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
    q.put(b"y" * 300_000)
    q.put("after")


def test_a_large_message_needs_no_disk() -> None:
    """No file can be written (``RLIMIT_FSIZE`` 0): messages over 4 KiB still arrive."""
    q = MailboxQueue(ctx=CTX)
    sender = CTX.Process(target=_put_large_with_no_file_writes, args=(q,))
    sender.start()
    try:
        assert q.get(timeout=10) == b"y" * 300_000
        assert q.get(timeout=10) == "after"
    finally:
        sender.join(10)
    assert sender.exitcode == 0


def test_a_full_pipe_queues_frames_in_order_without_blocking_the_sender() -> None:
    q = MailboxQueue(ctx=CTX)
    started = time.monotonic()
    for i in range(5000):  # far more than a 64 KiB pipe holds
        q.put(i)
    assert time.monotonic() - started < 30
    assert [q.get(timeout=5) for _ in range(5000)] == list(range(5000))


def test_the_queue_holds_no_lock_shared_between_processes() -> None:
    q = MailboxQueue(10, ctx=CTX)  # Thespian's bound of 10 messages is not one here
    for i in range(100):
        q.put_nowait(i)
    assert not [name for name, value in vars(q).items() if isinstance(value, SemLock)]
    assert [q.get(timeout=5) for _ in range(100)] == list(range(100))


@pytest.mark.slow
@pytest.mark.parametrize("size", [200, 3000, 20000, 200_000])
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
            if got % 20 == 0:
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


@pytest.mark.slow
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


def _chunks(pid: int, number: int, payload: bytes) -> list[bytes]:
    """The frame bodies (without their length header) of a chunked message."""
    return [frame[4:] for frame in mailbox._frames(payload, pid, number)]


def test_a_writer_that_died_mid_message_leaves_nothing_behind() -> None:
    inbox = mailbox._Inbox()
    dead = CTX.Process(target=os._exit, args=(0,))
    dead.start()
    dead.join()
    half = _chunks(dead.pid or 0, 7, b"a" * 20000)
    assert [inbox.take(body) for body in half[:2]] == [None, None]
    whole = _chunks(os.getpid(), 1, b"b" * 20000)
    assert [inbox.take(body) for body in whole][-1] == b"b" * 20000
    assert inbox.take(half[2]) is None  # the dead writer's rest never completes anything
    inbox.partials[dead.pid or 0].seen -= mailbox.REAP_AFTER_S
    inbox.reap()
    assert set(inbox.partials) == set()


def test_a_reused_pid_starting_a_message_replaces_the_dead_writers_half() -> None:
    inbox = mailbox._Inbox()
    old = _chunks(4242, 1, b"o" * 20000)
    new = _chunks(4242, 1, b"n" * 9000)
    assert inbox.take(old[0]) is None
    assert [inbox.take(body) for body in new] == [None, None, b"n" * 9000]
    assert inbox.take(old[1]) is None
    assert inbox.partials == {}


def test_a_live_writers_half_message_is_kept() -> None:
    inbox = mailbox._Inbox()
    chunks = _chunks(os.getpid(), 3, b"l" * 20000)
    inbox.take(chunks[0])
    inbox.partials[os.getpid()].seen -= mailbox.REAP_AFTER_S
    inbox.reap()
    assert [inbox.take(body) for body in chunks[1:]][-1] == b"l" * 20000


def test_a_mailbox_that_filled_ends_its_thread_and_closes_its_descriptors_when_dropped() -> None:
    before = _open_fds()
    q = MailboxQueue(ctx=CTX)
    _fill(q)
    (feeder,) = _feeders()
    assert _drain(q) == list(range(FILL))
    del q
    gc.collect()
    _wait_for(lambda: not feeder.is_alive(), 5, "the feeder thread to end")
    assert _open_fds() == before


def test_a_mailbox_numbered_above_1024_keeps_working_when_its_pipe_fills() -> None:
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 1200:
        pytest.skip(f"needs 1200 descriptors, RLIMIT_NOFILE is {soft}")
    fillers = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    try:
        q = MailboxQueue(ctx=CTX)
        assert q._writer.fileno() >= 1024
        _fill(q)  # the feeder waits for room: select() cannot watch a descriptor >= 1024
        assert _drain(q) == list(range(FILL))
        q.put("later")
        assert q.get(timeout=5) == "later"
        q.discard()
    finally:
        for fd in fillers:
            os.close(fd)


def test_discarding_a_mailbox_ends_its_thread_and_closes_both_ends() -> None:
    q = MailboxQueue(ctx=CTX)
    _fill(q)  # nobody reads: the feeder waits for room
    (feeder,) = _feeders()
    assert q.backlog_bytes() > 0
    q.discard()
    _wait_for(lambda: not feeder.is_alive(), 5, "the feeder thread to end")
    assert q._reader.closed and q._writer.closed
    assert q.backlog_bytes() == 0
    with pytest.raises(ValueError, match=r"^Queue <.*> is closed$"):
        q.put("late")


def _fill_and_exit(q: MailboxQueue) -> None:
    mailbox.FLUSH_AT_EXIT_S = 0.5
    _fill(q)  # the creator holds the read end and never reads


def test_a_process_whose_backlog_cannot_be_written_still_exits() -> None:
    q = MailboxQueue(ctx=CTX)
    child = CTX.Process(target=_fill_and_exit, args=(q,))
    child.start()
    child.join(10)
    alive = child.is_alive()
    if alive:
        child.kill()
        child.join()
    assert not alive, "a backlog nobody reads kept the process from exiting"
    assert child.exitcode == 0


def _put_and_exit(q: MailboxQueue) -> None:
    q.put("from the child")


def test_a_forked_process_does_not_send_its_parents_backlog_again() -> None:
    q = MailboxQueue(ctx=CTX)
    _fill(q)
    child = CTX.Process(target=_put_and_exit, args=(q,))
    child.start()
    got = [q.get(timeout=5) for _ in range(FILL + 1)]
    child.join(10)
    assert [x[0] for x in got if isinstance(x, tuple)] == list(range(FILL))
    assert got.count("from the child") == 1
    with pytest.raises(queue.Empty):
        q.get(timeout=0.2)


def test_a_stuck_reader_gets_sends_refused_then_cleared(bound: int) -> None:
    q = MailboxQueue(ctx=CTX)
    q.peer = "reader-address"
    block = b"z" * (64 * 1024)
    accepted = 0
    refusals = mailbox.refusals()
    started = time.monotonic()
    with pytest.raises(MailboxFull, match=r"^the mailbox of reader-address has \d+ bytes "):
        while True:
            q.put((accepted, block))
            accepted += 1
    waited = time.monotonic() - started
    assert waited >= 0.3  # the first send over the bound waited for room
    assert mailbox.refusals() == refusals + 1
    (full,) = mailbox.take_overflows()
    assert full == Overflow(
        peer="reader-address",
        phase="full",
        backlog_bytes=full.backlog_bytes,
        limit_bytes=bound,
        refused=1,
        duration_ms=0,
    )
    assert full.backlog_bytes >= bound
    started = time.monotonic()
    with pytest.raises(MailboxFull):
        q.put("refused at once")
    assert time.monotonic() - started < 1.0  # a send that waits for room waits 1 s
    assert mailbox.refusals() == refusals + 2
    assert [q.get(timeout=5)[0] for _ in range(accepted)] == list(range(accepted))
    _wait_for(lambda: q.backlog_bytes() == 0, 5, "the backlog to be written")
    (cleared,) = mailbox.take_overflows()
    assert (cleared.phase, cleared.refused, cleared.limit_bytes) == ("cleared", 2, bound)
    q.put("accepted again")
    assert q.get(timeout=5) == "accepted again"
    q.discard()


def test_a_reader_that_catches_up_in_time_refuses_nothing(bound: int) -> None:
    q = MailboxQueue(ctx=CTX)
    block = b"z" * (64 * 1024)
    for i in range(5):  # 64 KiB in the pipe, the rest waiting: over the bound
        q.put((i, block))
    assert q.backlog_bytes() >= bound
    got: list[int] = []
    reader = threading.Timer(0.05, lambda: got.extend(q.get(timeout=5)[0] for _ in range(6)))
    reader.start()
    refusals = mailbox.refusals()
    q.put((5, block))  # waits for room, which the reader makes
    reader.join(10)
    assert got == list(range(6))
    assert mailbox.refusals() == refusals
    assert mailbox.take_overflows() == []
    q.discard()


def test_a_discarded_mailbox_clears_its_overflow_and_drops_later_sends(bound: int) -> None:
    q = MailboxQueue(ctx=CTX)
    q.peer = "gone"
    with pytest.raises(MailboxFull):
        for _ in range(100):
            q.put(b"z" * (64 * 1024), block=False)
    q._outbox.discard()  # what discard() does to the sending side, keeping put() usable
    q.put("dropped")  # the reader is gone: no error, nothing written
    assert [o.phase for o in mailbox.take_overflows()] == ["full", "cleared"]
    assert q.backlog_bytes() == 0


def test_install_makes_thespian_build_mailbox_queues(monkeypatch: pytest.MonkeyPatch) -> None:
    from thespian.system import multiprocCommon

    # Undone after the test: other tests run bare Thespian in this process.
    monkeypatch.setattr(
        multiprocCommon, "get_multiproc_context", multiprocCommon.get_multiproc_context
    )
    mailbox.install()
    mailbox.install()  # idempotent
    ctx = multiprocCommon.get_multiproc_context({})
    q = ctx.Queue(10)
    assert isinstance(q, MailboxQueue)
