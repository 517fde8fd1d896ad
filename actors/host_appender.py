"""The appender: one thread per host that commits its entities' appends over one link.

A host's conversations queue their batches (``actors.hosting.EntityHost.append``); the
appender takes every batch queued since its last pass and sends them pipelined on one
journal-link connection (:meth:`runtime.journal.link.LinkClient.append_many`), so they
share the Journal's group commit with each other and with other hosts' batches. Each
answer goes to its caller's callback, on this thread (the host's callback posts it back
to the entity's turn).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any

from actors.messages import Appended, AppendFailed
from events.envelope import NewEvent
from runtime.errors import JournalError
from runtime.journal.link import LinkClient, LinkFailed
from runtime.logging import get_logger

__all__ = ["Appender"]

log = get_logger("roost.host")


class Appender:
    """One thread per host that commits its entities' appends over one journal link.

    It takes every batch queued since its last pass and sends them pipelined
    (:meth:`runtime.journal.link.LinkClient.append_many`); each answer goes to its batch's
    callback (called on this thread: the host's callback posts it to the entity).
    """

    def __init__(self, path: str, token: str) -> None:
        self.client = LinkClient(path, token)
        self.queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.batches = 0
        self.passes = 0
        self._thread = threading.Thread(target=self._loop, name="roost-appender", daemon=True)
        self._thread.start()

    def submit(
        self, batches: list[tuple[list[NewEvent], str]], done: Callable[[list[Any]], None]
    ) -> None:
        """Queue batches (sent in one pass); ``done(answers)`` is called when answered.

        One ``Appended`` or ``AppendFailed`` per batch, called on the appender's thread.
        """
        self.queue.put((batches, done))

    def close(self) -> None:
        """Stop the thread once what is queued is answered."""
        self.queue.put(None)

    def _loop(self) -> None:
        while True:
            item = self.queue.get()
            if item is None:
                self.client.close()
                return
            work = [item]
            stop = False
            while True:
                try:
                    more = self.queue.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    stop = True
                    break
                work.append(more)
            batches = [batch for item, _ in work for batch in item]
            try:
                answers = self.client.append_many(batches)
            except Exception as e:  # the thread must answer every batch, whatever happens
                log.exception("appender_failed")
                error = JournalError(f"append failed: {e}").to_wire()
                answers = [LinkFailed(error=error)] * len(batches)
            self.batches += len(batches)
            self.passes += 1
            given = iter(answers)
            for item, done in work:
                mine = [next(given) for _ in item]
                done(
                    [
                        AppendFailed(token=0, error=a.error)
                        if isinstance(a, LinkFailed)
                        else Appended(token=0, envelopes=a.envelopes)
                        for a in mine
                    ]
                )
            if stop:
                self.client.close()
                return
