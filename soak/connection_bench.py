"""What the daemon keeps per client connection: ``python -m soak.connection_bench``.

Starts a daemon on a temporary home, a project and one conversation, and sends one
``user.message`` turn per new connection (as the CLI, scripts and ``roost mcp serve`` do):
first ``--warmup`` of them (the first use of each code path and of the allocator's
arenas is not a leak), then ``--connections`` more. It prints, as JSON, the daemon's USS
(``psutil``'s ``memory_full_info().uss``), thread and fd counts after the warm-up and
after the run, and the daemon's own count of actor-system endpoints (``status``'s
``endpoints``, where the daemon reports it). ``--request list_projects`` sends that
request instead of a turn (no conversation work, only the daemon's share).

Figures are in ``docs/performance.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from typing import TypedDict

import psutil

from runtime.client import Client
from runtime.daemon import start_daemon, stop_daemon
from soak.bootstrap import LARGEST_TOKEN_BUDGET, seed_root
from soak.scenarios import LLM_DIRECTIVE

__all__ = ["ConnectionReport", "Snapshot", "main", "measure", "snapshot"]

_MIB = 1024 * 1024


class Snapshot(TypedDict):
    """The daemon's USS (MiB), threads, fds and endpoints at one moment."""

    uss_mib: float
    threads: int
    fds: int
    endpoints: dict[str, int] | None


class ConnectionReport(TypedDict):
    """What :func:`measure` returns: the figures before and after the connections."""

    request: str
    connections: int
    warmup: int
    seconds: float
    before: Snapshot
    after: Snapshot
    uss_growth_mib: float
    per_connection_kib: float


def snapshot(proc: psutil.Process, client: Client) -> Snapshot:
    """The daemon's USS (MiB), threads, fds and endpoints now."""
    status = client.status()
    return {
        "uss_mib": round(proc.memory_full_info().uss / _MIB, 2),
        "threads": proc.num_threads(),
        "fds": proc.num_fds(),
        "endpoints": status.get("endpoints"),
    }


def _one(home: str, request: str, index: int) -> None:
    with Client.connect(home=home, timeout_s=60) as client:
        if request == "list_projects":
            client.list_projects()
            return
        event = {
            "type": "user.message",
            "data": {"content": f"read README.md ({index})", "llm": LLM_DIRECTIVE},
        }
        client.send_event("bench", "c0", event, wait=True, wait_timeout_s=60)


def measure(connections: int, warmup: int, request: str = "turn") -> ConnectionReport:
    """Run the benchmark; return the figures before and after."""
    base = tempfile.mkdtemp(prefix="roost-connection-bench-")
    home, root = os.path.join(base, "home"), os.path.join(base, "root")
    seed_root(root)
    pid = start_daemon(home, timeout_s=60)
    proc = psutil.Process(pid)
    try:
        with Client.connect(home=home, timeout_s=60) as client:
            options = {"idle_passivation_ms": 3_600_000, "token_budget": LARGEST_TOKEN_BUDGET}
            client.start_project(root, project_id="bench", options=options)
            client.start_conversation("bench", "c0")
        for i in range(warmup):
            _one(home, request, i)
        time.sleep(1.0)
        with Client.connect(home=home, timeout_s=60) as client:
            before = snapshot(proc, client)
        started = time.monotonic()
        for i in range(connections):
            _one(home, request, warmup + i)
        elapsed = time.monotonic() - started
        time.sleep(1.0)
        with Client.connect(home=home, timeout_s=60) as client:
            after = snapshot(proc, client)
    finally:
        stop_daemon(home, timeout_s=30)
        shutil.rmtree(base, ignore_errors=True)
    grown = after["uss_mib"] - before["uss_mib"]
    return {
        "request": request,
        "connections": connections,
        "warmup": warmup,
        "seconds": round(elapsed, 1),
        "before": before,
        "after": after,
        "uss_growth_mib": round(grown, 2),
        "per_connection_kib": round(grown * 1024 / max(connections, 1), 2),
    }


def main(argv: list[str] | None = None) -> int:
    """Entry point: ``python -m soak.connection_bench [--connections N] [--warmup N]``."""
    parser = argparse.ArgumentParser(prog="python -m soak.connection_bench")
    parser.add_argument("--connections", type=int, default=2000, help="default 2000")
    parser.add_argument("--warmup", type=int, default=200, help="default 200")
    parser.add_argument("--request", choices=("turn", "list_projects"), default="turn")
    args = parser.parse_args(argv)
    print(json.dumps(measure(args.connections, args.warmup, args.request)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
