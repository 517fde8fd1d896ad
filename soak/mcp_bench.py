"""The cost of one call of an MCP stdio server through a real daemon: ``python -m soak.mcp_bench``.

Starts a daemon on a temporary home and a project whose ``mcp_servers`` holds one stdio
server (the SDK's own ``MCPServer`` with an ``echo`` tool, written into the root), calls
it once to start it, then times ``--runs`` calls of ``mcp.bench.echo`` one after another
through the client and prints the median and 90th percentile latency in milliseconds as
JSON. What it measures is the per-call cost around a warm server (the view check, thawing
and freezing it, the post-run check, the pipeline), not its cold start.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

from runtime.client import Client
from runtime.daemon import start_daemon, stop_daemon

__all__ = ["main", "measure"]

SERVER = """
from mcp.server.mcpserver import MCPServer

server = MCPServer("bench")


@server.tool()
def echo(text: str) -> str:
    return text


server.run()
"""


def measure(runs: int, files: int) -> dict[str, float]:
    """Run the benchmark; return ``{median_ms, p90_ms, runs}``."""
    base = tempfile.mkdtemp(prefix="roost-mcp-bench-")
    home, root = os.path.join(base, "home"), os.path.join(base, "root")
    os.makedirs(root)
    for i in range(files):
        with open(os.path.join(root, f"f{i}.txt"), "w", encoding="utf-8") as f:
            f.write("x\n")
    with open(os.path.join(root, "server.py"), "w", encoding="utf-8") as f:
        f.write(SERVER)
    entry = {"name": "bench", "command": [sys.executable, os.path.join(root, "server.py")]}
    start_daemon(home, timeout_s=60)
    try:
        with Client.connect(home=home, timeout_s=60) as client:
            client.start_project(root, project_id="bench", options={"mcp_servers": [entry]})
            call = {"name": "mcp.bench.echo", "args": {"text": "x"}}
            latencies = []
            for i in range(runs + 1):
                started = time.monotonic()
                result = client.run_tool("bench", call)
                if i:  # the first call starts the server
                    latencies.append((time.monotonic() - started) * 1000)
                if result["status"] != "ok":
                    raise RuntimeError(f"mcp.bench.echo failed: {result['reason']}")
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
    """Entry point: ``python -m soak.mcp_bench [--runs N] [--files N]``."""
    parser = argparse.ArgumentParser(prog="python -m soak.mcp_bench")
    parser.add_argument("--runs", type=int, default=40, help="calls to time (default 40)")
    parser.add_argument("--files", type=int, default=200, help="files in the root (default 200)")
    args = parser.parse_args(argv)
    print(json.dumps(measure(args.runs, args.files)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
