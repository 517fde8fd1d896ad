"""A daemon killed while an MCP stdio server was frozen: the next daemon of its home cleans up.

A crash (SIGKILL of the daemon and its actors) leaves the server frozen in its freezer
cgroup: its parent-death signal waits for a thaw that nothing would ever give, and its
cgroups (freezer, pids, memory, cpu) stay. The next daemon started on the same home thaws,
kills and removes them; a daemon of another home, with a frozen server of its own, keeps
its server and its cgroups.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import psutil
import pytest

from runtime.client import Client
from runtime.daemon import start_daemon
from runtime.guard.sandbox import cgroupfs
from runtime.guard.sandbox.freezer import FreezerCgroup
from tests.integration.adversarial_helpers import LAYERS, needs_bwrap, run_daemon, wait_until
from tests.integration.conftest import Daemon, alive, daemon_env
from tests.integration.test_mcp_client import C, _root, _run, _server_process, _stdio

pytestmark = [
    needs_bwrap,
    pytest.mark.skipif(not LAYERS["freezer"]["available"], reason="no freezer cgroup here"),
]


def _cgroup_dirs(pid: int) -> dict[str, str]:
    """Controllers (``""`` for v2) -> the directory of each of the process's Roost cgroups."""
    found: dict[str, str] = {}
    with open(f"/proc/{pid}/cgroup", encoding="utf-8") as f:
        for line in f:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            if not os.path.basename(path).startswith(cgroupfs.CGROUP_PREFIX):
                continue
            for mount, fstype, options in cgroupfs.mounts():
                v2 = fstype == "cgroup2" and controllers == ""
                if v2 or (fstype == "cgroup" and set(controllers.split(",")) <= options):
                    found[controllers] = os.path.join(mount, path.lstrip("/"))
    return found


def _frozen_server(c: Client, root: Path) -> tuple[psutil.Process, dict[str, str]]:
    """Start a project whose MCP server answers one call and is frozen; it and its cgroups."""
    project = c.start_project(str(root), "p1", {"mcp_servers": [_stdio(root)]})
    c.start_conversation(project, C)
    answer = _run(c, project, "mcp.fx.echo", {"text": "one"}, "one")
    assert answer["status"] == "ok", answer
    server = _server_process(root)
    dirs = _cgroup_dirs(server.pid)
    assert dirs and all(os.path.isdir(d) for d in dirs.values()), dirs
    wait_until(lambda: _frozen(dirs), 10, "the server to be frozen")
    return server, dirs


def _frozen(dirs: dict[str, str]) -> bool:
    """Whether the kernel reports the freezer cgroup among ``dirs`` frozen."""
    if "freezer" in dirs:
        return FreezerCgroup(dirs["freezer"], "v1").frozen()
    return FreezerCgroup(dirs[""], "v2").frozen()


def _crash(daemon: Daemon, keep: set[int]) -> None:
    """SIGKILL every process of the daemon's tree but ``keep``, at once, as a crash would."""
    victims = [p for p in daemon.processes() if p.pid not in keep]
    for proc in victims:
        try:
            proc.send_signal(signal.SIGKILL)
        except psutil.NoSuchProcess:
            continue
    wait_until(lambda: not alive(victims), 30, "the killed daemon's processes to be gone")


def _log_lines(home: str, event: str) -> list[str]:
    log = Path(home) / "logs" / "daemon.log"
    return [line for line in log.read_text().splitlines() if f'"event":"{event}"' in line]


def test_a_daemon_started_after_a_crash_removes_the_frozen_server_and_cgroups_of_its_home(
    tmp_path: Path,
) -> None:
    home = str(tmp_path / "home")
    with run_daemon(tmp_path / "other-home") as other, other.client(timeout_s=60) as oc:
        # another home's daemon, with a frozen server of its own: never touched
        other_server, other_dirs = _frozen_server(oc, _root(tmp_path, "other-repo"))
        crashed = Daemon(home=home, pid=start_daemon(home, env=daemon_env(), timeout_s=60))
        with crashed.client(timeout_s=60) as c:
            server, dirs = _frozen_server(c, _root(tmp_path, "repo"))
        frozen = set(cgroupfs.tasks(dirs.get("freezer", dirs.get(""))))
        assert server.pid in frozen
        _crash(crashed, keep=frozen)  # its runner is gone: the parent-death signals are sent
        assert server.is_running() and _frozen(dirs)
        assert all(os.path.isdir(d) for d in dirs.values())

        with run_daemon(Path(home)):
            wait_until(lambda: not alive([server]), 15, "the frozen server to be killed")
            assert [d for d in dirs.values() if os.path.exists(d)] == []
            [line] = _log_lines(home, "leftover_cgroups_removed")
            assert all(os.path.basename(d) in line for d in dirs.values()), line
            assert str(server.pid) in line

        assert other_server.is_running() and _frozen(other_dirs)
        assert all(os.path.isdir(d) for d in other_dirs.values())
        assert _log_lines(other.home, "leftover_cgroups_removed") == []
        again = _run(oc, "p1", "mcp.fx.echo", {"text": "two"}, "two")
        assert again["status"] == "ok" and again["result"]["text"] == "two"
        assert _server_process(tmp_path / "other-repo").pid == other_server.pid
