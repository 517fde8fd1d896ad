"""A workflow is as sensitive as its most sensitive step, through a real daemon.

The steps here are MCP tools (``mcp.fx.*`` from ``mcp_fixture_server.py``, registered at
project start after the assets were loaded), which is where a workflow's flags used to
be computed too early: an MCP step counted as harmless, and with ``approval_mode:
sensitive`` the workflow ran its steps with no approval (``policy.allowed {reason:
workflow_approved}``). Each server call appends to ``calls.log`` in the project root, so
a refusal is shown to have never reached the server.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

from runtime.client import Client
from runtime.journal.store import Journal
from tests.integration.adversarial_helpers import wait_until
from tests.integration.conftest import Daemon, make_root
from tests.integration.test_mcp_client import FIXTURE
from tests.integration.test_mcp_client import WORKFLOW as BOTH

C = "c1"

WRITE_THEN_MISSING = """---
description: Write a file, then call a tool no server offers
steps: [
  {"tool": "fs.write", "args": {"path": "planted.txt", "content": "ran"}},
  {"tool": "mcp.fx.no_such_tool", "args": {}}
]
---
The second step names a tool that does not exist.
"""


def _root(tmp_path: Path) -> Path:
    root = Path(make_root(tmp_path / "repo"))
    shutil.copy(FIXTURE, root / "server.py")
    flows = root / ".roost" / "workflows"
    flows.mkdir()
    (flows / "both.md").write_text(BOTH)
    (flows / "missing.md").write_text(WRITE_THEN_MISSING)
    return root


def _options(root: Path, **extra: Any) -> dict[str, Any]:
    server = {"name": "fx", "command": [sys.executable, str(root / "server.py"), str(root)]}
    return {"mcp_servers": [server], **extra}


def _calls(root: Path) -> list[str]:
    log = root / "calls.log"
    return log.read_text().split() if log.exists() else []


def _run(c: Client, project: str, name: str, corr: str) -> dict[str, Any]:
    request = {"name": name, "args": {}, "meta": {"conversation_id": C, "correlation_id": corr}}
    result: dict[str, Any] = c.run_tool(project, request)
    return result


def _timeline(c: Client, project: str, corr: str) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = c.incident_timeline(project, C, limit=500, correlation_id=corr)[
        "entries"
    ]
    return entries


def test_a_workflow_of_mcp_steps_carries_their_flags_and_needs_approval_when_sensitive(
    daemon: Daemon, tmp_path: Path
) -> None:
    root = _root(tmp_path)
    with daemon.client(timeout_s=60) as c:
        project = c.start_project(str(root), "p1", _options(root, approval_mode="sensitive"))
        tools = {t["name"]: t for t in c.list_tools(project)}
        assert tools["mcp.fx.echo"]["runs_commands"] is True
        flow = tools["workflow.run.both"]
        assert (flow["runs_commands"], flow["read_only"]) == (True, False), flow
        c.start_conversation(project, C)
        # run_tool has nobody to approve: the workflow is refused before any step runs
        direct = _run(c, project, "workflow.run.both", "direct")
        assert direct["status"] == "error", direct
        assert direct["reason"]["code"] == "denied", direct
        assert direct["reason"]["reason"] == "approval_required", direct
        assert _calls(root) == []
        types = [e["type"] for e in _timeline(c, project, "direct")]
        assert "policy.allowed" not in types, types
        # a model's call of the workflow waits for a person, and nothing ran meanwhile
        llm = {"tool_calls": [{"name": "workflow.run.both", "args": {}}]}
        ack = c.send_message(project, C, "run it", correlation_id="turn", wait=True, llm=llm)
        assert ack["outcome"] == "awaiting_approval", ack
        [call_id] = ack["outcome_data"]["call_ids"]
        assert _calls(root) == []
        c.approve(project, C, call_id)

        def ended() -> bool:
            return "llm.completed" in [e["type"] for e in _timeline(c, project, "turn")]

        wait_until(ended, timeout_s=90, what="the approved turn to end")
        entries = _timeline(c, project, "turn")
        done = [e["data"] for e in entries if e["type"] == "tool.completed"]
        assert [d["name"] for d in done] == ["workflow.run.both"], entries
        steps = [
            e["data"]
            for e in entries
            if e["type"] == "policy.allowed" and e["data"]["tool"].startswith("mcp.")
        ]
        assert [s["reason"] for s in steps] == ["workflow_approved", "workflow_approved"]
    assert _calls(root) == ["echo", "add"]


def test_a_workflow_with_an_unknown_step_refuses_to_run_and_its_listing_says_so(
    daemon: Daemon, tmp_path: Path
) -> None:
    root = _root(tmp_path)
    with daemon.client(timeout_s=60) as c:
        project = c.start_project(str(root), "p1", _options(root))
        listed = {t["name"]: t for t in c.list_tools(project)}
        assert listed["workflow.run.missing"]["unavailable"] == {
            "code": "denied",
            "reason": "unknown_step_tool",
            "step": 1,
            "step_tool": "mcp.fx.no_such_tool",
        }
        assert "unavailable" not in listed["workflow.run.both"]
        c.start_conversation(project, C)
        result = _run(c, project, "workflow.run.missing", "missing")
        assert result["status"] == "error", result
        reason = result["reason"]
        assert (reason["code"], reason["reason"]) == ("denied", "unknown_step_tool"), reason
        assert (reason["step"], reason["step_tool"]) == (1, "mcp.fx.no_such_tool"), reason
        assert not (root / "planted.txt").exists()  # no step ran, not even the first
        entries = _timeline(c, project, "missing")
        denied = [e["data"] for e in entries if e["type"] == "policy.denied"]
        assert [(d["tool"], d["reason"]) for d in denied] == [
            ("workflow.run.missing", "unknown_step_tool")
        ]
    with Journal.open(daemon.home, "sqlite") as journal:
        loaded = [e for e in journal.read_project(project) if e.type == "project.assets_loaded"]
    errors = loaded[-1].data["errors"]
    assert {
        "type": "workflows",
        "key": "missing",
        "reason": "unknown_step_tool",
        "step": 1,
        "step_tool": "mcp.fx.no_such_tool",
    } in errors, errors


FETCH = """---
description: Fetch a loopback address
steps: [{"tool": "http.fetch", "args": {"url": "http://127.0.0.1:9/"}}]
---
The egress rules refuse loopback.
"""


def test_a_workflow_step_is_held_to_the_rules_its_direct_call_is(
    daemon: Daemon, tmp_path: Path
) -> None:
    root = _root(tmp_path)
    (root / ".roost" / "workflows" / "fetch.md").write_text(FETCH)
    # mcp is not in protocol_allowlist: no MCP tool exists, so a workflow of MCP steps
    # is unavailable, and a loopback fetch is refused as a step as it is directly
    options = _options(root, protocol_allowlist=[], approval_mode="never")
    with daemon.client(timeout_s=60) as c:
        project = c.start_project(str(root), "p1", options)
        c.start_conversation(project, C)
        direct = c.run_tool(
            project,
            {"name": "mcp.fx.echo", "args": {"text": "x"}, "meta": {"conversation_id": C}},
        )
        assert direct["reason"]["code"] == "unknown_tool", direct
        flow = _run(c, project, "workflow.run.both", "flow")
        assert flow["reason"]["reason"] == "unknown_step_tool", flow
        fetch = c.run_tool(
            project,
            {
                "name": "http.fetch",
                "args": {"url": "http://127.0.0.1:9/"},
                "meta": {"conversation_id": C},
            },
        )
        assert fetch["reason"]["code"] == "network_endpoint_denied", fetch
        step = _run(c, project, "workflow.run.fetch", "fetch")
        assert step["status"] == "error", step
        assert step["reason"]["code"] == "network_endpoint_denied", step
        assert (step["reason"]["step"], step["reason"]["step_tool"]) == (0, "http.fetch")
    assert _calls(root) == []
