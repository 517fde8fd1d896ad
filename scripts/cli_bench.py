"""What the ``roost`` program costs by itself: ``--version``, a TAB, and what ``send`` adds.

Run ``python scripts/cli_bench.py [--runs 20] [--cli-tree DIR ...]``. Each ``--cli-tree``
is a checkout whose ``roost`` runs (default: this one); with several (e.g. the commit before
a change and this one) their runs are interleaved, so a busy machine slows them alike. The
bytecode of each is compiled first (as installed). It prints, median and best of ``--runs``:

- ``roost --version``: the wall and CPU time (user + system) of ``python -m runtime.cli
  --version``, beside ``python -c pass`` (the interpreter's own start);
- a TAB after ``roost pro`` (the shell's completion request; no daemon asked);
- ``roost send P C TEXT --wait`` against a real daemon of this checkout (its own
  ``ROOST_HOME``, the deterministic model): the program's wall and CPU time, the turn as the
  daemon saw it (``user.message`` to ``llm.completed``, from the journal), and the same send
  from a client in this process that connects for it, as the program does. What ``send``
  adds is the program's time minus that client's: the interpreter, the imports, the parser,
  the output;
- the CPU time of importing the parser, then the client, then ``msgspec`` (which the
  client no longer loads: what it would cost; the last checkout's).
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


def bench_version(runs: int, envs: dict[str, dict[str, str]]) -> None:
    """``roost --version`` of each checkout and ``python -c pass``, interleaved."""
    walls: dict[str, list[float]] = {name: [] for name in [*envs, "python -c pass"]}
    cpus: dict[str, list[float]] = {name: [] for name in walls}
    bare = next(iter(envs.values()))
    for _ in range(runs):
        for name, env in envs.items():
            wall, cpu = timed([sys.executable, "-m", "runtime.cli", "--version"], env)
            walls[name].append(wall)
            cpus[name].append(cpu)
        wall, cpu = timed([sys.executable, "-c", "pass"], bare)
        walls["python -c pass"].append(wall)
        cpus["python -c pass"].append(cpu)
    print("roost --version")
    for name, values in walls.items():
        print(f"  {name}: wall {ms(values)}; CPU {ms(cpus[name])}")


def bench_tab(runs: int, envs: dict[str, dict[str, str]]) -> None:
    """A TAB after ``roost pro`` (the commands that start so), no daemon asked."""
    walls: dict[str, list[float]] = {name: [] for name in envs}
    cpus: dict[str, list[float]] = {name: [] for name in envs}
    with tempfile.TemporaryDirectory(prefix="roost-cli-bench-") as base:
        line = "roost pro"
        tab = {
            "_ARGCOMPLETE": "1",
            "_ARGCOMPLETE_SHELL": "bash",
            "_ARGCOMPLETE_STDOUT_FILENAME": os.path.join(base, "out"),
            "COMP_LINE": line,
            "COMP_POINT": str(len(line)),
        }
        for _ in range(runs):
            for name, env in envs.items():
                wall, cpu = timed([sys.executable, "-m", "runtime.cli"], {**env, **tab})
                walls[name].append(wall)
                cpus[name].append(cpu)
    print("a TAB after `roost pro`")
    for name in envs:
        print(f"  {name}: wall {ms(walls[name])}; CPU {ms(cpus[name])}")


IMPORTS = {
    "python -c pass": "pass",
    "the parser (runtime.cli.app)": "import runtime.cli.app",
    "+ the client (runtime.client.connection)": "import runtime.cli.app, runtime.client.connection",
    "+ msgspec (the daemon's codec, not the client's)": (
        "import runtime.cli.app, runtime.client.connection, msgspec"
    ),
}
"""What the client's imports cost, step by step (``--only imports``); the last line shows
what msgspec would add (the client encodes with ``json``, ``runtime.wire.client_codec``)."""


def bench_imports(runs: int, envs: dict[str, dict[str, str]]) -> None:
    """CPU time of importing the parser, then the client, then ``msgspec`` (last checkout)."""
    env = list(envs.values())[-1]
    cpus: dict[str, list[float]] = {name: [] for name in IMPORTS}
    for _ in range(runs):
        for name, code in IMPORTS.items():
            cpus[name].append(timed([sys.executable, "-c", code], env)[1])
    print(f"imports, CPU ({env['PYTHONPATH']})")
    for name, values in cpus.items():
        print(f"  {name}: {ms(values)}")


def _turn_s(client: Client, project: str, conversation: str, correlation: str) -> float:
    """The turn as the daemon saw it: ``user.message`` to ``llm.completed``, in seconds."""
    timeline = client.incident_timeline(project, conversation, 500, correlation)
    at = {e["type"]: e["at"] for e in timeline["entries"]}
    start = datetime.fromisoformat(at["user.message"].replace("Z", "+00:00"))
    end = datetime.fromisoformat(at["llm.completed"].replace("Z", "+00:00"))
    return (end - start).total_seconds()


def bench_send(runs: int, envs: dict[str, dict[str, str]]) -> None:
    """``roost send --wait`` of each checkout beside the same send from a client here."""
    keys = [f"{name} {what}" for name in envs for what in ("wall", "cpu", "turn", "client")]
    rows: dict[str, list[float]] = {key: [] for key in keys}
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
                    for n, (name, env) in enumerate(envs.items()):
                        corr = f"corr-cli-{n}-{i}"
                        argv = [sys.executable, "-m", "runtime.cli", "--home", home, "send"]
                        argv += ["bench", "c1", "hello", "--wait", "--correlation-id", corr]
                        wall, cpu = timed(argv, env)
                        rows[f"{name} wall"].append(wall)
                        rows[f"{name} cpu"].append(cpu)
                        rows[f"{name} turn"].append(_turn_s(c, "bench", "c1", corr))
                        start = time.perf_counter()
                        with Client.connect(home) as new:
                            new.send_message("bench", "c1", "hello", wait=True)
                        rows[f"{name} client"].append(time.perf_counter() - start)
        finally:
            stop_daemon(home, timeout_s=60)
    print("roost send P C hello --wait")
    for name in envs:
        wall, client = rows[f"{name} wall"], rows[f"{name} client"]
        added = [a - b for a, b in zip(wall, client, strict=True)]
        print(f"  {name}: wall {ms(wall)}; CPU {ms(rows[f'{name} cpu'])}")
        print(f"    the turn, daemon-side: {ms(rows[f'{name} turn'])}")
        print(f"    the same send from a client here, connecting: {ms(client)}")
        print(f"    what roost send adds (wall - that client's): {ms(added)}")


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the options and print the measurements."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="runs of each command")
    parser.add_argument(
        "--cli-tree", action="append", metavar="DIR", help="a checkout whose roost runs"
    )
    parser.add_argument(
        "--only", choices=("version", "tab", "send", "imports"), help="one measurement only"
    )
    ns = parser.parse_args(argv)
    envs: dict[str, dict[str, str]] = {}
    for tree in ns.cli_tree or [str(ROOT)]:
        env = {**os.environ, "PYTHONPATH": tree}
        env.pop("ROOST_HOME", None)
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # as installed: bytecode written, then read
        subprocess.run([sys.executable, "-m", "compileall", "-q", tree], env=env, check=True)
        envs[tree] = env
    print(f"{ns.runs} runs, load average {os.getloadavg()[0]:.1f} at the start")
    if ns.only in (None, "version"):
        bench_version(ns.runs, envs)
    if ns.only in (None, "tab"):
        bench_tab(ns.runs, envs)
    if ns.only in (None, "send"):
        bench_send(ns.runs, envs)
    if ns.only in (None, "imports"):
        bench_imports(ns.runs, envs)
    print(f"load average {os.getloadavg()[0]:.1f} at the end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
