"""Roost as an MCP client: ``mcp_servers`` tools through a real daemon.

The MCP servers are the SDK's own ``MCPServer`` (``mcp_fixture_server.py``), started by
the daemon through the project option (stdio, inside the command sandbox) or by the test
on loopback (streamable HTTP). Each server call appends to ``calls.log`` in the project
root, so a refusal can be shown to have never reached the server.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from runtime.client import Client
from runtime.errors import RoostError
from runtime.journal.store import Journal
from tests.integration.conftest import Daemon, make_root

FIXTURE = Path(__file__).with_name("mcp_fixture_server.py")
C = "c1"


WORKFLOW = """---
description: Echo through the MCP server, then add
steps: [
  {"tool": "mcp.fx.echo", "args": {"text": "from a workflow"}},
  {"tool": "mcp.fx.add", "args": {"a": 20, "b": 22}}
]
---
Two MCP steps.
"""


def _root(tmp_path: Path, name: str) -> Path:
    root = Path(make_root(tmp_path / name))
    shutil.copy(FIXTURE, root / "server.py")
    (root / ".roost" / "workflows").mkdir()
    (root / ".roost" / "workflows" / "both.md").write_text(WORKFLOW)
    return root


def _stdio(root: Path, *extra: str) -> dict[str, Any]:
    return {"name": "fx", "command": [sys.executable, str(root / "server.py"), str(root), *extra]}


def _calls(root: Path) -> list[str]:
    log = root / "calls.log"
    return log.read_text().split() if log.exists() else []


def _run(c: Client, project: str, name: str, args: dict[str, Any], corr: str) -> dict[str, Any]:
    request = {"name": name, "args": args, "meta": {"conversation_id": C, "correlation_id": corr}}
    return c.run_tool(project, request)


def _types(c: Client, project: str, corr: str) -> list[str]:
    timeline = c.incident_timeline(project, C, limit=500, correlation_id=corr)
    return [e["type"] for e in timeline["entries"]]


def _asset_errors(daemon: Daemon, project: str) -> list[dict[str, Any]]:
    """The ``errors`` of the project's ``project.assets_loaded`` event."""
    with Journal.open(daemon.home, "sqlite") as journal:
        loaded = [e for e in journal.read_project(project) if e.type == "project.assets_loaded"]
    return list(loaded[-1].data["errors"])


def _mcp_tools(c: Client, project: str) -> list[str]:
    return sorted(t["name"] for t in c.list_tools(project) if t["name"].startswith("mcp."))


def test_a_model_calls_an_mcp_tool_and_a_denied_one_never_reaches_the_server(
    daemon: Daemon, tmp_path: Path
) -> None:
    root = _root(tmp_path, "repo")
    options = {"mcp_servers": [_stdio(root)], "deny_tools": ["mcp.fx.add"]}
    with daemon.client(timeout_s=60) as c:
        project = c.start_project(str(root), "p1", options)
        names = _mcp_tools(c, project)
        assert "mcp.fx.echo" in names and "mcp.fx.crash" in names
        assert "mcp.fx.add" not in names  # deny_tools also hides it
        echo = next(t for t in c.list_tools(project) if t["name"] == "mcp.fx.echo")
        assert echo["input_schema"]["required"] == ["text"]
        c.start_conversation(project, C)
        calls = [
            {"name": "mcp.fx.echo", "args": {"text": "hello from the model"}},
            {"name": "mcp.fx.add", "args": {"a": 1, "b": 2}},
        ]
        ack = c.send_message(
            project, C, "use mcp", correlation_id="turn-1", wait=True, llm={"tool_calls": calls}
        )
        assert ack["outcome"] == "llm.completed"
        entries = c.incident_timeline(project, C, limit=500, correlation_id="turn-1")["entries"]
        done = [e["data"] for e in entries if e["type"] == "tool.completed"]
        assert [d["name"] for d in done] == ["mcp.fx.echo"]
        assert done[0]["result"]["result"]["text"] == "hello from the model"
        denied = [e["data"] for e in entries if e["type"] == "policy.denied"]
        assert [d["tool"] for d in denied] == ["mcp.fx.add"]
        assert "mcp.server_started" in [e["type"] for e in entries]
        assert _calls(root) == ["echo"]  # the denied call never reached the server
        # run_tool reaches the same server through the same pipeline
        result = _run(c, project, "mcp.fx.add", {"a": 2, "b": 3}, "direct-1")
        assert result["status"] == "error" and result["reason"]["code"] == "denied"
        bad = _run(c, project, "mcp.fx.echo", {"text": 5}, "direct-2")
        assert bad["reason"]["code"] == "invalid_tool_args"  # the server's schema, enforced
        assert _calls(root) == ["echo"]
        # a workflow step reaches the server through the same decision: add stays denied
        flow = _run(c, project, "workflow.run.both", {}, "flow-1")
        assert flow["status"] == "error", flow
        assert flow["reason"]["code"] == "denied" and flow["reason"]["step_tool"] == "mcp.fx.add"
        assert _calls(root) == ["echo", "echo"]


def test_a_workflow_runs_mcp_steps_and_a_slow_call_times_out(
    daemon: Daemon, tmp_path: Path
) -> None:
    root = _root(tmp_path, "repo")
    options = {"mcp_servers": [_stdio(root)], "tool_timeout_ms": 10000}
    with daemon.client(timeout_s=60) as c:
        project = c.start_project(str(root), "p1", options)
        c.start_conversation(project, C)
        flow = _run(c, project, "workflow.run.both", {}, "flow-2")
        assert flow["status"] == "ok", flow
        steps = flow["result"]["steps"]
        assert [s["result"]["text"] for s in steps] == ["from a workflow", "42"]
        slow = _run(c, project, "mcp.fx.sleep", {"seconds": 60}, "slow")
        assert slow["status"] == "error" and slow["reason"]["code"] == "timeout", slow
        after = _run(c, project, "mcp.fx.echo", {"text": "still here"}, "after")
        assert after["status"] == "ok", after
    assert _calls(root) == ["echo", "add", "sleep", "echo"]


def test_a_stdio_server_is_confined_by_the_sandbox(daemon: Daemon, tmp_path: Path) -> None:
    root = _root(tmp_path, "repo")
    secret = tmp_path / "outside" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text("top secret\n")
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        target = f"127.0.0.1:{listener.getsockname()[1]}"
        # the same host connection works from outside the sandbox
        with socket.create_connection(("127.0.0.1", listener.getsockname()[1]), timeout=3):
            pass
        options = {"mcp_servers": [_stdio(root, str(secret), target)]}
        with daemon.client(timeout_s=60) as c:
            project = c.start_project(str(root), "p1", options)
            c.start_conversation(project, C)
            peek = _run(c, project, "mcp.fx.peek", {}, "peek")
            assert peek["status"] == "ok", peek
            assert peek["result"]["text"].startswith("DENIED:"), peek
            dial = _run(c, project, "mcp.fx.dial", {}, "dial")
            assert dial["result"]["text"].startswith("NO_NETWORK:"), dial
            env = _run(c, project, "mcp.fx.env", {}, "env")["result"]["structured_content"]
            assert "ROOST_HOME" not in env and "PYTHONPATH" not in env, env
            assert env["HOME"] != str(Path.home())
            # the same server with egress allowed reaches the listener: the namespace did it
            other = _root(tmp_path, "other")
            opened = {"mcp_servers": [_stdio(other, str(secret), target)]}
            opened["network_egress_policy"] = "allow"
            p2 = c.start_project(str(other), "p2", opened)
            c.start_conversation(p2, C)
            assert _run(c, p2, "mcp.fx.dial", {}, "dial-2")["result"]["text"] == "CONNECTED"
    assert secret.read_text() == "top secret\n"
    assert _calls(root) == ["peek", "read_file", "dial", "connect", "env"]


def test_without_mcp_in_protocol_allowlist_no_server_starts(daemon: Daemon, tmp_path: Path) -> None:
    root = _root(tmp_path, "repo")
    options = {"mcp_servers": [_stdio(root)], "protocol_allowlist": ["a2a"]}
    with daemon.client(timeout_s=60) as c:
        project = c.start_project(str(root), "p1", options)
        assert _mcp_tools(c, project) == []
        c.start_conversation(project, C)
        result = _run(c, project, "mcp.fx.echo", {"text": "x"}, "no-mcp")
        assert result["status"] == "error"
        assert result["reason"]["code"] == "unknown_tool", result
        errors = _asset_errors(daemon, project)
        [error] = [e for e in errors if e["type"] == "mcp_server"]
        assert error["key"] == "fx"
        assert error["reason"].startswith("protocol_not_allowed"), error
        # the workflow of MCP steps names tools that do not exist: it is unavailable
        [flow] = [e for e in errors if e["type"] == "workflows"]
        assert (flow["key"], flow["reason"]) == ("both", "unknown_step_tool"), flow
    assert _calls(root) == []


def _server_process(root: Path) -> psutil.Process:
    script = str(root / "server.py")
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = proc.info["cmdline"] or []
        if script in cmdline and cmdline[0] != "bwrap" and not cmdline[0].endswith("/bwrap"):
            return proc
    raise AssertionError(f"no process runs {script}")


def test_a_server_that_dies_is_restarted(daemon: Daemon, tmp_path: Path) -> None:
    root = _root(tmp_path, "repo")
    with daemon.client(timeout_s=60) as c:
        project = c.start_project(str(root), "p1", {"mcp_servers": [_stdio(root)]})
        c.start_conversation(project, C)
        assert _run(c, project, "mcp.fx.echo", {"text": "one"}, "r1")["status"] == "ok"
        crashed = _run(c, project, "mcp.fx.crash", {}, "r2")
        assert crashed["status"] == "error"
        assert crashed["reason"]["code"] == "tool_error"
        assert crashed["reason"]["kind"] == "mcp_server_exited"
        assert "mcp.server_exited" in _types(c, project, "r2")
        again = _run(c, project, "mcp.fx.echo", {"text": "two"}, "r3")
        assert again["status"] == "ok" and again["result"]["text"] == "two"
        assert "mcp.server_restarted" in _types(c, project, "r3")
        # killed from outside between calls: noticed and restarted before the next call
        _server_process(root).kill()
        time.sleep(0.5)
        third = _run(c, project, "mcp.fx.echo", {"text": "three"}, "r4")
        assert third["status"] == "ok", third
        types = _types(c, project, "r4")
        assert "mcp.server_exited" in types and "mcp.server_restarted" in types
    assert _calls(root) == ["echo", "crash", "echo", "echo"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """The fixture server over streamable HTTP on loopback, started by the test."""
    markers = tmp_path / "http-markers"
    markers.mkdir()
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, str(FIXTURE), str(markers), "--http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp", markers
    finally:
        proc.terminate()
        proc.wait(10)


def test_an_http_server_passes_the_egress_policy_first(
    daemon: Daemon, tmp_path: Path, http_server: tuple[str, Path]
) -> None:
    url, markers = http_server
    root = _root(tmp_path, "repo")
    other = _root(tmp_path, "other")
    with daemon.client(timeout_s=60) as c:
        allowed = {"mcp_servers": [{"name": "web", "url": url}], "network_allowlist": ["127.0.0.1"]}
        project = c.start_project(str(root), "p1", allowed)
        assert "mcp.web.echo" in _mcp_tools(c, project)
        c.start_conversation(project, C)
        result = _run(c, project, "mcp.web.echo", {"text": "over http"}, "h1")
        assert result["status"] == "ok" and result["result"]["text"] == "over http"
        assert _calls(markers) == ["echo"]
        # the same server without the loopback address allowlisted: refused before connecting
        refused = c.start_project(str(other), "p2", {"mcp_servers": [{"name": "web", "url": url}]})
        assert _mcp_tools(c, refused) == []
        [error] = [e for e in _asset_errors(daemon, refused) if e["type"] == "mcp_server"]
        assert error["reason"].startswith("network_endpoint_denied"), error
    assert _calls(markers) == ["echo"]


def test_a_bad_mcp_servers_entry_refuses_the_project(daemon: Daemon, tmp_path: Path) -> None:
    root = _root(tmp_path, "repo")
    with daemon.client(timeout_s=60) as c, pytest.raises(RoostError) as caught:
        c.start_project(str(root), "p1", {"mcp_servers": [{"name": "fx", "command": "x y"}]})
    assert caught.value.code == "invalid_runtime_opt"
    assert caught.value.details["problem"] == "invalid_command"


def test_a_cancelled_turn_abandons_the_mcp_call(daemon: Daemon, tmp_path: Path) -> None:
    root = _root(tmp_path, "repo")
    options = {"mcp_servers": [_stdio(root)], "tool_timeout_ms": 60000}
    with daemon.client(timeout_s=60) as c:
        project = c.start_project(str(root), "p1", options)
        c.start_conversation(project, C)
        calls = [{"name": "mcp.fx.sleep", "args": {"seconds": 40}}]
        c.send_message(project, C, "sleep", correlation_id="long", llm={"tool_calls": calls})
        deadline = time.monotonic() + 30
        while "sleep" not in _calls(root):
            assert time.monotonic() < deadline, "the server was never called"
            time.sleep(0.1)
        c.cancel(project, C, correlation_id="long")
        c.resume(project, C)
        started = time.monotonic()
        # the cancelled call let go of the server: the next call does not wait 40 s for it
        after = _run(c, project, "mcp.fx.echo", {"text": "next"}, "after-cancel")
        assert after["status"] == "ok", after
        assert time.monotonic() - started < 35  # not the 40 s the cancelled call sleeps
        assert "tool.cancelled" in _types(c, project, "long")
