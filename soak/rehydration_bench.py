"""The first turn after passivation, short history and long: ``python -m soak.rehydration_bench``.

Starts a daemon on a temporary home with two projects that differ in one option:
``replay`` (``snapshot_every_events`` 0: a conversation that comes back folds its whole
history) and ``snapshot`` (the default: it reads its snapshot and the events after it).
Each gets a ``short`` conversation of ``--short`` turns and a ``long`` one of ``--long``
turns (the soak's turn: the model reads ``README.md``, then answers), built side by side.
Then, ``--samples`` times, each conversation is left to passivate (``--idle-ms``) and one
more turn is timed from the client, ``send_event`` with ``wait`` (rehydration included),
then one more while it is still live (a warm turn, for comparison: what a turn costs
without rehydration, which also grows with the model's context).

It prints JSON: the median first-turn and warm-turn milliseconds per project and
conversation, the long/short ratio of each project's first turns (the goal of issue 18: at
most 2 with snapshots) and the snapshot/replay ratio of the long conversation's first
turn, all from one run. Figures are in
``docs/performance.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from typing import TypedDict

from runtime.client import Client
from runtime.daemon import start_daemon, stop_daemon
from soak.bootstrap import LARGEST_TOKEN_BUDGET, seed_root
from soak.scenarios import LLM_DIRECTIVE

__all__ = ["RehydrationReport", "main", "measure"]

PROJECTS = {"replay": 0, "snapshot": None}
"""Project → its ``snapshot_every_events`` (None: the default)."""


def _event(text: str) -> dict[str, object]:
    return {"type": "user.message", "data": {"content": text, "llm": LLM_DIRECTIVE}}


def _build(home: str, project: str, conversation: str, turns: int) -> None:
    """Run ``turns`` turns in the conversation, one after another."""
    with Client.connect(home=home, timeout_s=120) as client:
        client.start_conversation(project, conversation)
        for i in range(turns):
            client.send_event(project, conversation, _event(f"read README.md ({i})"), wait=True)


def _passivated(client: Client, project: str, conversation: str, limit_s: float = 120) -> None:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if conversation not in client.diagnostics(project)["active_conversations"]:
            return
        time.sleep(0.05)
    raise RuntimeError(f"{project}/{conversation} was not passivated within {limit_s} s")


class RehydrationReport(TypedDict):
    """What :func:`measure` returns: first and warm turn times by project and history."""

    short_turns: int
    long_turns: int
    samples: int
    idle_ms: int
    build_s: float
    first_turn_ms_median: dict[str, dict[str, float]]
    warm_turn_ms_median: dict[str, dict[str, float]]
    first_turn_ms_all: dict[str, dict[str, list[float]]]
    long_over_short: dict[str, float]
    long_snapshot_over_replay: float


def measure(short: int, long: int, samples: int, idle_ms: int) -> RehydrationReport:
    """Run the benchmark; return the first-turn medians (ms) and their ratios."""
    base = tempfile.mkdtemp(prefix="roost-rehydration-bench-")
    home, root = os.path.join(base, "home"), os.path.join(base, "root")
    seed_root(root)
    start_daemon(home, timeout_s=60)
    times: dict[str, dict[str, list[float]]] = {p: {"short": [], "long": []} for p in PROJECTS}
    warm: dict[str, dict[str, list[float]]] = {p: {"short": [], "long": []} for p in PROJECTS}
    started = time.monotonic()
    try:
        with Client.connect(home=home, timeout_s=120) as client:
            for project, every in PROJECTS.items():
                options: dict[str, object] = {
                    "idle_passivation_ms": idle_ms,
                    "token_budget": LARGEST_TOKEN_BUDGET,
                }
                if every is not None:
                    options["snapshot_every_events"] = every
                client.start_project(root, project_id=project, options=options)
            jobs = [(p, c, n) for p in PROJECTS for c, n in (("short", short), ("long", long))]
            with ThreadPoolExecutor(len(jobs)) as pool:
                list(pool.map(lambda job: _build(home, *job), jobs))
            built_s = time.monotonic() - started
            for sample in range(samples):
                for project, conversation, _ in jobs:
                    _passivated(client, project, conversation)
                    t0 = time.perf_counter()
                    client.send_event(
                        project, conversation, _event(f"read README.md (s{sample})"), wait=True
                    )
                    t1 = time.perf_counter()
                    client.send_event(
                        project, conversation, _event(f"read README.md (w{sample})"), wait=True
                    )
                    t2 = time.perf_counter()
                    times[project][conversation].append((t1 - t0) * 1000)
                    warm[project][conversation].append((t2 - t1) * 1000)
    finally:
        stop_daemon(home, timeout_s=60)
        shutil.rmtree(base, ignore_errors=True)
    medians = {
        p: {c: round(statistics.median(v), 1) for c, v in by.items()} for p, by in times.items()
    }
    warm_medians = {
        p: {c: round(statistics.median(v), 1) for c, v in by.items()} for p, by in warm.items()
    }
    return {
        "short_turns": short,
        "long_turns": long,
        "samples": samples,
        "idle_ms": idle_ms,
        "build_s": round(built_s, 1),
        "first_turn_ms_median": medians,
        "warm_turn_ms_median": warm_medians,
        "first_turn_ms_all": {
            p: {c: [round(x, 1) for x in v] for c, v in by.items()} for p, by in times.items()
        },
        "long_over_short": {p: round(m["long"] / m["short"], 2) for p, m in medians.items()},
        "long_snapshot_over_replay": round(
            medians["snapshot"]["long"] / medians["replay"]["long"], 2
        ),
    }


def main(argv: list[str] | None = None) -> int:
    """Entry point: ``python -m soak.rehydration_bench [--short N] [--long N] [--samples N]``."""
    parser = argparse.ArgumentParser(prog="python -m soak.rehydration_bench")
    parser.add_argument("--short", type=int, default=10, help="turns of history (default 10)")
    parser.add_argument("--long", type=int, default=2500, help="turns of history (default 2500)")
    parser.add_argument("--samples", type=int, default=5, help="timed turns each (default 5)")
    parser.add_argument("--idle-ms", type=int, default=300, help="passivation (default 300)")
    args = parser.parse_args(argv)
    print(json.dumps(measure(args.short, args.long, args.samples, args.idle_ms), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
