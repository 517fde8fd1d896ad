"""A real daemon, the real client and CLI: a whole turn, errors, tools, projections."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys

import psutil
import pytest

from runtime.errors import (
    AlreadyStartedError,
    BadRequestError,
    ConversationAlreadyStartedError,
    ConversationNotFoundError,
    InvalidRootPathError,
    InvalidRuntimeOptError,
    ProjectNotFoundError,
)
from tests.integration.conftest import READ_TURN, REPO_ROOT, Daemon, daemon_env


def test_a_message_runs_a_whole_turn_that_reads_a_file(daemon: Daemon, project_root: str) -> None:
    with daemon.client() as c:
        assert c.start_project(project_root, project_id="p1") == "p1"
        assert c.start_conversation("p1", conversation_id="c1") == "c1"
        ack = c.send_message("p1", "c1", "read README.md", correlation_id="corr-e2e", wait=True)
        assert ack["outcome"] == "llm.completed"
        timeline = c.incident_timeline("p1", "c1", correlation_id="corr-e2e")
        types = [e["type"] for e in timeline["entries"]]
        assert types == READ_TURN
        completed = next(e for e in timeline["entries"] if e["type"] == "tool.completed")
        result = completed["data"]["result"]
        assert result["status"] == "ok"
        assert "Hello from the seed file." in json.dumps(result["result"])
        assert timeline["entries"][-2]["data"]["content"] == "Tool fs.read completed."
        assert {e["correlation_id"] for e in timeline["entries"]} == {"corr-e2e"}
        verified = c.verify("p1")
        assert (verified["ok"], verified["chain_ok"], verified["mismatches"]) == (True, True, [])


def test_send_without_wait_returns_the_committed_ack(daemon: Daemon, project_root: str) -> None:
    with daemon.client() as c:
        c.start_project(project_root, project_id="p1")
        c.start_conversation("p1", conversation_id="c1")
        ack = c.send_message("p1", "c1", "hello", correlation_id="corr-nowait")
        assert set(ack) == {"seq", "event_id", "correlation_id"}
        assert ack["correlation_id"] == "corr-nowait"
        timeline = c.get_projection("p1", "c1", "timeline")
        assert any(e["event_id"] == ack["event_id"] and e["seq"] == ack["seq"] for e in timeline)


def test_request_errors_have_their_stable_codes(
    daemon: Daemon, project_root: str, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    with daemon.client() as c:
        with pytest.raises(ProjectNotFoundError) as not_found:
            c.start_conversation("nope")
        assert not_found.value.code == "project_not_found"
        with pytest.raises(InvalidRootPathError):
            c.start_project(str(tmp_path / "missing"), project_id="px")
        with pytest.raises(InvalidRuntimeOptError) as bad_opt:
            c.start_project(project_root, project_id="px", options={"tool_timeout_ms": 0})
        assert bad_opt.value.details == {
            "key": "tool_timeout_ms",
            "reason": "expected_positive_integer",
        }
        with pytest.raises(InvalidRuntimeOptError) as unknown:
            c.start_project(project_root, project_id="px", options={"nope": 1})
        assert unknown.value.details["reason"] == "unknown_option"
        c.start_project(project_root, project_id="p1")
        with pytest.raises(AlreadyStartedError):
            c.start_project(project_root, project_id="p1")
        c.start_conversation("p1", conversation_id="c1")
        with pytest.raises(ConversationAlreadyStartedError):
            c.start_conversation("p1", conversation_id="c1")
        with pytest.raises(ConversationNotFoundError):
            c.send_message("p1", "missing", "hi")
        with pytest.raises(ConversationNotFoundError):
            c.incident_timeline("p1", "missing")
        with pytest.raises(BadRequestError):
            c.send_event("p1", "c1", {"type": "tool.completed", "data": {}})
        # the daemon keeps serving after every error
        assert c.send_message("p1", "c1", "still here", wait=True)["outcome"] == "llm.completed"


def test_run_tool_returns_the_result_dict_for_success_and_failure(
    daemon: Daemon, project_root: str
) -> None:
    with daemon.client() as c:
        c.start_project(project_root, project_id="p1")
        ok = c.run_tool("p1", {"name": "fs.read", "args": {"path": "notes.txt"}})
        assert (ok["status"], ok["tool"]) == ("ok", "fs.read")
        assert "beta" in json.dumps(ok["result"])
        denied = c.run_tool("p1", {"name": "fs.read", "args": {"path": "../../etc/passwd"}})
        assert denied["status"] == "error"
        assert denied["reason"]["code"] == "outside_root"
        unknown = c.run_tool("p1", {"name": "no.such.tool", "args": {}})
        assert unknown["reason"]["code"] == "unknown_tool"
        diagnostics = c.diagnostics("p1")
        decisions = [d["decision"] for d in diagnostics["recent_decisions"]]
        assert "deny" in decisions and "allow" in decisions


_PEEK = """---
description: Look at a file
input_schema: {"type": "object", "properties": {"p": {"type": "string"}}, "required": ["p"]}
steps: [{"tool": "%s", "args": {"path": "{{p}}"}}]
---
"""


def test_a_project_lists_decides_and_runs_the_assets_it_started_with(
    daemon: Daemon, project_root: str
) -> None:
    workflows = os.path.join(project_root, ".roost", "workflows")
    os.makedirs(workflows)
    with open(os.path.join(workflows, "peek.md"), "w") as f:
        f.write(_PEEK % "fs.read")
    with daemon.client() as c:
        c.start_project(project_root, project_id="p1")
        with open(os.path.join(workflows, "peek.md"), "w") as f:
            f.write(_PEEK % "fs.list")
        with open(os.path.join(workflows, "later.md"), "w") as f:
            f.write(_PEEK % "fs.read")
        names = {t["name"] for t in c.list_tools("p1")}
        assert ("workflow.run.peek" in names, "workflow.run.later" in names) == (True, False)
        later = c.run_tool("p1", {"name": "workflow.run.later", "args": {"p": "notes.txt"}})
        assert (later["status"], later["reason"]["code"]) == ("error", "unknown_tool")
        peek = c.run_tool("p1", {"name": "workflow.run.peek", "args": {"p": "notes.txt"}})
        assert peek["status"] == "ok"
        assert [s["tool"] for s in peek["result"]["steps"]] == ["fs.read"]


def test_run_tool_with_a_conversation_records_into_its_timeline(
    daemon: Daemon, project_root: str
) -> None:
    with daemon.client() as c:
        c.start_project(project_root, project_id="p1")
        c.start_conversation("p1", conversation_id="c1")
        result = c.run_tool(
            "p1",
            {
                "name": "fs.list",
                "args": {"path": "."},
                "meta": {"conversation_id": "c1", "correlation_id": "corr-direct"},
            },
        )
        assert result["status"] == "ok"
        timeline = c.incident_timeline("p1", "c1", correlation_id="corr-direct")
        assert [e["type"] for e in timeline["entries"]] == [
            "tool.requested",
            "policy.allowed",
            "tool.started",
            "tool.completed",
        ]
        assert c.get_projection("p1", "c1", "pending_tool_calls") == []
        assert c.verify("p1")["ok"] is True


def test_list_tools_and_diagnostics_describe_the_project(daemon: Daemon, project_root: str) -> None:
    with daemon.client() as c:
        c.start_project(project_root, project_id="p1", options={"deny_tools": ["http.fetch"]})
        c.start_conversation("p1", conversation_id="c1")
        tools = {t["name"]: t for t in c.list_tools("p1")}
        assert "fs.read" in tools and "http.fetch" not in tools
        assert tools["fs.read"]["read_only"] is True
        assert tools["fs.write"]["writes"] is True
        assert tools["command.run"]["runs_commands"] is True
        d = c.diagnostics("p1")
        assert d["project_id"] == "p1"
        assert d["root"] == os.path.realpath(project_root)
        assert d["options"]["deny_tools"] == ["http.fetch"]
        assert d["health"]["status"] == "ok"
        assert d["conversations"] == ["c1"]
        assert set(d["sandbox_layers"]) >= {"bwrap", "openat2", "rlimits"}
        projects = c.list_projects()
        assert [(p["project_id"], p["conversation_count"]) for p in projects] == [("p1", 1)]


def test_the_socket_is_owner_only_and_nothing_listens_on_the_network(daemon: Daemon) -> None:
    mode = stat.S_IMODE(os.stat(os.path.join(daemon.home, "roost.sock")).st_mode)
    assert mode == 0o600
    assert stat.S_IMODE(os.stat(daemon.home).st_mode) == 0o700
    listening = []
    for proc in daemon.processes():
        try:
            for conn in proc.net_connections(kind="inet"):
                if conn.status == psutil.CONN_LISTEN:
                    listening.append((proc.pid, conn.laddr))
        except psutil.NoSuchProcess:
            continue
    assert listening == []


def test_the_cli_sends_and_prints_json(daemon: Daemon, project_root: str) -> None:
    env = {**os.environ, **daemon_env()}

    def roost(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "runtime.cli", "--home", daemon.home, *args],
            env=env,
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    started = roost("--json", "project", "start", project_root, "--id", "p1")
    assert started.returncode == 0, started.stderr
    assert roost("conversation", "start", "p1", "--id", "c1").returncode == 0
    sent = roost("--json", "send", "p1", "c1", "read notes.txt", "--wait")
    assert sent.returncode == 0, sent.stderr
    assert json.loads(sent.stdout)["outcome"] == "llm.completed"
    missing = roost("send", "p1", "nope", "hi")
    assert missing.returncode != 0
    assert missing.stderr.startswith("roost: conversation_not_found: ")
    assert len(missing.stderr.strip().splitlines()) == 1
    report = roost("incident", "p1", "c1", "--format", "md")
    assert report.returncode == 0
    assert "fs.read" in report.stdout
