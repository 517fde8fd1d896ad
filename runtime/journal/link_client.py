"""The journal link's client: one connection, a batch or several pipelined, retried.

:class:`LinkClient` sends a hello with its first append (no extra round trip), then
``LinkAppend`` frames, and reads one answer per frame, in order. Across a Journal restart
it sends what is still unanswered again with the same keys, until ``retry_s``: a batch the
dead Journal had committed is answered from the journal, never appended twice. The
protocol and the server are in :mod:`runtime.journal.link`.
"""

from __future__ import annotations

import contextlib
import select
import socket
import time
from collections.abc import Callable, Sequence

import msgspec

from events.envelope import NewEvent
from runtime.journal.link import (
    _ANSWERS,
    MAX_FRAME,
    LinkAppend,
    LinkCommitted,
    LinkFailed,
    LinkHello,
    _frame,
    _journal_error,
)
from runtime.wire import counters
from runtime.wire.framing import FrameTooLargeError, read_frame
from runtime.wire.transport import connect_unix_socket

__all__ = [
    "LinkBatch",
    "LinkClient",
    "append_frame",
    "append_frames",
    "read_answer",
    "send_reading",
]


LinkBatch = tuple[list[NewEvent], str] | tuple[list[NewEvent], str, bool]
"""``(events, key)``, or ``(events, key, redacted)``: ``redacted`` when the sender redacted
each event as the journal would (``runtime.journal.store.Batch.redacted``)."""


def append_frame(events: list[NewEvent], key: str, redacted: bool = False) -> bytes:
    """The frame of one ``(events, key, redacted)`` batch.

    Raises ``OverflowError``, ``TypeError`` or ``msgspec.EncodeError`` for a batch msgpack
    cannot hold (an integer beyond 64 bits).
    """
    return _frame(LinkAppend(key=key, events=events, redacted=redacted))


def append_frames(batches: Sequence[LinkBatch]) -> bytes:
    """The frames of ``batches``, to send pipelined on one connection."""
    return b"".join(append_frame(*batch) for batch in batches)


_SEND_CHUNK = 256 * 1024


def send_reading(
    sock: socket.socket,
    data: bytes,
    deadline: float,
    on_answer: Callable[[LinkCommitted | LinkFailed], None],
) -> None:
    """Send ``data`` on the link while taking each answer that arrives meanwhile.

    The Journal answers a connection while it still sends to it (a pipelined batch is
    committed and answered before the next has arrived whole), and it answers with a
    blocking send from its one thread: a client that only sent, reading nothing until it
    was done, would fill the Journal's send buffer and stop it reading ours, and both ends
    would wait (until the Journal's 5-s send timeout cut the link, for every host). So the
    send waits with ``poll`` (no ``select``: descriptors past 1024) for either direction and
    hands each answer to ``on_answer`` in order. Raises ``OSError`` as ``sendall`` does,
    and ``TimeoutError`` at ``deadline``.
    """
    view = memoryview(data)
    poller = select.poll()
    poller.register(sock, select.POLLIN | select.POLLOUT)
    while view:
        left_ms = (deadline - time.monotonic()) * 1000
        if left_ms <= 0:
            raise TimeoutError("the journal link did not take the batch in time")
        for _fd, event in poller.poll(left_ms):
            if event & (select.POLLIN | select.POLLHUP | select.POLLERR):
                on_answer(read_answer(sock, deadline))
            if event & select.POLLOUT and view:
                with contextlib.suppress(BlockingIOError):
                    view = view[sock.send(view[:_SEND_CHUNK], socket.MSG_DONTWAIT) :]


def read_answer(sock: socket.socket, deadline: float) -> LinkCommitted | LinkFailed:
    """The next answer on ``sock`` (raises ``OSError`` when there is none by ``deadline``)."""
    try:
        body = read_frame(sock, MAX_FRAME, deadline=deadline)
    except FrameTooLargeError as e:
        raise OSError(f"journal answer too large: {e.details['size']} bytes") from e
    if body is None:
        raise ConnectionResetError("the journal closed the link")
    answer: LinkCommitted | LinkFailed = _ANSWERS.decode(body)
    return answer


class LinkClient:
    """One actor's connection to the Journal; ``append`` blocks until the batch commits."""

    def __init__(self, path: str, token: str, *, retry_s: float = 30.0) -> None:
        self.path = path
        self.token = token
        self.retry_s = retry_s
        self.sock: socket.socket | None = None
        self.reconnects = 0
        """Connections made after the first (the Journal restarted)."""
        self._ever_connected = False

    def append(self, events: list[NewEvent], key: str) -> LinkCommitted | LinkFailed:
        """Commit ``events`` under ``key``; across Journal restarts until ``retry_s``."""
        return self.append_many([(events, key)])[0]

    def append_many(self, batches: Sequence[LinkBatch]) -> list[LinkCommitted | LinkFailed]:
        """Commit several batches, pipelined on one connection: every frame, then each answer.

        The Journal's loop reads what has arrived and commits it together, so the batches
        of one host's conversations share a commit (and one with other hosts'). Across a
        Journal restart the batches still unanswered are sent again with their keys, until
        ``retry_s``: a batch the dead Journal had committed is answered, not appended twice.
        """
        answers: list[LinkCommitted | LinkFailed] = []
        deadline = time.monotonic() + self.retry_s
        delay = 0.01
        while len(answers) < len(batches):
            todo = batches[len(answers) :]
            reused = self.sock is not None
            try:
                sock = self.connected(deadline)
                wanted = len(answers) + len(todo)
                send_reading(sock, append_frames(todo), deadline, answers.append)
                counters.count("journal_link", len(todo))
                while len(answers) < wanted:
                    answers.append(read_answer(sock, deadline))
            except (OSError, msgspec.DecodeError) as e:
                self.close()
                if reused:
                    continue
                if time.monotonic() + delay >= deadline:
                    failed = _journal_error(
                        f"the journal did not answer within {self.retry_s:g} s: {e}"
                    )
                    return answers + [failed] * (len(batches) - len(answers))
                time.sleep(delay)
                delay = min(delay * 2, 0.25)
        return answers

    def close(self) -> None:
        """Drop the connection (the next append reconnects)."""
        if self.sock is not None:
            with contextlib.suppress(OSError):
                self.sock.close()
            self.sock = None

    def connected(self, deadline: float) -> socket.socket:
        """The connection, made (its hello sent) when there is none."""
        if self.sock is None:
            sock = connect_unix_socket(self.path, max(0.05, deadline - time.monotonic()))
            try:
                sock.sendall(_frame(LinkHello(token=self.token)))
                counters.count("journal_link")
            except OSError:
                sock.close()
                raise
            self.reconnects += self._ever_connected
            self._ever_connected = True
            self.sock = sock
        return self.sock
