"""A realistic incident in a real daemon: one conversation, five turns, every kind of trouble.

``stage_incident`` drives a running daemon through the real client: a tool call that
works, a policy denial (with its sandbox signal), a failing tool, a tool timeout, and a
ToolRunner killed during a call (``actor.crashed`` / ``actor.restarted``, the call failed
with ``tool_crashed``). Text that users, models and tools wrote carries ``hostile``, so a
renderer that forgets to escape shows it. Used by the HTML incident report's tests and by
``scripts/incident_screenshot.py``.
"""

from __future__ import annotations

import time
from typing import Any

from runtime.client import Client

PROJECT = "shop"
"""The project's id."""

CONVERSATION = "c1"
"""The conversation's id."""

OPTIONS: dict[str, Any] = {"tool_timeout_ms": 1000, "network_egress_policy": "allow"}
"""Tool calls limited to one second, so ``sleep 30`` times out."""

CORRELATIONS = ("corr-read", "corr-denied", "corr-failed", "corr-stuck", "corr-crash")
"""One correlation per turn, in order."""


def _wait(predicate: Any, what: str, timeout_s: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.05)


def _types(client: Client, correlation: str) -> list[str]:
    timeline = client.incident_timeline(PROJECT, CONVERSATION, 500, correlation)
    return [entry["type"] for entry in timeline["entries"]]


def stage_incident(client: Client, root: str, hostile: str = "") -> None:
    """Start ``shop/c1`` on ``root`` and play the five turns (a few seconds in all)."""
    client.start_project(root, project_id=PROJECT, options=OPTIONS)
    client.start_conversation(PROJECT, CONVERSATION)
    read, denied, failed, stuck, crash = CORRELATIONS
    client.send_message(PROJECT, CONVERSATION, "read README.md", read, wait=True)
    client.send_message(PROJECT, CONVERSATION, "read ../../etc/passwd", denied, wait=True)
    client.send_message(
        PROJECT,
        CONVERSATION,
        f"open the release notes{hostile}",
        failed,
        wait=True,
        llm={
            "assistant_text": f"Opening them.{hostile}",
            "tool_calls": [
                {"name": "fs.read", "args": {"path": f"docs/release-notes{hostile}.md"}}
            ],
        },
    )
    client.send_message(
        PROJECT,
        CONVERSATION,
        "run the build",
        stuck,
        wait=True,
        llm={"tool_calls": [{"name": "command.run", "args": {"command": "sleep 30"}}]},
    )
    client.send_message(
        PROJECT,
        CONVERSATION,
        "run it again",
        crash,
        llm={
            "tool_calls": [
                {"name": "command.run", "args": {"command": "sleep 30"}, "run_mode": "async"}
            ]
        },
    )
    _wait(lambda: "tool.started" in _types(client, crash), "the async call to start")
    # the ToolRunner is an entity of the project's host: crashed as a SIGKILL would a process
    client.call("inject_fault", {"project_id": PROJECT, "target": "toolrunner"})
    _wait(lambda: "llm.completed" in _types(client, crash), "the crashed turn to end")
    # the turn fails the call at the crash; the restart is recorded after its backoff
    _wait(
        lambda: any(
            e["type"] == "actor.restarted" for e in client.project_events(PROJECT)["entries"]
        ),
        "the ToolRunner's restart",
    )
