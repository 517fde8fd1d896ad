"""Failures keep their cause, through the real ``roost`` program and a real daemon.

An MCP server that dies at project start: ``project start`` names it, its exit status and
its last stderr line (and the fix for a Python without the SDK), exits 1, and
``diagnostics`` says ``degraded`` with the server's redacted stderr tail. The model
server's side (retries and the circuit breaker) is in ``test_model_failure_causes.py``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from runtime.journal.store import Journal
from tests.integration.conftest import Daemon, make_root
from tests.integration.conftest import roost_cli as roost

TOKEN = "ghp_" + "a1B2c3D4e5" * 3 + "abcdef"
"""A GitHub-token-shaped value the server prints on stderr: it must not reach anyone."""

PYTHON = os.path.realpath(sys.executable)
"""A Python the sandbox shows (the runtime's own interpreter, resolved)."""

BROKEN_SERVER = f"""
import sys
print("starting with {TOKEN}", file=sys.stderr)
import roost_missing_sdk  # what `python3 server.py` meets when its Python lacks the SDK
"""


def test_an_mcp_server_that_fails_to_start_is_named_with_its_status_and_stderr(
    daemon: Daemon, tmp_path: Path
) -> None:
    root = Path(make_root(tmp_path / "repo"))
    (root / "tools").mkdir()
    (root / "tools" / "docs_server.py").write_text(BROKEN_SERVER)
    options = {
        "protocol_allowlist": ["mcp"],
        "mcp_servers": [{"name": "docs", "command": [PYTHON, "tools/docs_server.py"]}],
    }
    (tmp_path / "options.json").write_text(json.dumps(options))
    started = roost(
        daemon.home, "project", "start", str(root), "--id", "p1",
        "--options-file", str(tmp_path / "options.json"),
    )  # fmt: skip
    assert started.returncode == 1, started
    assert started.stdout.strip() == "p1"  # the project runs, without the server's tools
    line = started.stderr.strip()
    assert line.startswith("roost: mcp_server_failed: MCP server docs exited with status 1"), line
    assert "No module named 'roost_missing_sdk'" in line
    assert "command_read_paths" in line  # how to give the server a Python that has it
    assert "TaskGroup" not in line and len(line.splitlines()) == 1

    shown = roost(daemon.home, "--json", "project", "diagnostics", "p1")
    assert shown.returncode == 0, shown
    health = json.loads(shown.stdout)["health"]
    assert health["status"] == "degraded"
    assert list(health["problems"]) == ["docs"]
    problem = health["problems"]["docs"]
    assert problem["exit_status"] == 1
    tail = problem["stderr_tail"]
    assert tail.endswith("ModuleNotFoundError: No module named 'roost_missing_sdk'")
    assert "[REDACTED:github_token]" in tail and TOKEN not in tail
    assert "roost_missing_sdk" in problem["hint"]

    with Journal.open(daemon.home, "sqlite") as journal:
        [loaded] = [e for e in journal.read_project("p1") if e.type == "project.assets_loaded"]
    [error] = loaded.data["errors"]
    assert error["exit_status"] == 1 and "roost_missing_sdk" in error["stderr_tail"]
    assert TOKEN not in json.dumps(loaded.data)

    other = make_root(tmp_path / "plain")  # a root of its own: one root twice is warned
    plain = roost(daemon.home, "project", "start", other, "--id", "p2")
    assert plain.returncode == 0 and plain.stderr == "", plain
    healthy = json.loads(roost(daemon.home, "--json", "project", "diagnostics", "p2").stdout)
    assert healthy["health"] == {"status": "ok"}
    # for people: the whole stderr tail, line by line, under the server's name
    text = roost(daemon.home, "project", "diagnostics", "p1").stdout
    assert "status:   degraded" in text and "    docs:\n" in text
    assert "        ModuleNotFoundError: No module named 'roost_missing_sdk'\n" in text
