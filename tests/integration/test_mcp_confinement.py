"""An MCP stdio server is confined like a command: one launcher, through a real daemon.

The server is the SDK's own ``MCPServer`` (``mcp_fixture_server.py``), started by the
daemon from ``mcp_servers``. Its ``run`` tool runs a program inside the server's own
sandbox, so what it sees can be compared, byte for byte, with what ``command.run`` sees in
the same project. Then the attacks of the second red team (issue 17, findings 4, 5 and 8)
by an MCP server: a ``.env`` written after it started, a tree past ``tool_max_processes``,
files planted in ``.git`` and ``.roost`` during a call and at its exit.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from runtime.client import Client
from runtime.option_table import RuntimeOptions
from tests.integration.adversarial_helpers import LAYERS, needs_bwrap, run_daemon, wait_until
from tests.integration.conftest import Daemon, alive
from tests.integration.test_mcp_client import C, _root, _run, _server_process, _stdio, _types
from tests.integration.test_trust_boundary import runtime_places

pytestmark = [
    needs_bwrap,
    pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed here"),
]

PROBE = r"""
grep -E '^(CapEff|CapPrm|CapBnd|NoNewPrivs|Seccomp):' /proc/self/status
grep -E '^Max (file size|data size|address space|open files|core file size)' /proc/self/limits
echo "pids_cgroup=$(grep -c ':pids:.*/roost-[0-9]*-[0-9a-f]*-[0-9a-f]*$' /proc/self/cgroup)"
echo "user_home=$(ls -A "$1" 2>&1 | tr '\n' ' ')"
echo "roost_home=$(ls -A "$2" 2>&1 | head -1)"
echo "env=[$(cat .env 2>&1)]"
if touch .git/config 2>/dev/null; then echo git_config=writable; else echo git_config=read-only; fi
if touch .roost/x 2>/dev/null; then echo roost=writable; else echo roost=read-only; fi
if (cat /proc/sys/vm/swappiness > /proc/sys/vm/swappiness) 2>/dev/null; then
  echo proc_sys=writable; else echo proc_sys=read-only; fi
echo "proc_keys=[$(head -c 80 /proc/keys 2>&1)]"
if touch /planted 2>/dev/null; then echo view_root=writable; else echo view_root=read-only; fi
echo "tmp_bytes=$(stat -f -c '%b %S' /tmp)"
touch setid.bin
if chmod u+s setid.bin 2>/dev/null; then echo setuid=allowed; else echo setuid=refused; fi
rm -f setid.bin
if mkfifo probe.fifo 2>/dev/null; then echo fifo=allowed; else echo fifo=refused; fi
rm -f probe.fifo
"""
"""What a tool process sees and holds, printed the same way from a command and a server."""

SECRET = "ROOST_MCP_SECRET=never-read-by-a-server"


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)


def _repo(tmp_path: Path, name: str) -> Path:
    root = _root(tmp_path, name)
    _git(root, "init", "-q")
    (root / "probe.sh").write_text(PROBE)
    return root


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    """A ``ROOST_HOME`` outside ``/tmp`` (where a tool would see it without the view).

    A new one each time: a path named after the test would be the same in every run and
    every session on the machine (one's daemon, pid file and cgroups another's).
    """
    base = Path(tempfile.mkdtemp(prefix=f"roost-mcp-{tmp_path.name}-", dir="/var/tmp"))
    try:
        yield base / "home"
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def served(home: Path) -> Iterator[Daemon]:
    """A real daemon on ``home``; its whole tree must be gone after it stops."""
    with run_daemon(home) as daemon:
        yield daemon


def _text(result: dict[str, Any]) -> str:
    assert result["status"] == "ok", result
    return str(result["result"]["text"])


def _mcp_run(c: Client, project: str, argv: list[str], corr: str) -> str:
    """``mcp.fx.run``'s output without its ``EXIT_CODE:`` prefix."""
    code, _, out = _text(_run(c, project, "mcp.fx.run", {"argv": argv}, corr)).partition(":")
    assert code.isdigit(), out
    return out


def _command(c: Client, project: str, argv: list[str], corr: str) -> str:
    result = _run(c, project, "command.run", {"command": argv}, corr)
    assert result["status"] == "ok", result
    return str(result["result"]["stdout"]) + str(result["result"]["stderr"])


def _limit(lines: list[str], name: str) -> list[str]:
    """Soft and hard values of the ``/proc/self/limits`` line ``name``."""
    [line] = [line for line in lines if line.startswith(name + " ")]
    return line[len(name) :].split()[:2]


def test_an_mcp_server_sees_and_holds_exactly_what_a_command_does(
    served: Daemon, home: Path, tmp_path: Path
) -> None:
    root = _repo(tmp_path, "repo")
    (root / ".env").write_text(SECRET + "\n")
    argv = ["sh", "probe.sh", str(Path.home()), str(home)]
    with served.client(timeout_s=60) as c:
        project = c.start_project(str(root), "p1", {"mcp_servers": [_stdio(root)]})
        c.start_conversation(project, C)
        from_command = _command(c, project, argv, "probe-command")
        from_server = _mcp_run(c, project, argv, "probe-server")
    assert from_server == from_command
    facts = dict(line.split(":", 1) for line in from_server.splitlines() if ":" in line)
    assert facts["CapEff"].strip() == "0000000000000000"
    assert facts["NoNewPrivs"].strip() == "1"
    if LAYERS.get("seccomp", {}).get("available"):
        assert facts["Seccomp"].strip() == "2"
    lines = from_server.splitlines()
    assert _limit(lines, "Max open files") == ["1024", "1024"]
    assert _limit(lines, "Max core file size") == ["0", "0"]
    if LAYERS["pids_limit"]["available"]:
        assert "pids_cgroup=1" in lines
    assert "never-read" not in from_server  # the sensitive file is refused, or reads empty
    assert [line for line in lines if line.startswith("env=[")] in (
        ["env=[]"],
        ["env=[cat: .env: Permission denied]"],
    )
    assert "git_config=read-only" in lines and "roost=read-only" in lines
    # the kernel's side (findings 1, 6, 10 and 11 of the second round), held for a server too
    assert "proc_sys=read-only" in lines
    [keys] = [line for line in lines if line.startswith("proc_keys=")]
    assert keys == "proc_keys=[]" or keys.endswith("Permission denied]"), keys
    assert "view_root=read-only" in lines
    if LAYERS.get("tmpfs_size", {}).get("available"):
        [tmp] = [line.split("=", 1)[1].split() for line in lines if line.startswith("tmp_bytes=")]
        assert int(tmp[0]) * int(tmp[1]) <= RuntimeOptions().tool_tmpfs_bytes, tmp
    if LAYERS.get("seccomp", {}).get("available"):
        assert "setuid=refused" in lines and "fifo=refused" in lines
    assert f"roost_home=ls: cannot access '{home}': No such file or directory" in lines
    [user_home] = [line.split("=", 1)[1].split() for line in lines if line.startswith("user_home=")]
    shown = {str(Path.home() / name) for name in user_home}
    assert shown <= set(runtime_places()), shown  # only the runtime's own interpreter
    assert not (root / ".roost" / "x").exists()


def test_a_sensitive_file_created_after_the_server_started_is_as_unreadable_to_it(
    served: Daemon, tmp_path: Path
) -> None:
    root = _repo(tmp_path, "repo")
    with served.client(timeout_s=60) as c:
        project = c.start_project(str(root), "p1", {"mcp_servers": [_stdio(root)]})
        c.start_conversation(project, C)
        before = _mcp_run(c, project, ["cat", ".env"], "before")
        assert "No such file" in before  # the server runs, and .env does not exist yet
        (root / ".env").write_text(SECRET + "\n")
        from_command = _command(c, project, ["cat", ".env"], "command")
        from_server = _mcp_run(c, project, ["cat", ".env"], "after")
        assert SECRET not in from_command and from_server == from_command
        assert "mcp.server_exited" in _types(c, project, "after")
        # replaced under the same name (an editor's rename): hidden again, not readable
        (root / ".env.new").write_text(SECRET + "-2\n")
        (root / ".env.new").rename(root / ".env")
        assert _mcp_run(c, project, ["cat", ".env"], "renamed") == from_command
    assert (root / ".env").read_text() == SECRET + "-2\n"


def test_an_mcp_server_tree_stops_at_tool_max_processes(served: Daemon, tmp_path: Path) -> None:
    if not LAYERS["pids_limit"]["available"]:
        pytest.skip(f"no pids cgroup here: {LAYERS['pids_limit']['detail']}")
    root = _repo(tmp_path, "repo")
    options = {"mcp_servers": [_stdio(root)], "tool_max_processes": 32}
    with served.client(timeout_s=60) as c:
        project = c.start_project(str(root), "p1", options)
        c.start_conversation(project, C)
        started = int(_text(_run(c, project, "mcp.fx.spawn", {"count": 100}, "bomb")))
        assert 1 <= started < 32
        # the server and the daemon keep serving
        assert _text(_run(c, project, "mcp.fx.echo", {"text": "alive"}, "after")) == "alive"
        assert _command(c, project, ["echo", "still-serving"], "cmd") == "still-serving\n"


def _quarantined(c: Client, project: str, corr: str) -> list[tuple[str, str]]:
    timeline = c.incident_timeline(project, C, limit=500, correlation_id=corr)
    return sorted(
        (e["data"]["path"], e["data"]["reason"])
        for e in timeline["entries"]
        if e["type"] == "security.leftover_quarantined"
    )


def test_what_an_mcp_server_plants_in_git_and_roost_does_not_survive(
    served: Daemon, tmp_path: Path
) -> None:
    root = _repo(tmp_path, "repo")
    shutil.rmtree(root / ".roost")  # absent when the server starts: writable in its view
    config = (root / ".git" / "config").read_text()
    asset = "---\ndescription: planted\nargv: [sh, -c, id]\n---\nPlanted.\n"
    with served.client(timeout_s=60) as c:
        project = c.start_project(str(root), "p1", {"mcp_servers": [_stdio(root)]})
        c.start_conversation(project, C)
        writes = {
            ".git/config": "[core]\n\tfsmonitor = /tmp/evil\n",
            ".git/commondir": "../evil\n",
            ".roost/commands/x.md": asset,
        }
        answers = {
            rel: _text(_run(c, project, "mcp.fx.write", {"path": rel, "text": text}, f"w{i}"))
            for i, (rel, text) in enumerate(writes.items())
        }
        assert answers[".git/config"].startswith("DENIED:")  # every .git is read-only
        assert answers[".git/commondir"].startswith("DENIED:")
        assert answers[".roost/commands/x.md"] == "WROTE"
        assert _quarantined(c, project, "w2") == [(".roost", "assets_created")]
        assert not (root / ".git" / "commondir").exists() and not (root / ".roost").exists()
        # planted at the server's exit: quarantined by the same review when the project stops
        exit_write = {"path": "sub/.git/config", "text": "[core]\n\tfsmonitor = /tmp/evil\n"}
        assert _text(_run(c, project, "mcp.fx.write_at_exit", exit_write, "at-exit"))
        runner = psutil.Process(c.diagnostics(project)["actors"]["toolrunner"])
        c.stop_project(project)
        wait_until(lambda: not alive([runner]), 30, "the project's ToolRunner to exit")
        assert not (root / "sub" / ".git").exists()
        assert (root / ".git" / "config").read_text() == config
        # nothing planted became a tool at the next start
        again = c.start_project(str(root), "p2", {})
        assert "command.run.x" not in {t["name"] for t in c.list_tools(again)}


def test_a_roost_directory_made_after_the_server_started_is_read_only_to_it(
    served: Daemon, tmp_path: Path
) -> None:
    root = _repo(tmp_path, "repo")
    shutil.rmtree(root / ".roost")
    with served.client(timeout_s=60) as c:
        project = c.start_project(str(root), "p1", {"mcp_servers": [_stdio(root)]})
        c.start_conversation(project, C)
        assert _text(_run(c, project, "mcp.fx.echo", {"text": "up"}, "up")) == "up"
        (root / ".roost" / "commands").mkdir(parents=True)  # the user's, after the start
        planted = {"path": ".roost/commands/x.md", "text": "---\nargv: [id]\n---\n"}
        answer = _text(_run(c, project, "mcp.fx.write", planted, "plant"))
        assert answer.startswith("DENIED:"), answer
        assert "view_changed" in str(c.incident_timeline(project, C, correlation_id="plant"))
    assert list((root / ".roost" / "commands").iterdir()) == []


def test_a_server_left_frozen_by_a_killed_runner_dies_at_the_next_call(
    served: Daemon, tmp_path: Path
) -> None:
    if not LAYERS["freezer"]["available"]:
        pytest.skip(f"no freezer here: {LAYERS['freezer']['detail']}")
    root = _repo(tmp_path, "repo")
    with served.client(timeout_s=60) as c:
        project = c.start_project(str(root), "p1", {"mcp_servers": [_stdio(root)]})
        c.start_conversation(project, C)
        assert _text(_run(c, project, "mcp.fx.echo", {"text": "one"}, "one")) == "one"
        server = _server_process(root)  # frozen now, between calls
        # The runner is an entity of the project's host: the host is the process to kill.
        first = c.diagnostics(project)["actors"]["project"]
        os.kill(first, signal.SIGKILL)  # the server's parent-death signal waits for a thaw
        assert server.is_running()
        wait_until(
            lambda: c.diagnostics(project)["actors"].get("project") not in (None, first),
            30,
            "a new host",
        )
        assert _text(_run(c, project, "mcp.fx.echo", {"text": "two"}, "two")) == "two"
        wait_until(lambda: not alive([server]), 15, "the frozen server of the dead runner to die")
