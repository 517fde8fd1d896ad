"""The daemon's actor-system endpoints, lent per request and given back.

A request that goes down the actor tree needs an endpoint of its own (Thespian's
``ActorSystem.private()``): two requests sharing one could take each other's replies.
Each client connection used to open one for its thread and keep it for the daemon's
life, ~13 KB per connection, however short (issue 19). Here an endpoint is lent to one
request and given back when its reply came, for the next request of any connection to
reuse; so the daemon holds at most as many as requests were ever in flight at once
(the gateway bounds that by ``max_inflight``), whatever the number of connections.

An endpoint whose request ended without its reply (a timeout, a full mailbox, an answer
of the wrong kind) is closed instead: its late reply must not answer the next request.

The pool is plain code: what opens and closes an endpoint is given to it, so its rules
have unit tests without an actor system.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["EndpointPool"]

Opener = Callable[[], tuple[Any, Callable[[], None]]]
"""Opens one endpoint; returns it and the function that closes it."""


class _Lease:
    """One lent endpoint; ``healthy`` is set once its request had its answer."""

    def __init__(self, endpoint: Any) -> None:
        self.endpoint = endpoint
        self.healthy = False


class EndpointPool:
    """Endpoints lent one request at a time; at most ``max_idle`` kept open between uses."""

    def __init__(self, opener: Opener, *, max_idle: int) -> None:
        self._opener = opener
        self._max_idle = max(0, max_idle)
        self._lock = threading.Lock()
        self._idle: list[tuple[Any, Callable[[], None]]] = []
        self._lent: dict[int, Callable[[], None]] = {}
        self._created = 0
        self._closed = 0
        self._peak = 0
        self._shut = False

    @contextmanager
    def lease(self) -> Iterator[_Lease]:
        """Lend an endpoint for one request; mark ``lease.healthy`` when its answer came.

        On leaving, a healthy endpoint goes back to the pool (or is closed beyond
        ``max_idle``); any other is closed.
        """
        endpoint = self._take()
        lease = _Lease(endpoint)
        try:
            yield lease
        finally:
            self._give_back(endpoint, healthy=lease.healthy)

    def _take(self) -> Any:
        with self._lock:
            if self._idle:
                endpoint, closer = self._idle.pop()
                self._lend(endpoint, closer)
                return endpoint
        endpoint, closer = self._opener()
        with self._lock:
            self._created += 1
            self._lend(endpoint, closer)
        return endpoint

    def _lend(self, endpoint: Any, closer: Callable[[], None]) -> None:
        self._lent[id(endpoint)] = closer
        self._peak = max(self._peak, len(self._lent))

    def _give_back(self, endpoint: Any, *, healthy: bool) -> None:
        with self._lock:
            closer = self._lent.pop(id(endpoint))
            keep = healthy and not self._shut and len(self._idle) < self._max_idle
            if keep:
                self._idle.append((endpoint, closer))
                return
            self._closed += 1
        _close(closer)

    def close(self) -> None:
        """Close the idle endpoints; those lent now are closed when given back."""
        with self._lock:
            self._shut = True
            idle, self._idle = self._idle, []
            self._closed += len(idle)
        for _, closer in idle:
            _close(closer)

    def stats(self) -> dict[str, int]:
        """The counts: ``open``, ``lent``, ``idle``, ``created``, ``closed``, ``peak_lent``.

        ``open`` is ``lent`` + ``idle`` now; the others are since the start (``peak_lent``:
        the most lent at once).
        """
        with self._lock:
            return {
                "open": len(self._lent) + len(self._idle),
                "lent": len(self._lent),
                "idle": len(self._idle),
                "created": self._created,
                "closed": self._closed,
                "peak_lent": self._peak,
            }


def _close(closer: Callable[[], None]) -> None:
    try:
        closer()
    except Exception:  # closing an endpoint whose transport already broke may fail
        return
