"""Does passivation churn leave memory behind? ``python -m soak.churn_bench``.

Starts a daemon on a temporary home and a project whose conversations are passivated
after ``--idle-ms`` idle, then repeats rounds: one turn in each of ``--conversations``
conversations (each one rehydrated from the journal for it), then a wait until every
conversation process has exited again. After the warm-up round and at each checkpoint
(``--checkpoints``, counted in rehydrations) it reads the USS of the always-on processes
(``soak.leaks``: the daemon, Thespian's, the Supervisor, the Journal, the project's
Project, Policy and ToolRunner) and prints them all as JSON: a leak grows with every
checkpoint, a cache stops growing.

With ``--reads`` a round wakes each conversation with ``get_projection`` instead: the
history each rehydration reads stays the same size, so what grows with the number of
rehydrations alone shows apart from what grows with the history.

Figures are in ``docs/performance.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from typing import TypedDict

from runtime.client import Client
from runtime.daemon import daemon_processes, start_daemon, stop_daemon
from soak.bootstrap import LARGEST_TOKEN_BUDGET, seed_root
from soak.leaks import Watch, read_always_on
from soak.scenarios import LLM_DIRECTIVE

__all__ = ["ChurnReport", "main", "measure"]

_MIB = 1024 * 1024


def _round(home: str, conversations: int, index: int, *, read: bool = False) -> None:
    def turn(c: int) -> None:
        event = {
            "type": "user.message",
            "data": {"content": f"read README.md ({index})", "llm": LLM_DIRECTIVE},
        }
        with Client.connect(home=home, timeout_s=60) as client:
            if read:  # wakes the conversation as a turn would, and adds no event
                client.get_projection("churn", f"c{c}", "diagnostics")
                return
            client.send_event("churn", f"c{c}", event, wait=True, wait_timeout_s=60)

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(turn, range(conversations)))


class ChurnReport(TypedDict):
    """What :func:`measure` returns: each process's USS (MiB) after so many rehydrations."""

    conversations: int
    idle_ms: int
    woken_by: str
    seconds: float
    uss_mib_by_rehydrations: dict[str, dict[str, float]]


def _wait_passivated(home: str, processes: int, limit_s: float = 60.0) -> None:
    deadline = time.monotonic() + limit_s
    while len(daemon_processes(home)) > processes and time.monotonic() < deadline:
        time.sleep(0.1)


def measure(
    conversations: int, idle_ms: int, checkpoints: list[int], *, reads: bool = False
) -> ChurnReport:
    """Run the benchmark; return USS (MiB) per process at each checkpoint."""
    base = tempfile.mkdtemp(prefix="roost-churn-bench-")
    home, root = os.path.join(base, "home"), os.path.join(base, "root")
    seed_root(root)
    pid = start_daemon(home, timeout_s=60)
    table: dict[str, dict[str, float]] = {}
    started = time.monotonic()
    try:
        with Client.connect(home=home, timeout_s=60) as client:
            options = {"idle_passivation_ms": idle_ms, "token_budget": LARGEST_TOKEN_BUDGET}
            client.start_project(root, project_id="churn", options=options)
            watch = Watch(home, pid)
            watch.name_processes()
            processes = len(daemon_processes(home))
            for c in range(conversations):
                client.start_conversation("churn", f"c{c}")
        names = watch.names

        def read() -> dict[str, float]:
            readings, _ = read_always_on(home, pid, names)
            return {r.name: round(r.uss / _MIB, 2) for r in readings}

        _round(home, conversations, 0)  # warm-up: the conversations' first turns
        _wait_passivated(home, processes)
        table["0"] = read()
        rehydrations, index = 0, 1
        for target in checkpoints:
            while rehydrations < target:
                _round(home, conversations, index, read=reads)
                _wait_passivated(home, processes)
                index += 1
                rehydrations += conversations
            table[str(rehydrations)] = read()
    finally:
        stop_daemon(home, timeout_s=30)
        shutil.rmtree(base, ignore_errors=True)
    return {
        "conversations": conversations,
        "idle_ms": idle_ms,
        "woken_by": "get_projection" if reads else "a turn",
        "seconds": round(time.monotonic() - started, 1),
        "uss_mib_by_rehydrations": table,
    }


def main(argv: list[str] | None = None) -> int:
    """Entry point: ``python -m soak.churn_bench [--conversations N] [--checkpoints ...]``."""
    parser = argparse.ArgumentParser(prog="python -m soak.churn_bench")
    parser.add_argument("--conversations", type=int, default=16, help="default 16")
    parser.add_argument("--idle-ms", type=int, default=300, help="default 300")
    parser.add_argument(
        "--checkpoints",
        default="160,400,700,1000",
        help="rehydration counts to read memory at (default 160,400,700,1000)",
    )
    parser.add_argument(
        "--reads",
        action="store_true",
        help="wake each conversation with a read (get_projection) instead of a turn: the "
        "history read at each rehydration stays the same size",
    )
    args = parser.parse_args(argv)
    checkpoints = [int(x) for x in args.checkpoints.split(",") if x]
    print(
        json.dumps(
            measure(args.conversations, args.idle_ms, checkpoints, reads=args.reads), indent=1
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
