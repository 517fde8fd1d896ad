"""The endpoint pool's rules, with endpoints that are plain objects (issue 19)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from runtime.daemon.endpoints import EndpointPool


class Opener:
    """Opens numbered endpoints and records which were closed."""

    def __init__(self) -> None:
        self.opened: list[int] = []
        self.closed: list[int] = []

    def __call__(self) -> tuple[Any, Any]:
        n = len(self.opened)
        self.opened.append(n)
        return n, lambda: self.closed.append(n)


def _use(pool: EndpointPool, *, healthy: bool = True) -> Any:
    with pool.lease() as lease:
        lease.healthy = healthy
        return lease.endpoint


def test_requests_one_after_another_share_one_endpoint() -> None:
    opener = Opener()
    pool = EndpointPool(opener, max_idle=4)
    used = {_use(pool) for _ in range(1000)}
    assert used == {0}
    assert opener.opened == [0] and opener.closed == []
    assert pool.stats() == {
        "open": 1,
        "lent": 0,
        "idle": 1,
        "created": 1,
        "closed": 0,
        "peak_lent": 1,
    }


def test_an_endpoint_without_its_answer_is_closed_not_reused() -> None:
    opener = Opener()
    pool = EndpointPool(opener, max_idle=4)
    assert _use(pool, healthy=False) == 0
    assert opener.closed == [0]
    assert _use(pool) == 1
    assert pool.stats()["open"] == 1


def test_an_exception_in_the_request_closes_its_endpoint() -> None:
    opener = Opener()
    pool = EndpointPool(opener, max_idle=4)
    with pytest.raises(RuntimeError), pool.lease():
        raise RuntimeError("timed out")
    assert opener.closed == [0]
    assert pool.stats()["open"] == 0


def test_concurrent_requests_get_distinct_endpoints_and_at_most_max_idle_stay() -> None:
    opener = Opener()
    pool = EndpointPool(opener, max_idle=2)
    leases = [pool.lease() for _ in range(5)]
    endpoints = [lease.__enter__().endpoint for lease in leases]
    assert sorted(endpoints) == [0, 1, 2, 3, 4]
    assert pool.stats()["lent"] == 5
    for lease in leases:
        lease.__exit__(None, None, None)  # not marked healthy: closed
    assert pool.stats()["open"] == 0
    for _ in range(3):  # three at once again, this time answered
        with pool.lease() as a, pool.lease() as b, pool.lease() as c:
            a.healthy = b.healthy = c.healthy = True
    assert pool.stats()["idle"] == 2
    assert pool.stats()["open"] == 2
    assert pool.stats()["peak_lent"] == 5


def test_threads_never_share_an_endpoint_at_the_same_time() -> None:
    opener = Opener()
    pool = EndpointPool(opener, max_idle=8)
    in_use: set[Any] = set()
    guard = threading.Lock()
    clashes: list[Any] = []

    def work() -> None:
        for _ in range(200):
            with pool.lease() as lease:
                with guard:
                    if lease.endpoint in in_use:
                        clashes.append(lease.endpoint)
                    in_use.add(lease.endpoint)
                with guard:
                    in_use.discard(lease.endpoint)
                lease.healthy = True

    threads = [threading.Thread(target=work) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert clashes == []
    assert pool.stats()["created"] <= 6
    assert pool.stats()["lent"] == 0


def test_close_closes_idle_endpoints_and_later_returns() -> None:
    opener = Opener()
    pool = EndpointPool(opener, max_idle=4)
    lease = pool.lease()
    held = lease.__enter__()  # endpoint 0, lent
    assert _use(pool) == 1  # endpoint 1, idle after
    pool.close()
    assert opener.closed == [1]
    held.healthy = True
    lease.__exit__(None, None, None)
    assert sorted(opener.closed) == [0, 1]
    assert pool.stats()["open"] == 0


def test_a_closer_that_fails_does_not_escape() -> None:
    def opener() -> tuple[Any, Any]:
        def broken() -> None:
            raise OSError("transport already gone")

        return object(), broken

    pool = EndpointPool(opener, max_idle=0)
    _use(pool)
    assert pool.stats() == {
        "open": 0,
        "lent": 0,
        "idle": 0,
        "created": 1,
        "closed": 1,
        "peak_lent": 1,
    }
