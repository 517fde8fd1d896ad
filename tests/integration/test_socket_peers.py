"""Roost's sockets on a real daemon (the actor backend) against processes that are not its own.

- ``journal.sock`` serves only the actor tree: the user's own shell, a process in another
  PID namespace and a command run by ``command.run`` are closed at accept, before a byte
  of theirs is buffered (the 64 MiB frame of the review grew the Journal by ~60 MB each).
- ``roost.sock`` refuses a command run by ``command.run``: under bubblewrap the socket
  is not even visible (private ``/tmp``); under the ``unshare`` fallback it is, and the
  peer check refuses the command's process (another PID namespace).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import socket
import struct
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.adversarial_helpers import LAYERS, run_daemon, wait_until
from tests.integration.conftest import Daemon, make_root
from tests.runtime.peer_helpers import PROBE, pid_namespace_prefixes, probe


def log_lines(home: str, event: str) -> list[dict[str, Any]]:
    with open(os.path.join(home, "logs", "daemon.log"), encoding="utf-8") as f:
        lines = [json.loads(line) for line in f if line.startswith("{")]
    return [line for line in lines if line.get("event") == event]


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[Daemon]:
    with run_daemon(tmp_path / "home") as running:
        yield running


def journal_socket(daemon: Daemon) -> str:
    path = os.path.join(daemon.home, "journal.sock")
    wait_until(lambda: os.path.exists(path), 30, "the journal link's socket")
    return path


def test_the_users_own_process_is_not_of_the_actor_tree_and_is_closed_before_any_read(
    daemon: Daemon,
) -> None:
    path = journal_socket(daemon)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with sock:
        sock.connect(path)
        sock.settimeout(20)
        # The frame of the review: a 64 MiB length prefix, then its body.
        with pytest.raises((BrokenPipeError, ConnectionResetError)):
            sock.sendall(struct.pack("!I", 64 * 1024 * 1024))
            for _ in range(64):
                sock.sendall(b"\0" * (1 << 20))
    rejected = wait_until(lambda: log_lines(daemon.home, "peer_rejected"), 10, "the log line")
    assert [(r["socket"], r["reason"], r["peer_pid"]) for r in rejected] == [
        ("journal.sock", "outside_tree", os.getpid())
    ]
    with daemon.client() as c:  # the daemon, and its journal, carry on
        assert c.ping()["pong"] is True


def test_a_process_in_another_pid_namespace_is_closed_at_accept(daemon: Daemon) -> None:
    path = journal_socket(daemon)
    prefixes = pid_namespace_prefixes(daemon.home)
    if not prefixes:
        pytest.skip("no way to make a PID namespace here")
    for prefix in prefixes.values():
        assert probe("journal", path, prefix) == {"outcome": "closed"}
    wait_until(lambda: len(log_lines(daemon.home, "peer_rejected")) == len(prefixes), 10, "the log")
    rejected = log_lines(daemon.home, "peer_rejected")
    assert {(r["socket"], r["reason"]) for r in rejected} == {
        ("journal.sock", "other_pid_namespace")
    }


SANDBOXES = {
    # Commands run only under bubblewrap (without it they are refused with
    # isolation_unavailable); a process in an unshare'd namespace is the test above.
    "bwrap": ({}, LAYERS["bwrap"]["available"]),
}


@pytest.mark.parametrize("sandbox", sorted(SANDBOXES))
def test_a_command_run_by_the_daemon_cannot_use_its_sockets(tmp_path: Path, sandbox: str) -> None:
    env, available = SANDBOXES[sandbox]
    if not available:
        pytest.skip(f"{sandbox} is not available here")
    home = tmp_path / "home"
    root = Path(make_root(tmp_path / "repo"))
    shutil.copy(PROBE, root / "probe.py")
    with run_daemon(home, **env) as daemon:
        journal = journal_socket(daemon)
        python = shlex.quote(sys.executable)
        command = (
            f"{python} probe.py roost {shlex.quote(str(home / 'roost.sock'))}; "
            f"{python} probe.py journal {shlex.quote(journal)}"
        )
        with daemon.client() as c:
            c.start_project(str(root), project_id="p1")
            result = c.run_tool("p1", {"name": "command.run", "args": {"command": command}})
            assert result["status"] == "ok", result
            roost, link = (json.loads(line) for line in result["result"]["stdout"].splitlines())
            assert c.ping()["pong"] is True
        rejected = log_lines(daemon.home, "peer_rejected")
    reachable = [r for r in (roost, link) if r["outcome"] != "unreachable"]
    if roost["outcome"] != "unreachable":
        assert roost["frame"]["error"]["details"]["reason"] == "peer_not_allowed", roost
        assert roost["frame"]["error"]["details"]["check"] == "other_pid_namespace"
    if link["outcome"] != "unreachable":
        assert link == {"outcome": "closed"}
    assert len(rejected) == len(reachable)
    assert {r["reason"] for r in rejected} <= {"other_pid_namespace"}
    if sandbox == "unshare":  # no filesystem confinement: the peer check is what refuses
        assert len(reachable) == 2
