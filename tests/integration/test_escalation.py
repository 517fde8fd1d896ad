"""Restart intensity on a real daemon: a child that keeps dying escalates to the Supervisor.

The Project restarts a child at most ``max_restarts`` times within ``restart_period_ms``;
the next crash is ``actor.escalated`` and the Project asks the Supervisor to take over.
The Supervisor stops the Project and starts it again from its events, under its own
intensity (3 restarts within 5 s); beyond that the project is marked failed.
"""

from __future__ import annotations

from functools import partial

from runtime.client import Client
from runtime.journal.store import Journal
from tests.integration.conftest import Daemon
from tests.integration.test_fault_injection import (
    actor_events,
    crash,
    has_event,
)
from tests.runtime.daemon_helpers import wait_for


def kill_runner(c: Client, project_id: str) -> None:
    """Crash the project's ToolRunner (an entity of its host), as a SIGKILL would a process."""
    crash(c, project_id, "toolrunner")


def test_a_child_crashing_beyond_the_intensity_escalates_and_the_supervisor_restarts_the_project(
    daemon: Daemon, project_root: str
) -> None:
    options = {"max_restarts": 1, "restart_period_ms": 60000}
    with daemon.client() as c, Journal.open(daemon.home, "sqlite") as journal:
        c.start_project(project_root, project_id="p1", options=options)
        c.start_conversation("p1", "c1")
        first_project = c.diagnostics("p1")["actors"]["project"]
        kill_runner(c, "p1")
        wait_for(
            lambda: has_event(journal, "p1", "actor.restarted", actor="toolrunner"),
            timeout_s=20,
            what="the first restart",
        )
        kill_runner(c, "p1")
        wait_for(
            lambda: has_event(journal, "p1", "actor.restarted", actor="project:p1"),
            timeout_s=20,
            what="the project restart",
        )
        events = journal.read_project("p1")
        assert actor_events(events) == [
            ("actor.crashed", "toolrunner", 1),
            ("actor.restarted", "toolrunner", 1),
            ("actor.crashed", "toolrunner", 2),
            ("actor.escalated", "toolrunner", 2),
            ("actor.crashed", "project:p1", 1),
            ("actor.restarted", "project:p1", 1),
        ]
        signals = [e for e in events if e.type.startswith("actor.")]
        crashed, escalated = signals[2], signals[3]
        assert escalated.data["reason"] == "more than 1 restarts within 60000 ms"
        assert (escalated.causation_id, escalated.correlation_id) == (
            crashed.event_id,
            crashed.correlation_id,
        )
        assert [s.data["reason"] for s in signals[4:]] == [
            "escalated: toolrunner",
            "restarted from its events",
        ]
        assert signals[5].causation_id == signals[4].event_id
        assert all(s.conversation_id is None for s in signals)
        # the project runs again, from its events, with fresh children
        wait_for(
            lambda: c.diagnostics("p1")["actors"].get("project") not in (None, first_project),
            timeout_s=10,
            what="the new project to report",
        )
        assert c.diagnostics("p1")["health"] == {"status": "ok"}
        done = c.send_message("p1", "c1", "read notes.txt", wait=True)
        assert done["outcome"] == "llm.completed"
        assert c.verify("p1")["ok"] is True


def test_a_project_escalating_beyond_the_supervisor_intensity_is_marked_failed(
    daemon: Daemon, project_root: str
) -> None:
    with daemon.client() as c, Journal.open(daemon.home, "sqlite") as journal:
        c.start_project(project_root, project_id="p1", options={"max_restarts": 0})
        for count in range(1, 5):
            kill_runner(c, "p1")
            crashed = partial(has_event, journal, "p1", "actor.crashed", restart_count=count)
            wait_for(partial(crashed, actor="project:p1"), timeout_s=20, what=f"crash {count}")
            if count < 4:
                restarted = partial(has_event, journal, "p1", "actor.restarted", actor="project:p1")
                wait_for(partial(restarted, restart_count=count), timeout_s=20, what="restart")
        wait_for(
            lambda: has_event(journal, "p1", "actor.escalated", actor="project:p1"),
            timeout_s=20,
            what="the project to be given up",
        )
        events = journal.read_project("p1")
        project_signals = [s for s in actor_events(events) if s[1] == "project:p1"]
        assert project_signals == [
            ("actor.crashed", "project:p1", 1),
            ("actor.restarted", "project:p1", 1),
            ("actor.crashed", "project:p1", 2),
            ("actor.restarted", "project:p1", 2),
            ("actor.crashed", "project:p1", 3),
            ("actor.restarted", "project:p1", 3),
            ("actor.crashed", "project:p1", 4),
            ("actor.escalated", "project:p1", 4),
        ]
        assert [s for s in actor_events(events) if s[1] == "toolrunner"] == [
            ("actor.crashed", "toolrunner", 1),
            ("actor.escalated", "toolrunner", 1),
        ] * 4
        diagnostics = c.diagnostics("p1")
        assert diagnostics["health"] == {"status": "failed", "reason": "escalated: toolrunner"}
        assert diagnostics["actors"] == {}
        assert c.list_projects() == []
