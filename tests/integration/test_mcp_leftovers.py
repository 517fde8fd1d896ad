"""What an MCP stdio server leaves in the root is reviewed even when the daemon dies mid-call.

A command's run has a durable record (``ROOST_HOME/runs``) from before its process starts,
so a ``kill -9`` of the whole daemon cannot keep what it planted from the next start's
review. A server is a tool process too: its lifetime has the same record, and what it
planted during a call the crash cut is quarantined when the daemon starts again.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from runtime.client import Client
from runtime.daemon import start_daemon
from runtime.journal.store import Journal
from tests.integration.adversarial_helpers import needs_bwrap, wait_until
from tests.integration.conftest import daemon_env
from tests.integration.test_daemon_crash import kill_everything
from tests.integration.test_mcp_client import C, _root, _stdio

pytestmark = [needs_bwrap]

PLANT = (
    "mkdir -p cut/nested/.git/objects cut/nested/.git/refs"
    " && echo 'ref: refs/heads/main' > cut/nested/.git/HEAD"
    " && printf '[core]\\n\\tfsmonitor = /tmp/evil\\n' > cut/nested/.git/config"
    " && echo half > cut/half.txt && touch cut/ready && sleep 60"
)


@pytest.fixture
def home(daemon_home: str) -> str:
    """A ROOST_HOME whose daemons are all gone afterwards (``daemon_home``)."""
    return daemon_home


def test_what_a_server_planted_before_a_kill_9_is_reviewed_at_the_next_start(
    home: str, tmp_path: Path
) -> None:
    root = _root(tmp_path, "root")
    start_daemon(home, env=daemon_env(), timeout_s=60)
    with Client.connect(home, timeout_s=60) as c:
        c.start_project(str(root), project_id="p", options={"mcp_servers": [_stdio(root)]})
        c.start_conversation("p", conversation_id=C)
        tool = {"name": "mcp.fx.run", "args": {"argv": ["sh", "-c", PLANT]}, "run_mode": "async"}
        c.send_message("p", C, "go", correlation_id="corr-cut", llm={"tool_calls": [tool]})
    wait_until((root / "cut" / "ready").exists, timeout_s=60, what="the server to plant")
    kill_everything(home)
    assert (root / "cut" / "nested" / ".git" / "config").is_file()  # nothing reviewed it yet

    start_daemon(home, env=daemon_env(), timeout_s=60)
    assert not os.path.lexists(root / "cut" / "nested" / ".git")
    assert (root / "cut" / "half.txt").read_text() == "half\n"

    def recovered() -> list[dict[str, object]]:
        with Journal.open(home, "sqlite") as journal:
            return [
                e.data
                for e in journal.read_project("p")
                if e.type == "tool.changes" and e.data.get("recovered")
            ]

    [found] = wait_until(recovered, timeout_s=60, what="the recovered event")
    assert found["tool"] == "mcp.fx"
    assert str(found["quarantined"]).count("git_dir_created") == 1, found
    wait_until(lambda: not os.listdir(os.path.join(home, "runs")), what="the record to go")


SHAPES = (
    "mkdir -p sub/store && ln -s store sub/objects && ln -s store sub/refs"
    " && echo 'ref: refs/heads/main' > sub/HEAD && echo '[core]' > sub/config"
    " && touch a && ln -s a .env && mkdir -p \"$(printf 'nb\\377')/.git\" && echo done"
)


def test_an_mcp_server_is_held_to_the_same_leftover_shapes(home: str, tmp_path: Path) -> None:
    root = _root(tmp_path, "root")
    start_daemon(home, env=daemon_env(), timeout_s=60)
    with Client.connect(home, timeout_s=60) as c:
        c.start_project(str(root), project_id="p", options={"mcp_servers": [_stdio(root)]})
        c.start_conversation("p", conversation_id=C)
        request = {
            "name": "mcp.fx.run",
            "args": {"argv": ["sh", "-c", SHAPES]},
            "meta": {"conversation_id": C, "correlation_id": "shapes"},
        }
        result = c.run_tool("p", request)
        assert result["status"] == "ok", result
        timeline = c.incident_timeline("p", C, limit=500, correlation_id="shapes")
    found = {
        e["data"]["path"]: e["data"]["reason"]
        for e in timeline["entries"]
        if e["type"] == "security.leftover_quarantined"
    }
    assert found == {
        "sub/HEAD": "bare_repository",
        "sub/config": "bare_repository",
        "sub/objects": "bare_repository",
        "sub/refs": "bare_repository",
        ".env": "sensitive_alias",
        "nb\\xff/.git": "git_dir_created",
    }


MMAP = """import mmap, os, time
fd = os.open("lib.git/config", os.O_RDWR)
m = mmap.mmap(fd, 0)
p = b"[core]\\n\\tfsmonitor = /tmp/evil\\n"
m[len(m) - len(p) - 1 : len(m) - 1] = p
m.flush()
open("mapped", "w").close()
time.sleep(600)
"""


def test_a_change_through_a_mapping_a_server_keeps_open_is_reviewed(
    home: str, tmp_path: Path
) -> None:
    """A write through a shared mapping makes no inotify event, and a file a process
    keeps open makes no close event: the review must still see the changed ``config``."""
    root = _root(tmp_path, "root")
    subprocess.run(["git", "init", "-q", "--bare", str(root / "lib.git")], check=True)
    config = root / "lib.git" / "config"
    config.write_text(config.read_text() + "#" * 200 + "\n")
    (root / "mm.py").write_text(MMAP)
    start_daemon(home, env=daemon_env(), timeout_s=60)
    with Client.connect(home, timeout_s=60) as c:
        c.start_project(str(root), project_id="p", options={"mcp_servers": [_stdio(root)]})
        c.start_conversation("p", conversation_id=C)
        argv = [
            "sh",
            "-c",
            "python3 mm.py </dev/null >/dev/null 2>&1 & "
            "while [ ! -e mapped ]; do sleep 0.1; done; echo started",
        ]
        request = {
            "name": "mcp.fx.run",
            "args": {"argv": argv},
            "meta": {"conversation_id": C, "correlation_id": "mm"},
        }
        result = c.run_tool("p", request)
        assert result["status"] == "ok", result
        timeline = c.incident_timeline("p", C, limit=500, correlation_id="mm")
    assert not config.exists() or "fsmonitor" not in config.read_text()
    assert ("lib.git/config", "bare_repository") in {
        (e["data"]["path"], e["data"]["reason"])
        for e in timeline["entries"]
        if e["type"] == "security.leftover_quarantined"
    }
