"""Connections to one daemon for a server with requests in flight together: a pool.

A :class:`~runtime.client.connection.Client` carries one request at a time. The protocol
servers (``roost mcp serve``, ``roost a2a serve``) serve several requests at once, so each
borrows an idle connection, or opens one more like the first (same home, same limits),
and gives it back; :meth:`ClientPool.ask` does that on a worker thread for async code.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import TypeVar

from runtime.client.connection import Client

__all__ = ["ClientPool"]

_T = TypeVar("_T")


class ClientPool:
    """Connections to the daemon of ``client``: one per request in flight."""

    def __init__(self, client: Client) -> None:
        self.client = client
        """The first connection (the model of the others)."""
        self._idle: list[Client] = [client]
        self._opened: list[Client] = [client]
        self._lock = threading.Lock()

    def close(self) -> None:
        """Close every connection the pool opened."""
        with self._lock:
            opened, self._opened, self._idle = self._opened, [], []
        for client in opened:
            client.close()

    def borrowed(self, request: Callable[[Client], _T]) -> _T:
        """Run ``request`` on an idle connection (a new one when none is idle)."""
        with self._lock:
            client = self._idle.pop() if self._idle else None
        if client is None:
            model = self.client
            client = Client.connect(
                model.home, timeout_s=model.timeout_s, max_frame_bytes=model.max_frame_bytes
            )
            with self._lock:
                self._opened.append(client)
        try:
            return request(client)
        finally:
            with self._lock:
                self._idle.append(client)

    async def ask(self, request: Callable[[Client], _T]) -> _T:
        """``request(client)`` on a worker thread (anyio), with a borrowed connection."""
        import anyio.to_thread  # noqa: PLC0415 - the async servers only

        return await anyio.to_thread.run_sync(functools.partial(self.borrowed, request))
