"""roost mcp serve: names every MCP client accepts, and what it prints over HTTP.

The tools of a real project (built-ins, a workflow with a long key, an ``mcp_servers``
server whose tool names collide once their dots are replaced) are listed through the
official SDK client and checked against the strictest client pattern (Claude Desktop's);
each is called by its listed name and by its Roost name. Over HTTP: the announcement comes
once the server answers, and what the SDK logs reaches stderr as Roost's one-line messages.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from runtime.mcp_server.names import hashed_name
from tests.integration.conftest import Daemon
from tests.integration.serve_helpers import wait_for_line
from tests.integration.test_mcp_serve import ROOST, serve_env, started, text

STRICTEST = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
"""The tool-name pattern of Claude Desktop (and of OpenAI's function names)."""

LONG_TOOL = "lookup_" + "x" * 70
LONG_KEY = "read-the-readme-" + "r" * 48  # the longest asset key: 64 characters

NAMES_SERVER = f"""
import sys
from mcp.server.mcpserver import MCPServer

server = MCPServer("names")

@server.tool(name="a.b")
def dotted() -> str:
    return "dotted a.b"

@server.tool(name="a_b")
def underscored() -> str:
    return "underscored a_b"

@server.tool(name="{LONG_TOOL}")
def long() -> str:
    return "the long one"

server.run()
"""


def test_every_listed_name_matches_the_strictest_client_and_maps_back(
    daemon: Daemon, project_root: str, tmp_path: Path
) -> None:
    root = Path(project_root)
    (root / "names_server.py").write_text(NAMES_SERVER)
    (root / ".roost" / "workflows").mkdir(parents=True)
    steps = '[{"tool": "fs.read", "args": {"path": "README.md"}}]'
    (root / ".roost" / "workflows" / f"{LONG_KEY}.md").write_text(
        f"---\ndescription: Read the README\nsteps: {steps}\n---\n"
    )
    python = str(Path(sys.prefix).resolve() / "bin" / "python")  # as the sandbox shows it
    server = {"name": "nm", "command": [python, str(root / "names_server.py")]}
    with daemon.client(timeout_s=120) as c:
        c.start_project(project_root, project_id="p1", options={"mcp_servers": [server]})
        roost_names = sorted(t["name"] for t in c.list_tools("p1", "mcp"))
    assert {"mcp.nm.a.b", "mcp.nm.a_b", f"mcp.nm.{LONG_TOOL}"} <= set(roost_names)
    assert f"workflow.run.{LONG_KEY}" in roost_names
    params = StdioServerParameters(
        command=ROOST[0], args=[*ROOST[1:], "mcp", "serve", "p1"], env=serve_env(daemon.home)
    )

    async def session() -> dict[str, Any]:
        with (tmp_path / "stderr.txt").open("w") as err:
            async with Client(stdio_client(params, errlog=err)) as client:
                tools = (await client.list_tools()).tools
                listed = {t.title: t.name for t in tools}
                calls = {
                    name: await client.call_tool(name, {})
                    for name in (
                        listed["mcp.nm.a.b"],
                        listed["mcp.nm.a_b"],
                        listed[f"mcp.nm.{LONG_TOOL}"],
                        listed[f"workflow.run.{LONG_KEY}"],
                        "mcp.nm.a.b",  # the Roost name is taken as it is
                    )
                }
                by_safe = await client.call_tool("fs_read", {"path": "README.md"})
                by_roost = await client.call_tool("fs.read", {"path": "README.md"})
                unknown = await client.call_tool("fs_reed", {"path": "README.md"})
        return locals()

    got = anyio.run(session)
    tools: list[types.Tool] = got["tools"]
    names = [t.name for t in tools]
    assert [n for n in names if not STRICTEST.fullmatch(n)] == []
    assert len(set(names)) == len(names)
    assert sorted(t.title or "" for t in tools) == roost_names
    assert all((t.meta or {}).get("roost/name") == t.title for t in tools)
    listed = got["listed"]
    assert listed["fs.read"] == "fs_read"
    assert listed["command.run"] == "command_run"
    # a.b and a_b both give mcp_nm_a_b: both are hashed, neither wins by listing order
    assert listed["mcp.nm.a.b"] == hashed_name("mcp.nm.a.b")
    assert listed["mcp.nm.a_b"] == hashed_name("mcp.nm.a_b")
    assert listed[f"mcp.nm.{LONG_TOOL}"] == hashed_name(f"mcp.nm.{LONG_TOOL}")
    assert len(listed[f"workflow.run.{LONG_KEY}"]) == 64

    calls: dict[str, types.CallToolResult] = got["calls"]
    outcome = {name: (r.structured_content or {}).get("tool") for name, r in calls.items()}
    assert outcome == {
        listed["mcp.nm.a.b"]: "mcp.nm.a.b",
        listed["mcp.nm.a_b"]: "mcp.nm.a_b",
        listed[f"mcp.nm.{LONG_TOOL}"]: f"mcp.nm.{LONG_TOOL}",
        listed[f"workflow.run.{LONG_KEY}"]: f"workflow.run.{LONG_KEY}",
        "mcp.nm.a.b": "mcp.nm.a.b",
    }
    assert all(r.is_error is False for r in calls.values()), calls
    assert "dotted a.b" in text(calls[listed["mcp.nm.a.b"]])
    assert "underscored a_b" in text(calls[listed["mcp.nm.a_b"]])
    assert "dotted a.b" in text(calls["mcp.nm.a.b"])
    for result in (got["by_safe"], got["by_roost"]):
        assert result.is_error is False
        assert result.structured_content["tool"] == "fs.read"
        assert json.loads(text(result))["content"].startswith("# Seed project")
    assert got["unknown"].is_error is True
    assert text(got["unknown"]).startswith("unknown_tool: ")


def test_http_announces_once_it_answers_and_prints_sdk_errors_as_one_roost_line(
    daemon: Daemon, project_root: str
) -> None:
    started(daemon, project_root)
    proc = subprocess.Popen(
        [*ROOST, "mcp", "serve", "p1", "--http", "127.0.0.1:0"],
        env={**os.environ, **serve_env(daemon.home)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    seen: list[str] = []
    try:
        line = wait_for_line(proc, r"serving project p1 on http://127\.0\.0\.1:\d+/mcp", seen)
        url = line.split(" on ", 1)[1].strip()

        async def session() -> tuple[list[str], types.CallToolResult]:
            # the first connection, right after the line, is answered at once
            async with Client(url) as client:
                names = [t.name for t in (await client.list_tools()).tools]
                with daemon.client() as c:
                    c.stop_project("p1")
                return names, await client.call_tool("fs_read", {"path": "README.md"})

        names, refused = anyio.run(session)
        wait_for_line(proc, r"project_not_found", seen)
    finally:
        proc.send_signal(signal.SIGINT)
        out, rest = proc.communicate(timeout=30)
    assert "fs_read" in names
    assert refused.is_error is True
    assert text(refused).startswith("project_not_found: ")
    assert proc.returncode == 0
    assert out == ""
    lines = [*seen, *rest.splitlines(keepends=True)]
    assert lines and all(line.startswith("roost: mcp: ") for line in lines), lines
    logged = [line for line in lines if "project_not_found" in line]
    assert logged[0].startswith("roost: mcp: error: "), logged
    assert "Traceback" not in "".join(lines)
