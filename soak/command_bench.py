"""The cost of one tool process call through a real daemon: ``python -m soak.command_bench``.

Starts a daemon on a temporary home, a project whose root holds ``--files`` small files,
and runs ``--runs`` calls one after another through the client, then prints the median
and 90th percentile latency in milliseconds as JSON. By default the call is
``command.run true``: what it measures is the sandbox's fixed cost per command (the view,
the pids cgroup, bubblewrap, the process tree walk), not a command's own work. With
``--mcp`` it is ``echo`` on an MCP stdio server of the project (the SDK's own
``MCPServer``, written into the root), called once first to start it: the per-call cost
around a warm server (the view check, thawing and freezing it, the post-run check).

For ``command.run`` it also times the floor in the same run: a bare
``bwrap --unshare-all --ro-bind / / true`` started from this process after each call
(``floor_ms``, its median, and ``floor_ratio``, the call's median over it; the goal in
issue 18 is a ratio of at most 3). Figures are in ``docs/performance.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import TypedDict

from runtime.client import Client
from runtime.daemon import start_daemon, stop_daemon

__all__ = ["FLOOR_ARGV", "main", "measure"]

FLOOR_ARGV = ["--unshare-all", "--ro-bind", "/", "/", "true"]
"""A bare bubblewrap run (after ``bwrap``): the floor a sandboxed command cannot go under."""

MCP_SERVER = """
from mcp.server.mcpserver import MCPServer

server = MCPServer("bench")


@server.tool()
def echo(text: str) -> str:
    return text


server.run()
"""


def _floor_once(bwrap: str) -> float:
    """Milliseconds of one bare bubblewrap run (``FLOOR_ARGV``)."""
    started = time.monotonic()
    subprocess.run([bwrap, *FLOOR_ARGV], stdin=subprocess.DEVNULL, check=True)
    return (time.monotonic() - started) * 1000


class _Timed(TypedDict):
    """The ``run_tool`` request the benchmark times."""

    name: str
    args: dict[str, str]


def measure(runs: int, files: int, *, mcp: bool = False) -> dict[str, float]:
    """Run the benchmark; return ``{median_ms, p90_ms, runs}`` (and the floor, see above)."""
    base = tempfile.mkdtemp(prefix="roost-command-bench-")
    home, root = os.path.join(base, "home"), os.path.join(base, "root")
    os.makedirs(root)
    for i in range(files):
        with open(os.path.join(root, f"f{i}.txt"), "w", encoding="utf-8") as f:
            f.write("x\n")
    options: dict[str, object] = {}
    call: _Timed = {"name": "command.run", "args": {"command": "true"}}
    if mcp:
        with open(os.path.join(root, "server.py"), "w", encoding="utf-8") as f:
            f.write(MCP_SERVER)
        server = {"name": "bench", "command": [sys.executable, os.path.join(root, "server.py")]}
        options = {"mcp_servers": [server]}
        call = {"name": "mcp.bench.echo", "args": {"text": "x"}}
    bwrap = None if mcp else shutil.which("bwrap")
    floor: list[float] = []
    start_daemon(home, timeout_s=60)
    try:
        with Client.connect(home=home, timeout_s=60) as client:
            client.start_project(root, project_id="bench", options=options)
            latencies = []
            for i in range(runs + int(mcp)):
                started = time.monotonic()
                result = client.run_tool("bench", call)
                if i or not mcp:  # an MCP server's first call starts it
                    latencies.append((time.monotonic() - started) * 1000)
                if result["status"] != "ok":
                    raise RuntimeError(f"{call['name']} failed: {result['reason']}")
                if bwrap is not None:  # alternately, so both see the same machine
                    floor.append(_floor_once(bwrap))
    finally:
        stop_daemon(home, timeout_s=30)
        shutil.rmtree(base, ignore_errors=True)
    ordered = sorted(latencies)
    figures = {
        "median_ms": round(statistics.median(ordered), 1),
        "p90_ms": round(ordered[int(len(ordered) * 0.9) - 1], 1),
        "runs": float(runs),
    }
    if floor:
        figures["floor_ms"] = round(statistics.median(floor), 1)
        figures["floor_ratio"] = round(statistics.median(ordered) / statistics.median(floor), 1)
    return figures


def main(argv: list[str] | None = None) -> int:
    """Entry point: ``python -m soak.command_bench [--runs N] [--files N] [--mcp]``."""
    parser = argparse.ArgumentParser(prog="python -m soak.command_bench")
    parser.add_argument("--runs", type=int, default=40, help="calls to time (default 40)")
    parser.add_argument("--files", type=int, default=200, help="files in the root (default 200)")
    parser.add_argument(
        "--mcp", action="store_true", help="time an MCP stdio server's echo instead"
    )
    args = parser.parse_args(argv)
    print(json.dumps(measure(args.runs, args.files, mcp=args.mcp)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
