"""roost mcp serve against a real daemon, driven by the MCP SDK's own client.

The server is the real ``roost`` command in a subprocess: over stdio (spawned by the SDK's
stdio client) and over streamable HTTP on loopback (the SDK's HTTP client). Every call it
makes goes through the daemon's tool-call pipeline and is read back from the journal.
"""

from __future__ import annotations

import json
import os
import re
import select
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError
from mcp_types.version import LATEST_HANDSHAKE_VERSION

from tests.integration.conftest import REPO_ROOT, Daemon
from tests.integration.serve_helpers import as_other_user, needs_another_user, wait_for_line

ROOST = [sys.executable, "-m", "runtime.cli"]


def serve_env(home: str) -> dict[str, str]:
    path = os.pathsep.join(p for p in (REPO_ROOT, os.environ.get("PYTHONPATH")) if p)
    return {"ROOST_HOME": home, "PYTHONPATH": path}


def started(daemon: Daemon, root: str, **options: Any) -> None:
    with daemon.client() as c:
        c.start_project(root, project_id="p1", options=options)


def entries(daemon: Daemon, conversation: str) -> list[dict[str, Any]]:
    with daemon.client() as c:
        timeline: dict[str, Any] = c.incident_timeline("p1", conversation, limit=500)
    return list(timeline["entries"])


def of_call(found: list[dict[str, Any]], call_id: str) -> list[tuple[str, dict[str, Any]]]:
    return [(e["type"], e["data"]) for e in found if e["data"].get("call_id") == call_id]


def text(result: types.CallToolResult) -> str:
    [content] = result.content
    assert isinstance(content, types.TextContent)
    return content.text


def test_stdio_lists_the_policys_tools_runs_and_refuses_calls_and_serves_timelines(
    daemon: Daemon, project_root: str, tmp_path: Path
) -> None:
    started(daemon, project_root, approval_mode="sensitive")
    with daemon.client() as c:
        expected = {t["name"]: t for t in c.list_tools("p1")}
    params = StdioServerParameters(
        command=ROOST[0], args=[*ROOST[1:], "mcp", "serve", "p1"], env=serve_env(daemon.home)
    )
    errlog = tmp_path / "stderr.txt"

    async def session() -> dict[str, Any]:
        with errlog.open("w") as err:
            async with Client(stdio_client(params, errlog=err)) as client:
                tools = (await client.list_tools()).tools
                read = await client.call_tool("fs.read", {"path": "README.md"})
                denied = await client.call_tool("fs.write", {"path": "new.txt", "content": "x"})
                outside = await client.call_tool("fs.read", {"path": "/etc/hostname"})
                listed = (await client.list_resources()).resources
                templates = (await client.list_resource_templates()).resource_templates
                conversation = read.structured_content["conversation_id"]
                timeline = await client.read_resource(
                    f"roost://p1/conversations/{conversation}/timeline"
                )
                incident = await client.read_resource(
                    f"roost://p1/conversations/{conversation}/incident"
                )
                with pytest.raises(MCPError, match="unknown_resource"):
                    await client.read_resource("roost://p2/conversations/c1/timeline")
                with pytest.raises(MCPError, match="conversation_not_found"):
                    await client.read_resource("roost://p1/conversations/nope/incident")
        return locals()

    got = anyio.run(session)

    # tools/list: the project's tools with their schemas, minus what MCP could never run
    tools = {t.title: t for t in got["tools"]}  # listed as fs_read, titled with the Roost name
    assert {"fs.read", "fs.list", "fs.search", "asset.list"} <= set(tools)
    assert not {"fs.write", "fs.edit", "command.run", "http.fetch"} & set(tools)
    assert {"fs.write", "command.run"} <= set(expected)  # the model would be offered them
    for name, tool in tools.items():
        assert tool.input_schema == expected[name]["input_schema"]
        assert tool.input_schema["type"] == "object"

    # a call that runs: the redacted result, journaled with source mcp
    read = got["read"]
    assert read.is_error is False
    assert json.loads(text(read))["content"].startswith("# Seed project")
    assert read.structured_content["status"] == "ok"
    conversation = got["conversation"]
    assert re.fullmatch(r"mcp-[0-9a-f]{12}", conversation)
    journal = entries(daemon, conversation)
    kinds = [t for t, _ in of_call(journal, read.structured_content["call_id"])]
    assert kinds == ["tool.requested", "policy.allowed", "tool.started", "tool.completed"]
    requested = of_call(journal, read.structured_content["call_id"])[0][1]
    assert requested["source"] == "mcp"
    assert requested["args"] == {"path": "README.md"}

    # a call the policy refuses: isError with the reason code, policy.denied journaled
    denied = got["denied"]
    assert denied.is_error is True
    assert text(denied).startswith("denied: approval_required: fs.write needs approval")
    assert denied.structured_content["reason"]["reason"] == "approval_required"
    events = of_call(journal, denied.structured_content["call_id"])
    assert [t for t, _ in events] == ["tool.requested", "policy.denied", "tool.failed"]
    assert events[0][1]["source"] == "mcp"
    assert events[1][1]["reason"] == "approval_required"
    assert not (Path(project_root) / "new.txt").exists()

    outside = got["outside"]
    assert outside.is_error is True
    assert text(outside).startswith("outside_root: ")
    events = of_call(journal, outside.structured_content["call_id"])
    assert [t for t, _ in events][:2] == ["tool.requested", "security.sandbox_violation"]
    assert ("policy.denied", "outside_root") in [(t, d.get("reason")) for t, d in events]

    # resources: the conversation's timeline (JSON) and incident report (Markdown)
    uris = [r.uri for r in got["listed"]]
    assert "roost://p1/conversations" in uris
    assert f"roost://p1/conversations/{conversation}/timeline" in uris
    assert len(got["templates"]) == 2
    [content] = got["timeline"].contents
    assert content.mime_type == "application/json"
    served = json.loads(content.text)
    assert served["conversation_id"] == conversation
    assert [e["seq"] for e in served["entries"]] == [e["seq"] for e in journal][-100:]
    sources = [e["data"].get("source") for e in served["entries"] if e["type"] == "tool.requested"]
    assert sources == ["mcp", "mcp", "mcp"]
    [report] = got["incident"].contents
    assert report.mime_type == "text/markdown"
    with daemon.client() as c:
        assert report.text == c.incident_report("p1", conversation, format="md")

    # stdout stayed the protocol; what is for people went to stderr
    assert f"recorded in conversation {conversation}" in errlog.read_text()


def test_stdio_writes_nothing_but_protocol_messages_and_ends_when_stdin_closes(
    daemon: Daemon, project_root: str
) -> None:
    started(daemon, project_root)
    messages = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": LATEST_HANDSHAKE_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "0"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "command.run", "arguments": {"command": "echo hi; echo err >&2"}},
        },
    ]
    proc = subprocess.Popen(
        [*ROOST, "mcp", "serve", "p1"],
        env={**os.environ, **serve_env(daemon.home)},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    by_id: dict[int, Any] = {}
    try:
        for message in messages:  # a client waits for each answer before it hangs up
            proc.stdin.write(json.dumps(message) + "\n")
            proc.stdin.flush()
            if "id" in message:
                ready, _, _ = select.select([proc.stdout], [], [], 60)
                assert ready, "no answer within 60 s"
                reply = json.loads(proc.stdout.readline())  # every line is a JSON-RPC message
                assert reply["jsonrpc"] == "2.0"
                by_id[reply["id"]] = reply
        rest, err = proc.communicate(timeout=30)  # closes stdin: the client hangs up
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert rest == ""
    assert sorted(by_id) == [1, 2, 3]
    assert by_id[1]["result"]["serverInfo"]["name"] == "roost"
    assert by_id[2]["result"]["tools"]
    called = by_id[3]["result"]
    assert called["structuredContent"]["tool"] == "command.run"
    if called["structuredContent"]["status"] == "ok":  # commands can run here
        assert called["structuredContent"]["result"]["stdout"] == "hi\n"
    assert "roost: mcp: calls of this session are recorded in conversation mcp-" in err


def test_streamable_http_on_loopback_records_calls_in_the_given_conversation(
    daemon: Daemon, project_root: str
) -> None:
    started(daemon, project_root)
    with daemon.client() as c:
        c.start_conversation("p1", conversation_id="c1")
    proc = subprocess.Popen(
        [*ROOST, "mcp", "serve", "p1", "--conversation", "c1", "--http", "127.0.0.1:0"],
        env={**os.environ, **serve_env(daemon.home)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = wait_for_line(proc, r"serving project p1 on http://127\.0\.0\.1:\d+/mcp")
        url = line.split(" on ", 1)[1].strip()

        async def session() -> tuple[list[str], types.CallToolResult, list[str]]:
            finished: list[str] = []

            async def slow() -> None:
                await client.call_tool("command.run", {"command": "sleep 4"})
                finished.append("command.run")

            async with Client(url) as client:
                names = [t.title or "" for t in (await client.list_tools()).tools]
                async with anyio.create_task_group() as tasks:
                    tasks.start_soon(slow)
                    await anyio.sleep(0.5)
                    listed = await client.call_tool("fs_list", {"path": "."})
                    finished.append("fs.list")
            return names, listed, finished

        names, listed, finished = anyio.run(session)
        # a page of another site cannot reach it through DNS rebinding
        initialize = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        rebound = httpx.post(url, json=initialize, headers={**headers, "Host": "evil.example"})
        foreign = httpx.post(
            url, json=initialize, headers={**headers, "Origin": "http://evil.example"}
        )
    finally:
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=30)

    assert proc.returncode == 0
    assert out == ""
    assert (rebound.status_code, rebound.text) == (421, "Invalid Host header")
    assert (foreign.status_code, foreign.text) == (403, "Invalid Origin header")
    assert {"fs.write", "command.run"} <= set(names)  # approval_mode never: nothing hidden
    assert listed.is_error is False
    assert "README.md" in text(listed)
    assert listed.structured_content["conversation_id"] == "c1"
    # a slow call does not hold up the others: each borrows its own daemon connection
    assert finished == ["fs.list", "command.run"]
    call_id = listed.structured_content["call_id"]
    requested = [e["data"] for e in entries(daemon, "c1") if e["type"] == "tool.requested"]
    # a direct run is journaled when it is over: fs.list first
    assert [(d["name"], d["source"]) for d in requested] == [
        ("fs.list", "mcp"),
        ("command.run", "mcp"),
    ]
    assert requested[0]["call_id"] == call_id


POST_AS_OTHER_USER = """
import http.client, sys
host, port = sys.argv[1], int(sys.argv[2])
conn = http.client.HTTPConnection(host, port, timeout=10)
conn.request("POST", "/mcp", body=b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}',
             headers={"Content-Type": "application/json", "Accept": "application/json"})
response = conn.getresponse()
print(response.status, response.read().decode())
"""


@needs_another_user
def test_another_user_on_the_machine_is_refused(daemon: Daemon, project_root: str) -> None:
    started(daemon, project_root)
    proc = subprocess.Popen(
        [*ROOST, "mcp", "serve", "p1", "--http", "127.0.0.1:0"],
        env={**os.environ, **serve_env(daemon.home)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = wait_for_line(proc, r"serving project p1 on http://127\.0\.0\.1:\d+/mcp")
        port = line.rsplit(":", 1)[1].split("/", 1)[0]
        other = as_other_user(POST_AS_OTHER_USER, "127.0.0.1", port)
        own = httpx.post(
            f"http://127.0.0.1:{port}/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
            headers={"Accept": "application/json, text/event-stream"},
        )
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=30)
    assert other.stdout.startswith("403 peer_not_allowed: roost mcp serve answers only processes")
    assert other.stdout.strip().endswith("(check: other_uid)")
    assert own.status_code != 403  # the server's own user gets past the check
    assert "peer_not_allowed" not in own.text


POST_FROM_A_COMMAND = (
    "import http.client, sys; c = http.client.HTTPConnection('127.0.0.1', int(sys.argv[1]));"
    " c.request('POST', '/mcp', body=b'{}', headers={'Content-Type': 'application/json',"
    " 'Accept': 'application/json'}); r = c.getresponse(); print(r.status, r.read().decode())"
)


def test_a_sandboxed_command_with_egress_allowed_cannot_call_the_http_server(
    daemon: Daemon, project_root: str
) -> None:
    started(daemon, project_root, network_egress_policy="allow")
    proc = subprocess.Popen(
        [*ROOST, "mcp", "serve", "p1", "--http", "127.0.0.1:0"],
        env={**os.environ, **serve_env(daemon.home)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = wait_for_line(proc, r"serving project p1 on http://127\.0\.0\.1:\d+/mcp")
        port = line.rsplit(":", 1)[1].split("/", 1)[0]
        request = {
            "name": "command.run",
            "args": {"command": ["python3", "-c", POST_FROM_A_COMMAND, port]},
        }
        with daemon.client(timeout_s=30) as c:
            result = c.run_tool("p1", request)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=30)
    if result["status"] == "error" and result["reason"]["code"] == "isolation_unavailable":
        pytest.skip("commands cannot run here: " + result["reason"].get("message", ""))
    assert result["status"] == "ok", result
    stdout = result["result"]["stdout"]
    assert stdout.startswith("403 peer_not_allowed: "), stdout
    assert "(check: other_pid_namespace)" in stdout or "(check: sandboxed)" in stdout


def run_roost(*args: str, home: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*ROOST, *args],
        env={**os.environ, **serve_env(home)},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize("address", ["0.0.0.0:8765", "[::]:8765", "192.0.2.7:8765"])
def test_a_non_loopback_address_is_refused_before_anything_listens(tmp_path, address) -> None:
    done = run_roost("mcp", "serve", "p1", "--http", address, home=str(tmp_path))
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.startswith(f"roost: address_not_loopback: --http {address}: ")


def test_bad_input_fails_with_the_clis_codes_and_an_empty_stdout(
    daemon: Daemon, project_root: str, tmp_path: Path
) -> None:
    started(daemon, project_root)
    cases = [
        (("mcp", "serve", "nope"), daemon.home, 1, "project_not_found"),
        (("mcp", "serve", "p1", "--conversation", "c9"), daemon.home, 1, "conversation_not_found"),
        (("mcp", "serve", "p1", "--http", "8765"), daemon.home, 2, "usage"),
        (("mcp", "serve", "p1"), str(tmp_path / "no-daemon"), 3, "daemon_unreachable"),
    ]
    for args, home, status, code in cases:
        done = run_roost(*args, home=home)
        assert (done.returncode, done.stdout) == (status, ""), (args, done.stderr)
        assert done.stderr.startswith(f"roost: {code}: "), done.stderr
