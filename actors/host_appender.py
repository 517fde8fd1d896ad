"""The appender: one thread per host that commits its entities' appends over one link.

A host's conversations queue their batches (``actors.hosting.EntityHost.append``); the
appender sends what is queued at once, pipelined on one journal-link connection, without
waiting for the answers to what it sent before (up to :data:`MAX_PASSES` sends
unanswered): the Journal's loop reads what has arrived and commits it together
(``runtime.journal.link``, with its commit window), so a host's batches reach the next
commit instead of queueing in the host behind its last one. The Journal answers one
connection in order, so each answer is its oldest unanswered batch's; each submitted group
of batches goes to its callback, on this thread, once all of them are answered (the
host's callback posts it back to the entity's turn).

When the link breaks (the Journal died, or closed an idle connection) every unanswered
batch is sent again with its key on a new connection, until ``retry_s`` after the oldest
was sent: a batch the dead Journal had committed is answered from the journal, never
appended twice. Past that time, or if the thread itself fails, every unanswered batch is
answered with a ``journal_error``.
"""

from __future__ import annotations

import collections
import contextlib
import queue
import select
import socket
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from actors.messages import Appended, AppendFailed
from runtime.errors import BadRequestError, JournalError
from runtime.journal.link import LinkCommitted, LinkFailed
from runtime.journal.link_client import (
    LinkBatch,
    LinkClient,
    append_frame,
    read_answer,
    send_reading,
)
from runtime.logging import get_logger
from runtime.wire import counters

__all__ = ["MAX_PASSES", "Appender"]

log = get_logger("roost.host")

MAX_PASSES = 4
"""Sends at most still unanswered; more queued batches wait for an answer (a bound on what
the two ends buffer for each other)."""


class _Submitted:
    """One :meth:`Appender.submit`: its batches, their answers so far, its callback."""

    __slots__ = ("answers", "batches", "done", "missing")

    def __init__(self, batches: Sequence[LinkBatch], done: Callable[[list[Any]], None]) -> None:
        self.batches = batches
        self.done = done
        self.answers: list[LinkCommitted | LinkFailed | None] = [None] * len(batches)
        self.missing = len(batches)

    def answer(self, slot: int, answer: LinkCommitted | LinkFailed) -> None:
        """Its batch ``slot`` is answered; the callback runs once every batch is."""
        self.answers[slot] = answer
        self.missing -= 1
        if self.missing == 0:
            self.done(
                [
                    AppendFailed(token=0, error=a.error)
                    if isinstance(a, LinkFailed)
                    else Appended(token=0, envelopes=a.envelopes)
                    for a in self.answers
                    if a is not None
                ]
            )


class _Sent:
    """A batch sent and not answered yet: its frame, and its place in its submission."""

    __slots__ = ("deadline", "frame", "last_of_pass", "owner", "slot")

    def __init__(self, frame: bytes, owner: _Submitted, slot: int, deadline: float) -> None:
        self.frame = frame
        self.owner = owner
        self.slot = slot
        self.deadline = deadline
        self.last_of_pass = False


class Appender:
    """One thread per host that commits its entities' appends over one journal link.

    It sends what is queued at once, pipelined, up to :data:`MAX_PASSES` sends unanswered;
    each submitted group's answers go to its callback (called on this thread: the host's
    callback posts them to the entity).
    """

    def __init__(
        self, path: str, token: str, *, retry_s: float = 30.0, max_passes: int = MAX_PASSES
    ) -> None:
        self.client = LinkClient(path, token, retry_s=retry_s)
        self.max_passes = max_passes
        self.queue: queue.SimpleQueue[_Submitted | None] = queue.SimpleQueue()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._unanswered: collections.deque[_Sent] = collections.deque()
        self._open_passes = 0
        self.batches = 0
        self.passes = 0
        self.most_passes = 0
        """The most sends that were unanswered at once."""
        self._thread = threading.Thread(target=self._loop, name="roost-appender", daemon=True)
        self._thread.start()

    def submit(self, batches: Sequence[LinkBatch], done: Callable[[list[Any]], None]) -> None:
        """Queue batches; ``done(answers)`` is called when all of them are answered.

        One ``Appended`` or ``AppendFailed`` per batch, called on the appender's thread.
        """
        self.queue.put(_Submitted(batches, done))
        self._wake()

    def close(self) -> None:
        """Stop the thread once what is queued is answered."""
        self.queue.put(None)
        self._wake()

    def _wake(self) -> None:
        with contextlib.suppress(OSError):  # full: a wake-up is pending anyway
            self._wake_w.send(b"\0")

    def _loop(self) -> None:
        stopping = False
        while True:
            try:
                if not stopping and self._open_passes < self.max_passes:
                    stopping = self._send_queued()
                if self._unanswered:
                    self._receive()
                elif stopping:
                    break
                else:
                    waiting = select.poll()
                    waiting.register(self._wake_r, select.POLLIN)
                    waiting.poll()
                    self._drain_wake()
            except Exception as e:  # the thread must answer every batch, whatever happens
                log.exception("appender_failed")
                self.client.close()
                self._fail_all(JournalError(f"append failed: {e}").to_wire())
        self.client.close()
        self._wake_r.close()
        self._wake_w.close()

    def _send_queued(self) -> bool:
        """Send every batch queued (one pass); True when :meth:`close` was called."""
        stop = False
        sent: list[_Sent] = []
        deadline = time.monotonic() + self.client.retry_s
        while True:
            try:
                item = self.queue.get_nowait()
            except queue.Empty:
                break
            if item is None:
                stop = True
                break
            if not item.batches:
                item.done([])
            for slot, batch in enumerate(item.batches):
                try:
                    frame = append_frame(*batch)
                except (OverflowError, TypeError, msgspec.EncodeError) as e:  # not for msgpack
                    item.answer(slot, LinkFailed(error=_unstorable(e)))
                    continue
                sent.append(_Sent(frame, item, slot, deadline))
        if not sent:
            return stop
        sent[-1].last_of_pass = True
        self._unanswered.extend(sent)
        self._open_passes += 1
        self.most_passes = max(self.most_passes, self._open_passes)
        self.batches += len(sent)
        self.passes += 1
        try:
            self._send(sent, deadline)
        except (OSError, msgspec.DecodeError) as e:
            self._resend(e)
        return stop

    def _send(self, sent: list[_Sent], deadline: float) -> None:
        """Send ``sent``'s frames on the link (connecting), taking answers meanwhile."""
        sock = self.client.connected(deadline)
        send_reading(sock, b"".join(s.frame for s in sent), deadline, self._answered)
        counters.count("journal_link", len(sent))

    def _receive(self) -> None:
        """Wait for the next answer (or new work); take it; resend on a broken link."""
        oldest = self._unanswered[0]
        sock = self.client.sock
        try:
            if sock is None:
                raise ConnectionResetError("not connected")
            timeout = oldest.deadline - time.monotonic()
            if timeout <= 0:
                self.client.close()  # a late answer must not be taken for a later batch's
                self._fail_all(_late(self.client.retry_s, "no answer"))
                return
            can_send = self._open_passes < self.max_passes
            poller = select.poll()  # not select(): a busy host's descriptors pass 1024
            poller.register(sock, select.POLLIN)
            if can_send:
                poller.register(self._wake_r, select.POLLIN)
            ready = {fd for fd, _ in poller.poll(timeout * 1000)}
            if self._wake_r.fileno() in ready:
                self._drain_wake()
            if sock.fileno() in ready:
                self._answered(read_answer(sock, oldest.deadline))
        except (OSError, msgspec.DecodeError) as e:
            self._resend(e)

    def _resend(self, error: Exception) -> None:
        """Send every unanswered batch again on a new connection, until the oldest's deadline."""
        self.client.close()
        delay = 0.01
        while self._unanswered:
            deadline = self._unanswered[0].deadline
            try:
                self._send(list(self._unanswered), deadline)
                return
            except (OSError, msgspec.DecodeError) as e:
                self.client.close()
                error = e
                if time.monotonic() + delay >= deadline:
                    self._fail_all(_late(self.client.retry_s, str(error)))
                    return
                time.sleep(delay)
                delay = min(delay * 2, 0.25)

    def _answered(self, answer: LinkCommitted | LinkFailed) -> None:
        sent = self._unanswered.popleft()
        self._open_passes -= sent.last_of_pass
        sent.owner.answer(sent.slot, answer)

    def _fail_all(self, error: Any) -> None:
        while self._unanswered:
            self._answered(LinkFailed(error=error))

    def _drain_wake(self) -> None:
        with contextlib.suppress(OSError):
            while self._wake_r.recv(4096):
                pass


def _unstorable(error: Exception) -> Any:
    """The answer to a batch the link cannot carry: refused alone, its neighbours go on."""
    return BadRequestError(
        f"the batch cannot be stored: {error}", reason="unstorable_event"
    ).to_wire()


def _late(retry_s: float, why: str) -> Any:
    return JournalError(f"the journal did not answer within {retry_s:g} s: {why}").to_wire()
