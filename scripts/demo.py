"""``make demo``: a real daemon, a real project, one turn that calls a real tool.

Everything is done with the ``roost`` command line, and each command is printed before
its real output. It starts a daemon on a temporary ROOST_HOME (SQLite journal), starts a
sample project, sends a message that makes the deterministic model read a file, shows
what the model read, the turn's timeline and its incident report, verifies the journal,
stops the daemon and checks that no process is left. The home and the project are kept,
and the last lines say how to look at them again.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import subprocess
import sys
import tempfile

import psutil

from runtime.daemon import daemon_processes

SEED = """# Sample project

This file is read by the demo's first tool call.
"""

SKILL = """---
description: How to review a change
---
Read the diff, run the tests, then write down what you found.
"""


def _roost_program() -> str:
    """How a person runs this ``roost``: ``.venv/bin/roost`` from the clone, else its path."""
    program = os.path.join(os.path.dirname(sys.executable), "roost")
    relative = os.path.relpath(program)
    return relative if not relative.startswith("..") else program


def roost(*args: str, title: str | None = None) -> int:
    """Run ``roost ARGS`` as a person would, printing the command and its output."""
    if title:
        print(f"\n# {title}")
    print("$ roost " + shlex.join(args), flush=True)
    done = subprocess.run(
        [sys.executable, "-m", "runtime.cli", *args],
        capture_output=True,
        text=True,
        check=False,
    )
    sys.stdout.write(done.stdout)
    sys.stdout.write(done.stderr)
    sys.stdout.flush()
    return done.returncode


def _left_running(home: str) -> list[psutil.Process]:
    left = []
    for proc in daemon_processes(home):
        with contextlib.suppress(psutil.NoSuchProcess):
            if proc.status() != psutil.STATUS_ZOMBIE:
                left.append(proc)
    return left


def main() -> int:
    """Run the demo; exit 0 when the turn completed and nothing is left running."""
    base = tempfile.mkdtemp(prefix="roost-demo-")
    home = os.path.join(base, "home")
    root = os.path.join(base, "project")
    os.makedirs(os.path.join(root, ".roost", "skills"))
    with open(os.path.join(root, "README.md"), "w") as f:
        f.write(SEED)
    with open(os.path.join(root, ".roost", "skills", "review.md"), "w") as f:
        f.write(SKILL)
    steps: list[tuple[list[str], str | None]] = [
        (["project", "start", root, "--id", "demo"], None),
        (["conversation", "start", "demo", "--id", "c1"], None),
        (
            ["send", "demo", "c1", "read README.md", "--correlation-id", "corr-demo", "--wait"],
            "a message that makes the model read a file, and the turn it started",
        ),
        (
            ["projection", "demo", "c1", "llm_context"],
            "what the model saw: the message, its tool call, the file it read",
        ),
        (
            ["timeline", "demo", "c1", "--correlation-id", "corr-demo"],
            "every event of the turn, and the policy's signals",
        ),
        (
            ["incident", "demo", "c1", "--correlation-id", "corr-demo"],
            "the incident report: causal chain, failures, latency",
        ),
        (["verify", "demo"], "replay + hash chain check"),
    ]
    statuses: list[int] = []
    try:
        statuses.append(roost("daemon", "start", "--home", home, title="a daemon on a new home"))
        for args, title in steps:
            statuses.append(roost("--home", home, *args, title=title))
    finally:
        statuses.append(roost("--home", home, "daemon", "stop", title="stop the daemon"))
        left = _left_running(home)
        print("processes left:", len(left))
    ok = not any(statuses) and not left
    program = _roost_program()
    print(
        f"\nThe demo's state is kept in {base} (home/: journal and logs; project/: the "
        "sample\nrepository). To look at it again (the daemon restores the project from "
        "its events):\n"
    )
    for command in (
        f"{program} daemon start --home {home}",
        f"{program} --home {home} timeline demo c1",
        f"{program} --home {home} daemon stop",
    ):
        print(f"  {command}")
    print(f"\nThen remove it: rm -rf {base}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
