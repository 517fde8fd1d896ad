"""A thread that hands every event committed after a position to a callback, in order.

The daemon follows its journal so twice: the exporter (:mod:`runtime.telemetry.follower`)
and the activity lines (:mod:`runtime.daemon.activity`). Both read a page at a time from
where they are, wait a poll when nothing is new, go on after a failed read (logged), and,
once stopped, still take what was committed before the stop.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Final

from events.envelope import Envelope

__all__ = ["CommittedFollower", "ReadAfter"]

ReadAfter = Callable[[int], list[Envelope]]
"""Committed events after a global position (``seq``), in order, a page at a time."""

_POLL_S: Final = 0.2
_STOP_JOIN_S: Final = 10.0


class CommittedFollower:
    """Calls ``observe`` with each event committed after ``after_seq``, on a thread of its own.

    A failed read is logged on ``log`` as ``read_failed`` and tried again at the next poll.
    """

    def __init__(
        self,
        read_after: ReadAfter,
        after_seq: int,
        observe: Callable[[Envelope], None],
        *,
        name: str,
        log: Any,
        read_failed: str,
    ) -> None:
        self._read_after = read_after
        self._cursor = after_seq
        self._observe = observe
        self._log = log
        self._read_failed = read_failed
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        """Start following."""
        self._thread.start()

    def stop(self) -> None:
        """Take what is committed already, then end the thread (waiting 10 s at most)."""
        self._stop.set()
        self._thread.join(_STOP_JOIN_S)

    def cursor(self) -> int:
        """The ``seq`` of the last event observed (the position it started at before that)."""
        with self._lock:
            return self._cursor

    def _run(self) -> None:
        while True:
            stopping = self._stop.is_set()
            try:
                chunk = self._read_after(self._cursor)
            except Exception as e:
                self._log.warning(self._read_failed, error=f"{type(e).__name__}: {e}")
                chunk = []
            for event in chunk:
                self._observe(event)
                with self._lock:
                    self._cursor = event.seq
            if not chunk:
                if stopping:  # all that was committed before stop() is taken
                    return
                self._stop.wait(_POLL_S)
