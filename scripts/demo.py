"""``make demo``: a real daemon, a real project, one turn that calls a real tool.

It starts a daemon on a temporary ROOST_HOME (SQLite journal), starts a sample project,
sends a message that makes the deterministic model read a file, prints the turn's
timeline and its incident report, stops the daemon and checks that no process is left.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile

import psutil

from runtime.client import Client
from runtime.daemon import start_daemon, stop_daemon
from runtime.daemon.processes import daemon_processes

SEED = """# Sample project

This file is read by the demo's first tool call.
"""

SKILL = """---
description: How to review a change
---
Read the diff, run the tests, then write down what you found.
"""


def _print_timeline(timeline: dict[str, object]) -> None:
    entries = timeline["entries"]
    assert isinstance(entries, list)
    print(f"{'seq':>4}  {'source':<12} {'type':<24} summary")
    for entry in entries:
        data = entry["data"]
        summary = ""
        for key in ("content", "name", "tool", "reason", "finish_reason"):
            if isinstance(data.get(key), str) and data[key]:
                summary = f"{key}={data[key]!r}"
                break
        print(f"{entry['seq']:>4}  {entry['source']:<12} {entry['type']:<24} {summary[:60]}")


def main() -> int:
    """Run the demo; exit 0 when the turn completed and nothing is left running."""
    home = tempfile.mkdtemp(prefix="roost-demo-home-")
    root = tempfile.mkdtemp(prefix="roost-demo-project-")
    with open(os.path.join(root, "README.md"), "w") as f:
        f.write(SEED)
    os.makedirs(os.path.join(root, ".roost", "skills"))
    with open(os.path.join(root, ".roost", "skills", "review.md"), "w") as f:
        f.write(SKILL)
    pid = 0
    ok = False
    try:
        print(f"$ roost daemon start --home {home}")
        pid = start_daemon(home)
        print(f"daemon running (pid {pid}); journal: {os.path.join(home, 'journal.sqlite')}\n")
        with Client.connect(home) as client:
            project = client.start_project(root, project_id="demo")
            conversation = client.start_conversation(project, conversation_id="c1")
            print(f"$ roost send {project} {conversation} 'read README.md' --wait")
            ack = client.send_message(
                project, conversation, "read README.md", correlation_id="corr-demo", wait=True
            )
            print(f"turn over: {ack['outcome']} (ack seq {ack['seq']})\n")
            print(f"$ roost timeline {project} {conversation} --correlation-id corr-demo")
            timeline = client.incident_timeline(
                project, conversation, limit=100, correlation_id="corr-demo"
            )
            _print_timeline(timeline)
            print(f"\n$ roost incident {project} {conversation} --format md")
            print(client.incident_report(project, conversation, format="md"))
            verified = client.verify(project)
            print(
                f"$ roost verify {project}\nok={verified['ok']} "
                f"checked_events={verified['checked_events']} chain_ok={verified['chain_ok']}"
            )
            ok = ack["outcome"] == "llm.completed" and bool(verified["ok"])
    finally:
        print("\n$ roost daemon stop")
        stop_daemon(home)
        left = []
        for proc in daemon_processes(home):
            with contextlib.suppress(psutil.NoSuchProcess):
                if proc.status() != psutil.STATUS_ZOMBIE:
                    left.append(proc)
        print("daemon stopped; processes left:", len(left))
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(root, ignore_errors=True)
    return 0 if ok and not left else 1


if __name__ == "__main__":
    sys.exit(main())
