"""Red team of issue 17: the rest of the view a command writes, by every route.

The sized private ``/tmp``, ``/var/tmp``, ``/run`` and ``/dev/shm`` hold what a command
writes outside the bound paths -- except that the view's own root is bubblewrap's tmpfs,
of the kernel's default size (half the host's memory), and a root command (CI, containers)
owns it: ``mkdir /x && dd ... of=/x/big`` filled it past ``tool_tmpfs_bytes``. The root
must be read-only, while the places a command is meant to write stay writable. An MCP
stdio server starts through the same launcher and view, so the same holds for it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.client import Client
from tests.integration.adversarial_helpers import run_daemon
from tests.integration.test_kernel_guards import ROUTES, TMPFS_BYTES, client, run
from tests.integration.test_mcp_client import C, _root, _run, _stdio

__all__ = ["client"]

MiB = 1024 * 1024


@pytest.mark.parametrize("route", ROUTES)
def test_the_views_root_takes_nothing(client: Client, route: str) -> None:
    size = TMPFS_BYTES // MiB + 4
    script = (
        "echo x > /planted; echo file=$?; mkdir /x; echo dir=$?; "
        f"dd if=/dev/zero of=/filled bs=1M count={size} 2>/dev/null; echo dd=$?; "
        'for d in /tmp /var/tmp /run /dev/shm "$HOME" .; do '
        'echo ok > "$d/w.txt" && rm "$d/w.txt" || echo "cannot write $d"; done'
    )
    result = run(client, route, script)
    assert result["stdout"].splitlines() == ["file=2", "dir=1", "dd=1"], result
    assert "Read-only file system" in result["stderr"], result


def test_the_views_root_takes_nothing_from_an_mcp_server(tmp_path: Path) -> None:
    """The same view through the launcher: the server's own writes to ``/`` fail too."""
    root = _root(tmp_path, "repo")
    script = "echo x > /planted; echo root=$?; echo y > /tmp/ok; echo tmp=$?"
    with run_daemon(tmp_path / "home") as daemon, daemon.client(timeout_s=60) as c:
        c.start_project(str(root), "p", {"mcp_servers": [_stdio(root)]})
        c.start_conversation("p", C)
        ran = _run(c, "p", "mcp.fx.run", {"argv": ["sh", "-c", script]}, "to-root")
    assert ran["status"] == "ok", ran
    out = ran["result"]["text"].partition(":")[2]
    assert [line for line in out.splitlines() if "=" in line] == ["root=2", "tmp=0"], ran
    assert "Read-only file system" in out, ran
