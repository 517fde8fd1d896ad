"""Red team of issue 17: the rest of the view a command writes, by every route.

The sized private ``/tmp``, ``/var/tmp``, ``/run`` and ``/dev/shm`` hold what a command
writes outside the bound paths -- except that the view's own root is bubblewrap's tmpfs,
of the kernel's default size (half the host's memory), and a root command (CI, containers)
owns it: ``mkdir /x && dd ... of=/x/big`` filled it past ``tool_tmpfs_bytes``. The root
must be read-only, while the places a command is meant to write stay writable.
"""

from __future__ import annotations

import pytest

from runtime.client import Client
from tests.integration.test_kernel_guards import ROUTES, TMPFS_BYTES, client, run

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
