"""The whole daemon SIGKILLed (every process at once), then started again on the same home.

Nothing acknowledged may be lost: every ``send_event`` ack names an event that is in the
journal after the restart, the projects that were running come back from their events,
the stale pid file and socket are cleaned up, and the turn the crash cut off ends as
crashed when its conversation is next used.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import psutil
import pytest

from runtime.client import Client
from runtime.daemon import start_daemon
from runtime.daemon.config import config_for_home
from runtime.daemon.processes import daemon_processes
from runtime.journal.store import Journal
from tests.integration.conftest import alive, daemon_env
from tests.integration.test_fault_injection import (
    CRASHED_TURN,
    SLOW_CALL,
    command_options,
    has_event,
    of_turn,
    turn_over,
)
from tests.runtime.daemon_helpers import wait_for


@pytest.fixture
def home(daemon_home: str) -> str:
    """A ROOST_HOME whose daemons are all gone afterwards (``daemon_home``)."""
    return daemon_home


def log_events(home: str, name: str) -> list[dict[str, Any]]:
    """The daemon log's lines whose ``event`` is ``name``."""
    lines = Path(config_for_home(home).log_path).read_text().splitlines()
    records = [json.loads(line) for line in lines if line.startswith("{")]
    return [r for r in records if r.get("event") == name]


def kill_everything(home: str) -> list[psutil.Process]:
    """SIGKILL every process of the daemon of ``home`` at once; wait until all are gone."""
    procs = daemon_processes(home)
    for proc in procs:
        with contextlib.suppress(psutil.NoSuchProcess):  # the watchdog may be quicker
            proc.kill()
    _, left = psutil.wait_procs(procs, timeout=15)
    assert alive(left) == []
    return procs


def test_after_the_daemon_is_killed_a_new_start_restores_every_acknowledged_event(
    home: str, project_root: str
) -> None:
    config = config_for_home(home)
    first = start_daemon(home, env=daemon_env(), timeout_s=60)
    with Client.connect(home, timeout_s=10) as c, Journal.open(home, "sqlite") as journal:
        c.start_project(project_root, project_id="p1", options=command_options())
        c.start_conversation("p1", "c1")
        c.start_conversation("p1", "c2")
        acks = [c.send_message("p1", "c1", f"one {i}", wait=True) for i in range(3)]
        acks += [c.send_message("p1", "c2", f"two {i}") for i in range(3)]
        acks.append(c.send_message("p1", "c1", "x", correlation_id="corr-slow", llm=SLOW_CALL))
        wait_for(
            lambda: has_event(journal, "p1", "tool.started", name="command.run"),
            timeout_s=20,
            what="the call to start",
        )
    killed = kill_everything(home)
    # the daemon, the admin and logger, the Supervisor, the Journal and the project's host
    assert first in {p.pid for p in killed} and len(killed) >= 6
    assert Path(config.socket_path).is_socket() and Path(config.pid_path).exists()

    second = start_daemon(home, env=daemon_env(), timeout_s=60)
    assert second != first
    assert [r["stale_pid"] for r in log_events(home, "stale_pid_file_found")] == [first]
    assert [r["path"] for r in log_events(home, "stale_socket_removed")] == [config.socket_path]
    with Client.connect(home, timeout_s=10) as c, Journal.open(home, "sqlite") as journal:
        projects = c.list_projects()
        assert [(p["project_id"], p["conversation_count"]) for p in projects] == [("p1", 2)]
        events = journal.read_project("p1")
        by_id = {e.event_id: e for e in events}
        assert [(by_id[a["event_id"]].seq, by_id[a["event_id"]].type) for a in acks] == [
            (a["seq"], "user.message") for a in acks
        ]
        # the turn the crash cut off ends when its conversation is used again
        assert c.diagnostics("p1")["health"] == {"status": "ok"}
        c.get_projection("p1", "c1", "diagnostics")
        wait_for(lambda: turn_over(journal, "p1", "corr-slow"), timeout_s=30, what="turn end")
        turn = of_turn(journal.read_project("p1"), "corr-slow")
        assert [e.type for e in turn] == CRASHED_TURN
        failed = next(e for e in turn if e.type == "tool.failed")
        assert failed.data["reason"] == {"code": "tool_crashed", "message": "runtime restarted"}
        for conversation in ("c1", "c2"):
            done = c.send_message("p1", conversation, "hello again", wait=True)
            assert done["outcome"] == "llm.completed"
            assert c.get_projection("p1", conversation, "pending_tool_calls") == []
        events = journal.read_project("p1")
        assert len({e.event_id for e in events}) == len(events)
        for ack in acks:  # every acknowledged message got its turn, exactly once
            ends = [
                e.type for e in of_turn(events, ack["correlation_id"]) if e.type == "llm.completed"
            ]
            assert ends == ["llm.completed"], ack
        verified = c.verify("p1")
        assert (verified["ok"], verified["chain_ok"], verified["mismatches"]) == (True, True, [])
