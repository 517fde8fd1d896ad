"""An ``httpx.AsyncClient`` whose every request and connection passes the egress policy.

For the HTTP clients an SDK drives (the ``a2a`` client's card resolver and JSON-RPC
transport), where Roost does not build each request itself as ``http.fetch`` does:

- every request's URL is judged by :func:`runtime.guard.network.egress.judge_target` (scheme,
  host, allowlist, special addresses) before it is sent;
- every new connection resolves its host once, checks every address
  (:func:`~runtime.guard.network.egress.resolve_and_check`) and connects to a checked address
  itself, so a second DNS answer cannot move it elsewhere; TLS still verifies the name the
  URL gave (httpcore sends it as the server name);
- redirects are not followed and no proxy is taken from the environment.

A refusal raises :class:`~runtime.guard.network.egress.NetworkDeniedError` out of the request;
:func:`denial_in` finds it under the exceptions an SDK wraps it in.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

import httpcore
import httpx

from runtime.guard.network.egress import (
    NetworkDeniedError,
    NetworkPolicy,
    Resolver,
    denial_error,
    judge_target,
    resolve_and_check,
)

__all__ = ["denial_in", "pinned_client"]


class _PinnedBackend(httpcore.AsyncNetworkBackend):
    """httpcore's own backend, connecting only to addresses the policy checked."""

    def __init__(self, policy: NetworkPolicy, resolver: Resolver | None) -> None:
        self._policy = policy
        self._resolver = resolver
        self._inner = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        decision = judge_target(self._policy, target)
        if not decision.allowed:
            raise denial_error(decision)
        assert decision.host is not None
        addresses = await asyncio.to_thread(
            resolve_and_check,
            self._policy,
            decision.host,
            port,
            resolver=self._resolver,
            target=target,
        )
        last: Exception | None = None
        for address in addresses:
            try:
                return await self._inner.connect_tcp(
                    address,
                    port,
                    timeout=timeout,
                    local_address=local_address,
                    socket_options=socket_options,
                )
            except httpcore.ConnectError as e:
                last = e
        assert last is not None
        raise last

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError(f"no Unix socket connections through the egress policy: {path}")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class _CheckedTransport(httpx.AsyncHTTPTransport):
    """httpx's transport, judging each request's URL and pinning each connection."""

    def __init__(self, policy: NetworkPolicy, resolver: Resolver | None) -> None:
        super().__init__(trust_env=False)
        self._policy = policy
        # httpx builds the pool and takes no backend; the pool reads this attribute for every
        # new connection (tests/runtime/guard/test_network_pinning.py fails if that changes)
        self._pool._network_backend = _PinnedBackend(policy, resolver)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        decision = judge_target(self._policy, str(request.url))
        if not decision.allowed:
            raise denial_error(decision)
        return await super().handle_async_request(request)


def pinned_client(
    policy: NetworkPolicy, *, timeout_s: float, resolver: Resolver | None = None
) -> httpx.AsyncClient:
    """A new client for ``policy`` (see the module doc); the caller closes it."""
    return httpx.AsyncClient(
        transport=_CheckedTransport(policy, resolver),
        timeout=httpx.Timeout(timeout_s),
        follow_redirects=False,
        trust_env=False,
    )


def denial_in(error: BaseException) -> NetworkDeniedError | None:
    """The :class:`NetworkDeniedError` that caused ``error`` (itself, or down its chain)."""
    seen: set[int] = set()
    todo: list[BaseException] = [error]
    while todo:
        current = todo.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, NetworkDeniedError):
            return current
        if isinstance(current, BaseExceptionGroup):
            todo.extend(current.exceptions)
        todo.extend(e for e in (current.__cause__, current.__context__) if e is not None)
    return None
