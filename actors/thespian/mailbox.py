"""Actor mailboxes: atomic frames, no shared lock, a bounded backlog, nothing on disk.

Thespian's queue transport gives every actor a ``multiprocessing.Queue``. Its writers share
one cross-process lock and write each message as a length header and a payload, so a
writer SIGKILLed inside that write leaves the lock held for ever (every other writer
blocks: the subtree wedges) or half a message in the pipe (the reader blocks mid-frame).
Both happened under ``roost soak --scenario chaos``. :class:`MailboxQueue` replaces it:

- **Atomic frames, no lock.** Every write to the pipe is one frame of at most
  ``PIPE_BUF`` bytes (4096 on Linux). POSIX makes such a write atomic: it is never
  interleaved with another writer's, and a writer killed while it waits for room has
  written nothing. A small message is one frame. A larger one is cut into chunk frames,
  each naming its writer (pid) and message number; the reader reassembles per writer, and
  drops the chunks of a writer that died mid-message (its pid is gone, or reused by a
  process that starts a new message). Nothing goes through the filesystem, so a full or
  missing disk cannot touch actor messages, and no message content is left on disk.
- **The sender writes, a thread only catches up.** A sender writes its frames itself,
  non-blocking. Only when the pipe is full (the reader is behind) do frames go to a
  backlog that a feeder thread writes in order, waiting for room with ``poll`` (any
  descriptor number). Until that backlog is written every later message queues behind it.
  The thread holds the backlog, not the queue, so a queue nobody uses any more is
  collected and its thread ends.
- **A bounded backlog.** A stuck reader must not grow its senders without limit: when a
  sender's backlog for one mailbox reaches :data:`MAX_BACKLOG_BYTES`, a send waits up to
  :data:`OVERFLOW_WAIT_S` for room, then is refused (:class:`MailboxFull`, a
  ``queue.Full``: Thespian dead-letters the message); later sends are refused at once
  until the backlog is back under half the bound. Each such episode is reported twice
  (:class:`Overflow`, ``full`` then ``cleared``): logged at once, and kept for the actor
  to record (:func:`take_overflows`). :func:`refusals` lets a sender tell that its own
  send was refused. Thespian's own bound (10 messages, blocking the sender: two relays
  blocked on each other's full mailbox deadlock) is not used.
- **Closing.** :meth:`MailboxQueue.discard` drops a mailbox whose reader is gone (the
  parent calls it when a child exits, ``actors.thespian.patches``): its backlog is
  dropped, its thread ends and both descriptors are closed. Otherwise the pipe would still
  have a reader — the parent's own copy — and the thread would wait for room for ever.
  A process that exits waits for its backlogs to be written, :data:`FLUSH_AT_EXIT_S` at
  most in all; a forked process starts with none of its parent's.

Messages are what the standard queue carries (pickles, read and written only by the
daemon's own processes); a chunk frame starts with a zero byte, which no pickle does.
:func:`install` makes Thespian create every mailbox this way; it must run before the
actor system starts, in the process that forks the actors.
"""

from __future__ import annotations

import collections
import errno
import itertools
import os
import queue
import select
import struct
import threading
import time
import weakref
from dataclasses import dataclass
from multiprocessing import connection
from multiprocessing.reduction import ForkingPickler
from multiprocessing.util import Finalize
from typing import Any, Literal

from runtime.logging import get_logger
from runtime.wire import counters

__all__ = [
    "FLUSH_AT_EXIT_S",
    "MAX_BACKLOG_BYTES",
    "OVERFLOW_WAIT_S",
    "PIPE_BUF",
    "MailboxFull",
    "MailboxQueue",
    "Overflow",
    "install",
    "refusals",
    "take_overflows",
]

PIPE_BUF = select.PIPE_BUF
"""The largest write the kernel keeps atomic on a pipe."""
MAX_BACKLOG_BYTES = 16 * 1024 * 1024
"""Bytes one sender may have waiting for one mailbox beyond its pipe, before sends wait."""
OVERFLOW_WAIT_S = 1.0
"""How long the first send over the bound waits for room before it is refused."""
FLUSH_AT_EXIT_S = 10.0
"""How long an exiting process waits for its backlogs to be written, in all."""
REAP_AFTER_S = 5.0
"""A half-received message idle this long is dropped if its writer is dead."""
_WAIT_SLICE_S = 0.5  # the feeder waits for room in slices, to notice a discarded mailbox

_HEADER = struct.Struct("!i")  # multiprocessing.Connection's frame header
_CHUNK = struct.Struct("!BIIB")  # 0, writer pid, message number, flags
_CHUNK_DATA = PIPE_BUF - _HEADER.size - _CHUNK.size
_FIRST, _LAST = 1, 2

log = get_logger("roost.mailbox")


class MailboxFull(queue.Full):
    """A send was refused: this sender's backlog for the mailbox is over the bound."""


@dataclass(frozen=True)
class Overflow:
    """One report of a mailbox over its bound, from the sending process's side."""

    peer: Any
    """The reader's address as its creator labelled the mailbox (None when unlabelled)."""
    phase: Literal["full", "cleared"]
    """``full``: sends are being refused; ``cleared``: back under half the bound, or the
    reader is gone and its backlog was dropped."""
    backlog_bytes: int
    """Bytes waiting for the mailbox in this process when reported."""
    limit_bytes: int
    """The bound (:data:`MAX_BACKLOG_BYTES` when it was reached)."""
    refused: int
    """Sends refused so far in this episode."""
    duration_ms: int
    """Time since the episode began."""


_reports: collections.deque[Overflow] = collections.deque(maxlen=256)
_refused = threading.local()


def take_overflows() -> list[Overflow]:
    """The overflow reports of this process since the last call (at most 256 are kept)."""
    taken: list[Overflow] = []
    while True:
        try:
            taken.append(_reports.popleft())
        except IndexError:
            return taken


def refusals() -> int:
    """How many sends of the calling thread were refused so far (compare before/after)."""
    count: int = getattr(_refused, "count", 0)
    return count


def _report(overflow: Overflow) -> None:
    _reports.append(overflow)
    log.warning(
        "mailbox_overflow",
        peer=str(overflow.peer),
        phase=overflow.phase,
        backlog_bytes=overflow.backlog_bytes,
        limit_bytes=overflow.limit_bytes,
        refused=overflow.refused,
        duration_ms=overflow.duration_ms,
    )


def _frames(payload: bytes | memoryview, pid: int, number: int) -> list[bytes]:
    """The frames for one pickled message: itself, or its chunks, each one atomic write."""
    if _HEADER.size + len(payload) <= PIPE_BUF:
        return [_HEADER.pack(len(payload)) + payload]
    view = memoryview(payload)
    total = len(view)
    frames = []
    for start in range(0, total, _CHUNK_DATA):
        part = view[start : start + _CHUNK_DATA]
        flags = (_FIRST if start == 0 else 0) | (_LAST if start + _CHUNK_DATA >= total else 0)
        head = _HEADER.pack(_CHUNK.size + len(part)) + _CHUNK.pack(0, pid, number, flags)
        frames.append(head + part)
    return frames


class _Episode:
    __slots__ = ("refused", "started")

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.refused = 0


class _Outbox:
    """One process's sending side of a mailbox: the backlog and the thread writing it.

    Holds no reference to its queue, so the queue can be collected while a backlog is
    still being written; the write end is closed with the last reference to it (the
    queue's or the thread's), or at once when the mailbox is discarded.
    """

    def __init__(self, writer: connection.Connection, peer: Any) -> None:
        self.writer = writer
        self.fd = writer.fileno()
        self.pid = os.getpid()
        self.peer = peer
        self.numbers = itertools.count()
        # Reentrant: a queue collected while this thread holds the lock closes its outbox here.
        self.lock = threading.RLock()
        self.nonempty = threading.Condition(self.lock)
        self.room = threading.Condition(self.lock)
        self.backlog: collections.deque[list[bytes]] = collections.deque()
        self.bytes = 0
        self.writing = False
        self.closing = False
        self.discarded = False
        self.released = False
        self.thread: threading.Thread | None = None
        self.episode: _Episode | None = None

    # --- sending ---------------------------------------------------------------------

    def send(self, payload: bytes | memoryview, block: bool, timeout: float | None) -> None:
        frames = _frames(payload, self.pid, next(self.numbers) & 0xFFFFFFFF)
        reports: list[Overflow] = []
        try:
            with self.lock:
                if self.discarded or self.released:
                    return  # the reader is gone: the message goes nowhere, as in a closed pipe
                if not self.backlog and not self.writing:
                    sent = self._write_now(frames, reports)
                    if sent == len(frames):
                        return
                    frames = frames[sent:]  # the rest of a message always follows it
                elif self.bytes >= MAX_BACKLOG_BYTES:
                    self._admit(block, timeout, reports)
                    if self.discarded:
                        return
                self.backlog.append(frames)
                self.bytes += sum(map(len, frames))
                if self.thread is None:
                    self._start()
                self.nonempty.notify()
        finally:
            for report in reports:
                _report(report)

    def _write_now(self, frames: list[bytes], reports: list[Overflow]) -> int:
        """Write frames without blocking; how many were written (all if the reader is gone)."""
        for index, frame in enumerate(frames):
            try:
                os.write(self.fd, frame)
            except BlockingIOError:
                return index
            except OSError as e:
                if e.errno != errno.EPIPE:
                    log.error("mailbox_write_failed", peer=str(self.peer), error=str(e))
                report = self.discard_locked()
                if report is not None:
                    reports.append(report)
                return len(frames)
        return len(frames)

    def _admit(self, block: bool, timeout: float | None, reports: list[Overflow]) -> None:
        """Wait for the backlog to go under the bound, or refuse (lock held)."""
        if self.episode is None:
            wait = OVERFLOW_WAIT_S if timeout is None else min(max(timeout, 0.0), OVERFLOW_WAIT_S)
            if block and self.room.wait_for(self._has_room, wait):
                return
            self.episode = _Episode()
            self.episode.refused = 1
            reports.append(self._overflow("full"))
        else:
            self.episode.refused += 1
        _refused.count = refusals() + 1
        raise MailboxFull(
            f"the mailbox of {self.peer} has {self.bytes} bytes waiting in this process "
            f"(bound {MAX_BACKLOG_BYTES}); its reader is not reading"
        )

    def _has_room(self) -> bool:
        return self.bytes < MAX_BACKLOG_BYTES or self.discarded

    def _overflow(self, phase: Literal["full", "cleared"]) -> Overflow:
        episode = self.episode
        assert episode is not None
        return Overflow(
            peer=self.peer,
            phase=phase,
            backlog_bytes=self.bytes,
            limit_bytes=MAX_BACKLOG_BYTES,
            refused=episode.refused,
            duration_ms=int((time.monotonic() - episode.started) * 1000),
        )

    def _start(self) -> None:
        thread = threading.Thread(target=_feed, args=(self,), name="MailboxFeeder", daemon=True)
        self.thread = thread
        thread.start()
        Finalize(thread, _join_at_exit, [weakref.ref(thread)], exitpriority=-5)

    # --- the feeder's side -----------------------------------------------------------

    def next_item(self) -> list[bytes] | None:
        """The next backlog entry to write, or None when the thread should end."""
        with self.lock:
            while not self.backlog and not self.closing and not self.discarded:
                self.nonempty.wait()
            if self.discarded or not self.backlog:
                return None
            self.writing = True
            return self.backlog.popleft()

    def write_waiting(self, frames: list[bytes], poller: Any) -> None:
        """Write ``frames`` in order, waiting for room; stop early if discarded."""
        for frame in frames:
            while not self.discarded:
                try:
                    os.write(self.fd, frame)
                    break
                except BlockingIOError:
                    poller.poll(_WAIT_SLICE_S * 1000)

    def written(self, size: int) -> None:
        """An entry of ``size`` bytes left the backlog (written or dropped)."""
        report = None
        with self.lock:
            self.writing = False
            if not self.discarded:
                self.bytes -= size
            if self.episode is not None and self.bytes < MAX_BACKLOG_BYTES // 2:
                report = self._overflow("cleared")
                self.episode = None
            self.room.notify_all()
        if report is not None:
            _report(report)

    # --- closing ---------------------------------------------------------------------

    def discard(self) -> None:
        """Drop the backlog and every later send; close the write end when no thread uses it."""
        with self.lock:
            report = self.discard_locked()
        if report is not None:
            _report(report)

    def discard_locked(self) -> Overflow | None:
        self.discarded = True
        self.backlog.clear()
        self.bytes = 0
        report = None
        if self.episode is not None:
            report = self._overflow("cleared")
            self.episode = None
        self.nonempty.notify_all()
        self.room.notify_all()
        if self.thread is None:
            self._release()
        return report

    def close(self) -> None:
        """No more sends: the thread writes what waits, then ends.

        The write end is closed with its last reference, as for the standard queue:
        closing it here, at exit, would show a reader thread of this process an end of
        file while it still runs.
        """
        if self.pid != os.getpid():
            return  # a copy inherited by a fork: its lock may be held by a thread gone
        with self.lock:
            self.closing = True
            self.nonempty.notify_all()

    def _release(self) -> None:
        """Close the write end (lock held; only when no thread writes to it)."""
        if not self.released:
            self.released = True
            self.writer.close()

    def thread_ended(self) -> None:
        with self.lock:
            self.backlog.clear()
            self.bytes = 0
            self.room.notify_all()
            if self.discarded:
                self._release()


def _feed(box: _Outbox) -> None:
    """The feeder thread: write the backlog in order until the mailbox closes."""
    poller = select.poll()
    poller.register(box.fd, select.POLLOUT)
    try:
        while (frames := box.next_item()) is not None:
            try:
                box.write_waiting(frames, poller)
            except OSError as e:
                with box.lock:
                    report = None if box.discarded else box.discard_locked()
                if e.errno != errno.EPIPE:
                    log.error("mailbox_write_failed", peer=str(box.peer), error=str(e))
                if report is not None:
                    _report(report)
            except Exception:  # never end silently while senders rely on this thread
                log.exception("mailbox_feeder_error", peer=str(box.peer))
            finally:
                box.written(sum(map(len, frames)))
    finally:
        box.thread_ended()


_exit_deadline: list[float] = []


def _join_at_exit(ref: Any) -> None:
    """At exit: let a feeder write its backlog, all of them within ``FLUSH_AT_EXIT_S``."""
    thread = ref()
    if thread is not None and thread.is_alive():
        if not _exit_deadline:
            _exit_deadline.append(time.monotonic() + FLUSH_AT_EXIT_S)
        thread.join(max(0.0, _exit_deadline[0] - time.monotonic()))


class _Partial:
    __slots__ = ("number", "parts", "seen")

    def __init__(self, number: int, first: bytes) -> None:
        self.number = number
        self.parts = [first]
        self.seen = time.monotonic()


class _Inbox:
    """The reader's side: messages being reassembled from chunks, per writer."""

    def __init__(self) -> None:
        self.partials: dict[int, _Partial] = {}
        self.next_reap = 0.0

    def take(self, body: bytes) -> bytes | None:
        """The message ``body`` completes (itself when not a chunk), or None."""
        if not body or body[0] != 0:
            return body
        _zero, pid, number, flags = _CHUNK.unpack_from(body)
        data = body[_CHUNK.size :]
        if flags & _FIRST:
            partial = _Partial(number, data)  # a pid's unfinished message: its writer died
            self.partials[pid] = partial
        else:
            found = self.partials.get(pid)
            if found is None or found.number != number:
                return None  # the rest of a message whose start was dropped
            partial = found
            partial.parts.append(data)
            partial.seen = time.monotonic()
        if not flags & _LAST:
            return None
        del self.partials[pid]
        return b"".join(partial.parts)

    def reap(self) -> None:
        """Drop half-received messages whose writer died (checked every few seconds)."""
        now = time.monotonic()
        if now < self.next_reap:
            return
        self.next_reap = now + REAP_AFTER_S
        for pid, partial in list(self.partials.items()):
            if now - partial.seen >= REAP_AFTER_S and not _alive(pid):
                del self.partials[pid]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class MailboxQueue:
    """An actor's mailbox: what Thespian uses of ``multiprocessing.Queue``, without its lock.

    ``put`` and ``get`` keep the standard queue's signatures. ``maxsize`` is accepted and
    ignored: the bound is on bytes waiting in each sender (:data:`MAX_BACKLOG_BYTES`),
    not on messages in the pipe. Thespian reads ``_reader`` and ``_writer`` for their
    descriptor numbers. ``peer`` labels the mailbox with its reader's address for
    overflow reports.
    """

    def __init__(self, maxsize: int = 0, *, ctx: Any = None) -> None:
        del maxsize, ctx  # see the class docstring; fork is the only start method used
        self._reader, self._writer = connection.Pipe(duplex=False)
        # The write end's file description is shared by every process that inherits it;
        # each writes through _Outbox, which handles EAGAIN.
        os.set_blocking(self._writer.fileno(), False)
        self._closed = False
        self._peer: Any = None
        self._reset()

    def _reset(self) -> None:
        """Fresh per-process state (at creation, and in a process forked from the creator)."""
        self._pid = os.getpid()
        self._outbox = _Outbox(self._writer, self._peer)
        self._inbox = _Inbox()
        self._rlock = threading.Lock()
        Finalize(self, self._outbox.close, exitpriority=10)

    def _mine(self) -> None:
        if self._pid != os.getpid():
            self._reset()  # a fork: the parent's backlog and locks are the parent's

    @property
    def peer(self) -> Any:
        """The address of the actor that reads this mailbox, when its creator said so."""
        return self._peer

    @peer.setter
    def peer(self, address: Any) -> None:
        self._peer = address
        self._outbox.peer = address

    def put(
        self, obj: Any, block: bool = True, timeout: float | None = None, *, local: bool = False
    ) -> None:
        """Send ``obj``: written at once when the pipe has room, else queued in order.

        Raises :class:`MailboxFull` when this sender's backlog is over the bound. ``local``:
        a process waking its own loop (``actors.hosting``), not a message between processes.
        """
        if self._closed:
            raise ValueError(f"Queue {self!r} is closed")
        self._mine()
        self._outbox.send(ForkingPickler.dumps(obj), block, timeout)
        if not local:
            counters.count("actor_message")  # the soak report's messages_per_turn

    def get(self, block: bool = True, timeout: float | None = None) -> Any:
        """Receive one message; ``queue.Empty`` when none is complete in time."""
        if self._closed:
            raise ValueError(f"Queue {self!r} is closed")
        self._mine()
        deadline = None if block and timeout is None else time.monotonic() + (timeout or 0.0)
        with self._rlock:
            inbox = self._inbox
            while True:
                if inbox.partials:
                    inbox.reap()
                remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
                if not block:
                    remaining = 0.0
                if not self._reader.poll(remaining):
                    raise queue.Empty
                message = inbox.take(self._reader.recv_bytes())
                if message is not None:
                    return ForkingPickler.loads(message)

    def get_nowait(self) -> Any:
        """``get(False)``."""
        return self.get(False)

    def put_nowait(self, obj: Any) -> None:
        """``put(obj, False)``."""
        self.put(obj, False)

    def empty(self) -> bool:
        """Whether nothing is waiting in the pipe (a started message counts as something)."""
        return not self._reader.poll()

    def backlog_bytes(self) -> int:
        """Bytes this process has waiting for the mailbox beyond the pipe."""
        return self._outbox.bytes

    def close(self) -> None:
        """No more sends or receives here; what waits is still written (then the thread ends)."""
        self._closed = True
        self._outbox.close()

    def discard(self) -> None:
        """The reader is gone for good: drop what waits, close both ends here."""
        self._closed = True
        self._mine()
        self._outbox.discard()
        self._reader.close()


def _mailbox_context(ctx: Any) -> Any:
    """A copy of multiprocessing context ``ctx`` whose ``Queue`` is a :class:`MailboxQueue`."""
    base = type(ctx)

    class MailboxContext(base):  # type: ignore[valid-type, misc]
        def Queue(self, maxsize: int = 0) -> MailboxQueue:
            return MailboxQueue(maxsize, ctx=self)

    return MailboxContext()


def install() -> None:
    """Make Thespian's queue transport build every mailbox as a :class:`MailboxQueue`.

    Call before the actor system starts (idempotent).
    """
    from thespian.system import multiprocCommon  # noqa: PLC0415

    original = multiprocCommon.get_multiproc_context
    if getattr(original, "roost_mailbox", False):
        return

    def get_context(capabilities: Any) -> Any:
        ctx = original(capabilities)
        return None if ctx is None else _mailbox_context(ctx)

    get_context.roost_mailbox = True  # type: ignore[attr-defined]
    multiprocCommon.get_multiproc_context = get_context
