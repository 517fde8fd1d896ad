"""The journal link's client: one connection, a batch or several pipelined, retried.

:class:`LinkClient` sends a hello with its first append (no extra round trip), then
``LinkAppend`` frames, and reads one answer per frame, in order. Across a Journal restart
it sends what is still unanswered again with the same keys, until ``retry_s``: a batch the
dead Journal had committed is answered from the journal, never appended twice. The
protocol and the server are in :mod:`runtime.journal.link`.
"""

from __future__ import annotations

import contextlib
import socket
import time

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

__all__ = ["LinkClient", "append_frames"]


def append_frames(batches: list[tuple[list[NewEvent], str]]) -> bytes:
    """The frames of ``(events, key)`` batches, to send pipelined on one connection."""
    return b"".join(_frame(LinkAppend(key=k, events=e)) for e, k in batches)


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

    def append_many(
        self, batches: list[tuple[list[NewEvent], str]]
    ) -> list[LinkCommitted | LinkFailed]:
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
                sock.sendall(append_frames(todo))
                counters.count("journal_link", len(todo))
                for _ in todo:
                    answers.append(self.read_answer(sock, deadline))
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

    def read_answer(self, sock: socket.socket, deadline: float) -> LinkCommitted | LinkFailed:
        """The next answer on ``sock`` (raises ``OSError`` when there is none by ``deadline``)."""
        try:
            body = read_frame(sock, MAX_FRAME, deadline=deadline)
        except FrameTooLargeError as e:
            raise OSError(f"journal answer too large: {e.details['size']} bytes") from e
        if body is None:
            raise ConnectionResetError("the journal closed the link")
        answer: LinkCommitted | LinkFailed = _ANSWERS.decode(body)
        return answer
