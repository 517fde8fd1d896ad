"""A command cannot feed the daemon a file: how it ended comes over a pipe, counted by Roost.

Issue 17, finding 5: the run's status file was a host file bound writable into the view,
read back with ``open(path).read()``. A command replaced it by a FIFO (a runner thread
stuck for the daemon's life), by a symlink to a large host file (the runner's memory grew
by its size) or to a file holding a number (the leftover count forged). The attack script
looks for that file in its view and, if it is there, links it to one of three host files
outside its view; then it leaves two processes behind. Whatever it finds, the call must
come back, the runner's peak memory must not grow, and the leftover count must be the two
processes it really left.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime.client import Client
from tests.integration.adversarial_helpers import Call, first, needs_bwrap, recorded, run_daemon
from tests.integration.conftest import make_root

pytestmark = needs_bwrap

C = "c"

ATTACK = textwrap.dedent(
    """
    import os, subprocess, sys

    target = sys.argv[1]
    status = None
    with open("/proc/self/mountinfo") as f:
        for line in f:
            mount = line.split()[4]
            if "roost-status-" in mount:
                status = os.path.join(mount, "left")
    if status is not None:
        if os.path.lexists(status):
            os.unlink(status)
        os.symlink(target, status)  # a host path: the daemon follows it outside the view
    for _ in range(2):
        subprocess.Popen(
            ["sleep", "300"],
            start_new_session=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    print("status-file" if status else "no-status-file")
    """
)


@pytest.fixture(scope="module")
def places() -> Iterator[Path]:
    """Host files outside every view: a FIFO, a large file, one holding a forged count."""
    path = Path(tempfile.mkdtemp(prefix="roost-status-attack-", dir="/var/tmp"))
    try:
        with open(path / "big", "wb") as f:
            f.truncate(96 * 1024 * 1024)
        (path / "forged").write_text("999\n")
        os.mkfifo(path / "fifo")
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Client]:
    """A daemon with one project holding the attack script."""
    base = tmp_path_factory.mktemp("status")
    with run_daemon(base / "home") as daemon, daemon.client(timeout_s=90) as c:
        root = Path(make_root(base / "repo"))
        (root / "attack.py").write_text(ATTACK)
        c.start_project(str(root), project_id="p")
        c.start_conversation("p", conversation_id=C)
        yield c


def _peak_rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise AssertionError(f"no VmHWM for {pid}")


@pytest.mark.parametrize("target", ["fifo", "big", "forged"])
def test_a_command_cannot_stall_grow_or_lie_to_the_daemon_through_a_status_file(
    client: Client, places: Path, target: str
) -> None:
    runner = int(client.diagnostics("p")["actors"]["toolrunner"])
    peak = _peak_rss_kib(runner)
    argv = ["python3", "attack.py", str(places / target)]
    call = Call("p", C, "command.run", {"command": argv, "timeout_ms": 30000})
    result = call.run(client)
    assert result["status"] == "ok", result
    assert result["result"]["exit_code"] == 0, result
    terminated = first(recorded(client, call), "tool.child_processes_terminated")
    assert (terminated["reason"], terminated["count"]) == ("completed", 2)
    assert _peak_rss_kib(runner) - peak < 32 * 1024
    again = Call("p", C, "command.run", {"command": "echo still-serving"}).run(client)
    assert again["result"]["stdout"] == "still-serving\n"
