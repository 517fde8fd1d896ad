"""The model caller's connection pool, in shards (see :class:`PoolShards`)."""

from __future__ import annotations

import asyncio
import contextlib

import httpx

__all__ = ["DEFAULT_POOL_SIZE", "SHARD_IDLE_S", "PoolShards"]

DEFAULT_POOL_SIZE = 16
"""Connections in one shard of a :class:`ModelCaller`'s pool (see :class:`PoolShards`)."""
SHARD_IDLE_S = 5.0
"""Seconds a trailing shard may go unused before it is closed (httpx's keep-alive expiry)."""


class PoolShards:
    """The caller's connection pool, in shards of ``size`` connections each (used on the loop).

    httpx's pool (httpcore) looks at every connection it holds each time a request comes
    or goes, and asks each idle one whether its socket is readable (a ``poll``): with a
    thousand calls in flight that is most of a call's CPU. A call leases the first shard
    with a free connection, so the shards fill in order, a quiet host uses one, and each
    shard's scan stays short; a shard keeps its connections alive for the next call (one
    TLS context for all of them: making one costs tens of milliseconds). httpcore closes a
    pool's expired connections only when that pool is used, so a trailing shard no call
    has used for ``idle_s`` (httpx's keep-alive, 5 s) is closed whole; the first one stays.
    """

    def __init__(self, size: int, *, idle_s: float = SHARD_IDLE_S) -> None:
        if size < 1:
            raise ValueError(f"pool_size must be at least 1, got {size}")
        self.size = size
        self.idle_s = idle_s
        self._ssl = httpx.create_ssl_context()
        self._limits = httpx.Limits(max_connections=size, max_keepalive_connections=size)
        self._clients: list[httpx.AsyncClient] = []
        self._leased: list[int] = []
        self._idle_since: list[float] = []
        self._closing: set[asyncio.Task[None]] = set()

    @property
    def shards(self) -> int:
        """Shards open now."""
        return len(self._clients)

    def lease(self) -> httpx.AsyncClient:
        """The first shard with a connection to spare (a new shard when none has)."""
        for index, leased in enumerate(self._leased):
            if leased < self.size:
                self._leased[index] += 1
                return self._clients[index]
        self._clients.append(httpx.AsyncClient(limits=self._limits, verify=self._ssl))
        self._leased.append(1)
        self._idle_since.append(0.0)
        return self._clients[-1]

    def shard_of(self, client: httpx.AsyncClient) -> int:
        """The index of ``client``'s shard (``ValueError`` when it is none of them)."""
        for index, held in enumerate(self._clients):
            if held is client:
                return index
        raise ValueError("not a client of these pool shards")

    def release(self, client: httpx.AsyncClient) -> None:
        """``client``'s call ended; a shard it leaves unused is looked at after ``idle_s``."""
        index = self.shard_of(client)
        self._leased[index] -= 1
        if self._leased[index] == 0 and index > 0:
            loop = asyncio.get_running_loop()
            self._idle_since[index] = loop.time()
            loop.call_later(self.idle_s, self._sweep)

    def _sweep(self) -> None:
        """Close the trailing shards no call has used for ``idle_s`` (never the first)."""
        now = asyncio.get_running_loop().time()
        while (
            len(self._clients) > 1
            and self._leased[-1] == 0
            and now - self._idle_since[-1] >= self.idle_s
        ):
            client = self._clients.pop()
            self._leased.pop()
            self._idle_since.pop()
            task = asyncio.get_running_loop().create_task(client.aclose())
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)

    async def aclose(self) -> None:
        """Close every shard's connections (one that fails to close does not stop the rest)."""
        clients, self._clients, self._leased, self._idle_since = self._clients, [], [], []
        for client in clients:
            with contextlib.suppress(Exception):
                await client.aclose()
        await asyncio.gather(*self._closing, return_exceptions=True)
