"""What the ``roost`` program costs by itself: ``--version``, and what ``send`` adds to a turn.

Run ``python scripts/cli_bench.py [--runs 20] [--cli-tree DIR]``. It prints:

- ``roost --version``: the wall time of ``python -m runtime.cli --version`` (median and
  best of ``--runs``) and its CPU time (user + system, median), beside ``python -c pass``
  (the interpreter's own start) measured the same way, interleaved, so a busy machine
  slows both;
- a TAB after ``roost pro`` (the shell's completion request; no daemon asked);
- ``roost send P C TEXT --wait``, against a real daemon (its own ``ROOST_HOME``; the
  deterministic model): the program's wall time, the turn as the daemon saw it (the
  ``user.message`` event to the ``llm.completed`` event of that turn, from the journal), and
  the same send made by an in-process client that is already connected, and by one that
  connects for it (as the program does). The CLI's overhead is the program's time minus the
  connected client's; the program alone (start, imports, parsing, output) is its time minus
  the connecting client's.

``--cli-tree DIR`` runs the ``roost`` of another checkout (e.g. the commit before a change)
for both measurements; the daemon always comes from this one.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from runtime.client import Client
from runtime.daemon import start_daemon, stop_daemon

ROOT = Path(__file__).resolve().parents[1]


def timed(argv: Sequence[str], env: dict[str, str]) -> tuple[float, float]:
    """Run ``argv``; return its wall and CPU (user + system) seconds. It must exit 0.

    It runs in the checkout of ``env["PYTHONPATH"]``: ``python -m`` puts the working
    directory first on ``sys.path``.
    """
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        argv, env=env, cwd=env["PYTHONPATH"], capture_output=True, text=True, check=False
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.strip()}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def ms(values: Sequence[float]) -> str:
    """``median N ms, best N ms`` of seconds."""
    return f"median {statistics.median(values) * 1000:.0f} ms, best {min(values) * 1000:.0f} ms"


def bench_version(runs: int, env: dict[str, str]) -> None:
    """``roost --version`` and ``python -c pass``, interleaved, ``runs`` times each."""
    roost = [sys.executable, "-m", "runtime.cli", "--version"]
    bare = [sys.executable, "-c", "pass"]
    walls: dict[str, list[float]] = {"roost": [], "python": []}
    cpus: dict[str, list[float]] = {"roost": [], "python": []}
    for _ in range(runs):
        for name, argv in (("roost", roost), ("python", bare)):
            wall, cpu = timed(argv, env)
            walls[name].append(wall)
            cpus[name].append(cpu)
    for name, label in (("roost", "roost --version"), ("python", "python -c pass ")):
        cpu = statistics.median(cpus[name]) * 1000
        print(f"{label}: wall {ms(walls[name])}; CPU median {cpu:.0f} ms")


def bench_tab(runs: int, env: dict[str, str]) -> None:
    """A TAB after ``roost pro`` (the commands that start so), no daemon asked."""
    with tempfile.TemporaryDirectory(prefix="roost-cli-bench-") as base:
        line = "roost pro"
        tab = {
            **env,
            "_ARGCOMPLETE": "1",
            "_ARGCOMPLETE_SHELL": "bash",
            "_ARGCOMPLETE_STDOUT_FILENAME": os.path.join(base, "out"),
            "COMP_LINE": line,
            "COMP_POINT": str(len(line)),
        }
        walls, cpus = [], []
        for _ in range(runs):
            wall, cpu = timed([sys.executable, "-m", "runtime.cli"], tab)
            walls.append(wall)
            cpus.append(cpu)
    cpu_ms = statistics.median(cpus) * 1000
    print(f"a TAB (roost pro): wall {ms(walls)}; CPU median {cpu_ms:.0f} ms")


def _turn_s(client: Client, project: str, conversation: str, correlation: str) -> float:
    """The turn as the daemon saw it: ``user.message`` to ``llm.completed``, in seconds."""
    timeline = client.incident_timeline(project, conversation, 500, correlation)
    at = {e["type"]: e["at"] for e in timeline["entries"]}
    start = datetime.fromisoformat(at["user.message"].replace("Z", "+00:00"))
    end = datetime.fromisoformat(at["llm.completed"].replace("Z", "+00:00"))
    return (end - start).total_seconds()


def bench_send(runs: int, env: dict[str, str]) -> None:
    """``roost send --wait`` beside the same send from a client in this process."""
    rows: dict[str, list[float]] = {k: [] for k in ("cli", "cpu", "turn", "warm", "fresh")}
    with tempfile.TemporaryDirectory(prefix="roost-cli-bench-") as base:
        home = os.path.join(base, "home")
        root = os.path.join(base, "repo")
        os.makedirs(root)
        Path(root, "README.md").write_text("hello\n")
        start_daemon(home, env={"PYTHONPATH": str(ROOT)}, timeout_s=120)
        try:
            with Client.connect(home) as c:
                c.start_project(root, project_id="bench")
                c.start_conversation("bench", conversation_id="c1")
                c.send_message("bench", "c1", "hello", wait=True)  # warm the conversation
                for i in range(runs):
                    corr = f"corr-cli-{i}"
                    argv = [sys.executable, "-m", "runtime.cli", "--home", home, "send"]
                    argv += ["bench", "c1", "hello", "--wait", "--correlation-id", corr]
                    wall, cpu = timed(argv, env)
                    rows["cli"].append(wall)
                    rows["cpu"].append(cpu)
                    rows["turn"].append(_turn_s(c, "bench", "c1", corr))
                    start = time.perf_counter()
                    c.send_message("bench", "c1", "hello", wait=True)
                    rows["warm"].append(time.perf_counter() - start)
                    start = time.perf_counter()
                    with Client.connect(home) as new:
                        new.send_message("bench", "c1", "hello", wait=True)
                    rows["fresh"].append(time.perf_counter() - start)
        finally:
            stop_daemon(home, timeout_s=60)

    def minus(a: str, b: str) -> list[float]:
        return [x - y for x, y in zip(rows[a], rows[b], strict=True)]

    cpu_ms = statistics.median(rows["cpu"]) * 1000
    print(f"roost send --wait: wall {ms(rows['cli'])}; CPU median {cpu_ms:.0f} ms")
    print(f"  the turn, daemon-side (user.message to llm.completed): {ms(rows['turn'])}")
    print(f"  roost send - the daemon-side turn: {ms(minus('cli', 'turn'))}")
    print(f"  in-process client, connected: {ms(rows['warm'])}")
    print(f"  in-process client, connecting for the send: {ms(rows['fresh'])}")
    print(f"  CLI overhead (roost - connected client): {ms(minus('cli', 'warm'))}")
    print(f"  the program alone (roost - connecting client): {ms(minus('cli', 'fresh'))}")


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the options and print both measurements."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="runs of each command")
    parser.add_argument("--cli-tree", default=str(ROOT), help="the checkout whose roost runs")
    parser.add_argument("--only", choices=("version", "tab", "send"), help="one measurement only")
    ns = parser.parse_args(argv)
    env = {**os.environ, "PYTHONPATH": ns.cli_tree}
    env.pop("ROOST_HOME", None)
    # as installed: the modules' bytecode written once and read after, in both checkouts
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    subprocess.run([sys.executable, "-m", "compileall", "-q", ns.cli_tree], env=env, check=True)
    print(f"roost from {ns.cli_tree}, {ns.runs} runs, load average {os.getloadavg()[0]:.1f}")
    if ns.only in (None, "version"):
        bench_version(ns.runs, env)
    if ns.only in (None, "tab"):
        bench_tab(ns.runs, env)
    if ns.only in (None, "send"):
        bench_send(ns.runs, env)
    return 0


if __name__ == "__main__":
    sys.exit(main())
