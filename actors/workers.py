"""Slow work on threads, for an actor: started, then collected when it finished.

An actor whose work may take long (the ToolRunner: commands, HTTP fetches, workflows,
``async`` calls) holds a :class:`WorkerThreads`, which runs it on a worker thread that
leaves its answer in a queue. Hosted in a host actor (``actors.hosting``), the thread then
posts a :class:`WorkDone` to it, which the host delivers as a message. Thespian delivers no
messages from threads, so an actor that is a process of its own instead wakes up every few
milliseconds while any is in flight and collects what finished.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

__all__ = ["WorkDone", "WorkerThreads"]

_POLL = timedelta(milliseconds=5)


class WorkDone:
    """A worker thread finished (posted to a hosted entity; it collects what finished)."""


class WorkerThreads:
    """Runs an actor's work on threads and collects their answers.

    ``owner``: the ``RoostActor`` (its ``hosted``, its ``_myRef`` port when hosted, its
    ``wakeupAfter``).
    """

    def __init__(self, owner: Any) -> None:
        self.owner = owner
        self.done: queue.Queue[tuple[str, Callable[[], object]]] = queue.Queue()
        self.in_threads = 0
        self.polling = False

    def start(self, work: Callable[[], tuple[str, Callable[[], object]]]) -> None:
        """Run ``work`` on a thread; its answer (a key, what the actor then does) is collected."""
        self.in_threads += 1
        if self.owner.hosted:  # the host delivers the answer as a message: no polling
            port = self.owner._myRef

            def run() -> None:
                self.done.put(work())
                port.post(WorkDone())

            threading.Thread(target=run, daemon=True).start()
            return
        threading.Thread(target=lambda: self.done.put(work()), daemon=True).start()
        self._poll()

    def collect(self) -> list[tuple[str, Callable[[], object]]]:
        """The answers of the work that finished since the last poll (on its wakeup)."""
        self.polling = False
        finished = []
        while True:
            try:
                finished.append(self.done.get_nowait())
            except queue.Empty:
                break
        self.in_threads -= len(finished)
        if self.in_threads > 0 and not self.owner.hosted:
            self._poll()
        return finished

    def _poll(self) -> None:
        if not self.polling:
            self.polling = True
            self.owner.wakeupAfter(_POLL)
