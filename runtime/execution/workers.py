"""The threads that run tool calls, kept for the next call once one is done.

Every tool function runs on one of them (:mod:`runtime.execution.runner` waits on it and
gives up at the call's deadline). One set serves the process: :data:`WORKERS`.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable

__all__ = ["WORKERS", "Workers", "give_up_time"]


class Workers:
    """Threads that run tool calls, kept for the next call once one is done.

    A call still runs on a thread of its own (its caller gives up on it at the deadline,
    and an abandoned thread simply never comes back), but starting a thread per call cost
    a hosted runner more than a file read does. At most ``max_idle`` wait for work; a
    process forked from this one starts with none.
    """

    def __init__(self, max_idle: int = 8) -> None:
        self.max_idle = max_idle
        self._reset()
        os.register_at_fork(after_in_child=self._reset)  # the parent's threads are not here

    def _reset(self) -> None:
        self._jobs: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._idle = 0
        self._lock = threading.Lock()

    def run(self, job: Callable[[], None]) -> None:
        """Run ``job`` on an idle worker, or on a new one."""
        with self._lock:
            if self._idle > 0:
                self._idle -= 1
                self._jobs.put(job)
                return
        threading.Thread(target=self._serve, args=(job,), name="tool-worker", daemon=True).start()

    def _serve(self, job: Callable[[], None]) -> None:
        while True:
            job()
            with self._lock:
                if self._idle >= self.max_idle:
                    return
                self._idle += 1
            job = self._jobs.get()


WORKERS = Workers()
"""The process's workers."""


def give_up_time(deadline: float, cancelled_at: float, grace: float, kills: bool) -> float:
    """When the runner stops waiting for a tool cancelled at ``cancelled_at``.

    A tool that kills its processes on the cancel (``kills``: ``ToolSpec.kills_on_cancel``)
    answers with what it killed (``tool.child_processes_terminated``); given up on, that
    record would be lost while the kill still happens, so the cancel does not shorten its
    wait: it keeps its ``deadline``. Any other tool (an MCP stdio call, a workflow) gets
    ``grace`` from the cancel (none for in-process tools).
    """
    if kills:
        return deadline
    return min(deadline, cancelled_at + grace)
