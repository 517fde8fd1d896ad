"""A connection leaves nothing behind in the daemon when it ends (issue 19, item 2).

Many short connections of every kind (one request, one turn, a subscription, a client
that disconnects with its request still under way) and then the daemon's counts: its
actor-system endpoints (the pool's and Thespian's own), threads and sockets. Counts,
not bytes: the bytes per connection are measured by ``python -m soak.connection_bench``
(``docs/performance.md``).
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import psutil
import pytest

from runtime.guard.home.roost_home import socket_path
from runtime.wire.ops import normalize_event
from runtime.wire.protocol import encode_request
from tests.integration.conftest import Daemon

THREADS = 4
ROUNDS = 25
"""Connections of each kind per round of the run (``THREADS`` at a time)."""

TURN = {
    "type": "user.message",
    "data": {
        "content": "read README.md",
        "llm": {"tool_calls": [{"name": "fs.read", "args": {"path": "README.md"}}]},
    },
}


def _one_request(daemon: Daemon, i: int) -> None:
    with daemon.client(timeout_s=60) as client:
        client.list_projects()


def _one_turn(daemon: Daemon, i: int) -> None:
    with daemon.client(timeout_s=60) as client:
        client.send_event("p", f"c{i % THREADS}", TURN, wait=True, wait_timeout_s=60)


def _subscription(daemon: Daemon, i: int) -> None:
    with daemon.client() as client, client.subscribe("p", after_seq=0) as stream:
        next(stream)


def _abrupt(daemon: Daemon, i: int) -> None:
    """Send a turn and a request, then hang up without reading the answers."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(socket_path(daemon.home))
    args: dict[str, Any] = {
        "project_id": "p",
        "conversation_id": f"c{i % THREADS}",
        "event": normalize_event(TURN),
        "wait": True,
        "wait_timeout_s": 60,
    }
    sock.sendall(encode_request(1, "send_event", args) + encode_request(2, "list_projects", {}))
    sock.close()


KINDS: list[Callable[[Daemon, int], None]] = [_one_request, _one_turn, _subscription, _abrupt]


def _run(daemon: Daemon, rounds: int) -> None:
    with ThreadPoolExecutor(THREADS) as pool:
        for kind in KINDS:
            list(pool.map(lambda i, k=kind: k(daemon, i), range(rounds)))


def _sockets(pid: int) -> int:
    """The daemon's open sockets (the journal's pooled SQLite files are bounded apart)."""
    count = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):
            count += os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:")
    return count


def _counts(daemon: Daemon) -> dict[str, Any]:
    proc = psutil.Process(daemon.pid)
    with daemon.client() as client:
        status = client.status()
    return {
        "threads": proc.num_threads(),
        "sockets": _sockets(daemon.pid),
        "connections": status["connections"],
        "endpoints": status["endpoints"],
        "host_links": status["host_links"]["idle"],
    }


def _back(baseline: dict[str, Any], now: dict[str, Any]) -> bool:
    """Only the asking connection open, no more threads or sockets than at the baseline.

    Besides the idle connections the daemon keeps to the project's host (a pool bounded by
    the requests in flight at once, checked apart).
    """
    return (
        now["connections"] == 1
        and now["threads"] <= baseline["threads"]
        and now["sockets"] - now["host_links"] <= baseline["sockets"] - baseline["host_links"]
    )


@pytest.mark.timeout(300)
def test_connections_of_every_kind_leave_no_endpoint_thread_or_socket(
    daemon: Daemon, project_root: str
) -> None:
    with daemon.client() as client:
        client.start_project(project_root, project_id="p", options={"idle_passivation_ms": 600000})
        for i in range(THREADS):
            client.start_conversation("p", f"c{i}")
    _run(daemon, THREADS)  # warm-up: every code path and thread pool used once
    for _ in range(120):
        baseline = _counts(daemon)
        if baseline["connections"] == 1:
            break
        time.sleep(0.5)

    _run(daemon, ROUNDS)
    # Polled slowly: each look is a request, and a flood of them would slow the turns.
    for _ in range(240):
        now = _counts(daemon)
        if _back(baseline, now):
            break
        time.sleep(0.5)
    assert _back(baseline, now), (baseline, now)
    endpoints = now["endpoints"]
    # The endpoints open are those lent at once at the busiest moment (the abrupt clients'
    # requests all run together), however many connections came and went, and Thespian
    # holds none besides them and its main one.
    assert endpoints["lent"] == 0, endpoints
    assert endpoints["open"] <= endpoints["peak_lent"] <= ROUNDS + THREADS + 1, endpoints
    assert endpoints["transport"] == endpoints["open"] + 1, endpoints
    assert now["host_links"] <= ROUNDS + THREADS + 1, now  # at most one per request at once
