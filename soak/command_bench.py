"""The cost of one ``command.run`` through a real daemon: ``python -m soak.command_bench``.

Starts a daemon on a temporary home, a project whose root holds ``--files`` small files,
and runs ``--runs`` calls of ``command.run true`` one after another through the client,
then prints the median and 90th percentile latency in milliseconds as JSON. What it
measures is the sandbox's fixed cost per command (the view, the pids cgroup, bubblewrap,
the process tree walk), not a command's own work. Figures are in ``docs/performance.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time

from runtime.client import Client
from runtime.daemon import start_daemon, stop_daemon

__all__ = ["main", "measure"]


def measure(runs: int, files: int) -> dict[str, float]:
    """Run the benchmark; return ``{median_ms, p90_ms, runs}``."""
    base = tempfile.mkdtemp(prefix="roost-command-bench-")
    home, root = os.path.join(base, "home"), os.path.join(base, "root")
    os.makedirs(root)
    for i in range(files):
        with open(os.path.join(root, f"f{i}.txt"), "w", encoding="utf-8") as f:
            f.write("x\n")
    start_daemon(home, timeout_s=60)
    try:
        with Client.connect(home=home, timeout_s=60) as client:
            client.start_project(root, project_id="bench")
            latencies = []
            for _ in range(runs):
                started = time.monotonic()
                result = client.run_tool(
                    "bench", {"name": "command.run", "args": {"command": "true"}}
                )
                latencies.append((time.monotonic() - started) * 1000)
                if result["status"] != "ok":
                    raise RuntimeError(f"command.run failed: {result['reason']}")
    finally:
        stop_daemon(home, timeout_s=30)
        shutil.rmtree(base, ignore_errors=True)
    ordered = sorted(latencies)
    return {
        "median_ms": round(statistics.median(ordered), 1),
        "p90_ms": round(ordered[int(len(ordered) * 0.9) - 1], 1),
        "runs": float(runs),
    }


def main(argv: list[str] | None = None) -> int:
    """Entry point: ``python -m soak.command_bench [--runs N] [--files N]``."""
    parser = argparse.ArgumentParser(prog="python -m soak.command_bench")
    parser.add_argument("--runs", type=int, default=40, help="calls to time (default 40)")
    parser.add_argument("--files", type=int, default=200, help="files in the root (default 200)")
    args = parser.parse_args(argv)
    print(json.dumps(measure(args.runs, args.files)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
