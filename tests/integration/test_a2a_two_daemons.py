"""Two Roost daemons talking A2A: one project's conversation delegates to another's agent.

The callee is a second daemon (its own ``ROOST_HOME``) whose project is served by the real
``roost a2a serve --http 127.0.0.1:0``; the caller's project names that URL in
``a2a_agents`` (and ``127.0.0.1`` in ``network_allowlist``). A model turn of the caller
calls ``a2a.callee.send``; the delegated turn is then found in both journals, linked: the
caller's ``a2a.task_updated`` and incident report carry the remote task id, which is the
callee's correlation id, and its context id, which names the callee's conversation.
"""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.integration.adversarial_helpers import run_daemon
from tests.integration.conftest import REPO_ROOT, Daemon, make_root

C = "c1"


@pytest.fixture
def callee(tmp_path: Path) -> Iterator[Daemon]:
    """A second real daemon, on its own home; stopped afterwards, its tree gone."""
    with run_daemon(tmp_path / "callee-home") as running:
        yield running


@contextmanager
def a2a_serve(daemon: Daemon, project: str) -> Iterator[str]:
    """``roost a2a serve PROJECT --http 127.0.0.1:0`` against ``daemon``; yields its URL."""
    path = os.pathsep.join(p for p in (REPO_ROOT, os.environ.get("PYTHONPATH")) if p)
    proc = subprocess.Popen(
        [sys.executable, "-m", "runtime.cli", "a2a", "serve", project, "--http", "127.0.0.1:0"],
        env={**os.environ, "ROOST_HOME": daemon.home, "PYTHONPATH": path},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    seen: list[str] = []
    try:
        deadline = time.monotonic() + 60
        url = None
        while url is None:
            assert time.monotonic() < deadline, f"roost a2a serve never listened: {seen}"
            assert proc.poll() is None, f"roost a2a serve exited: {seen}"
            ready, _, _ = select.select([proc.stderr], [], [], 0.5)
            if ready:
                line = proc.stderr.readline()
                seen.append(line)
                found = re.search(r" on (http://127\.0\.0\.1:\d+/) ", line)
                url = found.group(1) if found else None
        yield url
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)


def test_a_conversation_delegates_to_another_daemons_project_and_both_reports_link_it(
    daemon: Daemon, callee: Daemon, tmp_path: Path
) -> None:
    with callee.client(timeout_s=60) as c:
        served = c.start_project(make_root(tmp_path / "callee-repo"), "helper", {})
    with a2a_serve(callee, served) as url, daemon.client(timeout_s=60) as c:
        options = {
            "a2a_agents": [{"name": "callee", "url": url}],
            "network_allowlist": ["127.0.0.1"],
        }
        project = c.start_project(make_root(tmp_path / "caller-repo"), "lead", options)
        [tool] = [t for t in c.list_tools(project) if t["name"] == "a2a.callee.send"]
        assert "helper" in tool["description"]
        c.start_conversation(project, C)
        calls = [{"name": "a2a.callee.send", "args": {"text": "hello from the lead"}}]
        ack = c.send_message(
            project,
            C,
            "ask the helper",
            correlation_id="lead-turn",
            wait=True,
            llm={"tool_calls": calls},
        )
        assert ack["outcome"] == "llm.completed"
        entries = c.incident_timeline(project, C, limit=500, correlation_id="lead-turn")
        [done] = [e["data"] for e in entries["entries"] if e["type"] == "tool.completed"]
        result = done["result"]["result"]
        assert result["state"] == "completed", result
        assert result["text"] == "Acknowledged: hello from the lead"
        task_id, context_id = result["task_id"], result["context_id"]
        updates = [e["data"] for e in entries["entries"] if e["type"] == "a2a.task_updated"]
        assert updates and {u["task_id"] for u in updates} == {task_id}
        assert updates[-1]["state"] == "completed"
        report = c.incident_report(project, C, correlation_id="lead-turn")
        [row] = report["tool_calls"]
        assert row["remote_task_id"] == task_id
        [stage] = [s for s in report["stages"] if s["stage"] == "tool_call"]
        assert stage["label"].endswith(f" · remote task {task_id}")
    # the callee's side: the remote task id is its turn's correlation id, the context id
    # names its conversation, and its report shows the delegated turn
    with callee.client(timeout_s=60) as c:
        conversation = f"a2a-{context_id}"
        timeline = c.incident_timeline(served, conversation, limit=500, correlation_id=task_id)
        types = [e["type"] for e in timeline["entries"]]
        assert types[0] == "user.message" and "llm.completed" in types, types
        assert {e["correlation_id"] for e in timeline["entries"]} == {task_id}
        [asked] = [e["data"] for e in timeline["entries"] if e["type"] == "user.message"]
        assert asked["content"] == "hello from the lead"
        callee_report = c.incident_report(served, conversation, correlation_id=task_id)
        assert callee_report["summary"]["status"] == "ok"
        assert [a["correlation_id"] for a in callee_report["asked"]] == [task_id]
