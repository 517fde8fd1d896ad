"""Fault injection on a real daemon: actors crashed or SIGKILLed in the middle of a turn.

A project's Conversations, Policy and ToolRunner are entities hosted in its process
(``actors.hosting``): each test crashes one entity (``inject_fault``, which the test
daemons allow) or kills a process (the project's host or the Journal, found by role in
``diagnostics()["actors"]`` or the daemon's ``status()["actors"]``) and checks what the
supervisor does about it, from the
journal (read directly, so waiting never sends a request to a dead actor): the crash and
restart events, the turn's end, the projections against a replay, and that the next turn
works. The helpers here are shared by the other fault tests.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from typing import Any

import msgspec
import psutil
import pytest

from events.envelope import Envelope
from events.projections import get_projection
from runtime.client import Client
from runtime.guard.sandbox.layers import probe_layers
from runtime.journal.store import Journal
from tests.integration.conftest import Daemon
from tests.runtime.daemon_helpers import wait_for

SLOW_CALL = {
    "tool_calls": [{"name": "command.run", "args": {"command": "sleep 30"}, "run_mode": "async"}]
}
"""Deterministic-model directives: one ``command.run`` that would take 30 s."""

CRASHED_TURN = [
    "user.message",
    "llm.started",
    "tool.requested",
    "assistant.message",
    "policy.allowed",
    "tool.started",
    "tool.failed",
    "llm.started",
    "assistant.delta",
    "assistant.message",
    "llm.completed",
]
"""A turn whose only call was cut off by a crash, event types in seq order."""

TURN_END = ("llm.completed", "llm.failed", "budget.exceeded")
PROJECTIONS = ("timeline", "pending_tool_calls", "llm_context", "diagnostics")


def command_options() -> dict[str, Any]:
    """Options that let ``command.run`` run here (egress allowed only without a netns)."""
    if probe_layers()["netns"]["available"]:
        return {}
    return {"network_egress_policy": "allow"}


@pytest.fixture
def journal(daemon: Daemon) -> Iterator[Journal]:
    """The daemon's journal, opened for reading from the test process."""
    with Journal.open(daemon.home, "sqlite") as opened:
        yield opened


def of_turn(events: list[Envelope], correlation_id: str) -> list[Envelope]:
    """The events of one turn (one correlation), in seq order."""
    return [e for e in events if e.correlation_id == correlation_id]


def turn_over(journal: Journal, project_id: str, correlation_id: str) -> bool:
    """Whether the turn of ``correlation_id`` has ended in the journal."""
    return any(
        e.type in TURN_END for e in of_turn(journal.read_project(project_id), correlation_id)
    )


def has_event(journal: Journal, project_id: str, kind: str, **data: Any) -> bool:
    """Whether the project has an event of type ``kind`` whose data includes ``data``."""
    return any(
        e.type == kind and all(e.data.get(k) == v for k, v in data.items())
        for e in journal.read_project(project_id)
    )


def actor_events(events: list[Envelope]) -> list[tuple[str, str, int]]:
    """``(type, actor, restart_count)`` of every ``actor.*`` event, in seq order."""
    return [
        (e.type, str(e.data["actor"]), int(e.data["restart_count"]))
        for e in events
        if e.type.startswith("actor.")
    ]


def start_slow_turn(
    c: Client, journal: Journal, project_id: str, conversation_id: str, correlation_id: str
) -> int:
    """Start a turn whose ``sleep 30`` call is running; return the ``sleep`` process's pid."""
    c.send_message(project_id, conversation_id, "x", correlation_id=correlation_id, llm=SLOW_CALL)
    wait_for(
        lambda: has_event(journal, project_id, "tool.started", name="command.run"),
        timeout_s=20,
        what="the call to start",
    )
    runner = c.diagnostics(project_id)["actors"]["toolrunner"]
    found: list[int] = []

    def sleeping() -> bool:
        found.clear()
        for child in psutil.Process(runner).children(recursive=True):
            try:  # sandbox helpers come and go while we look
                if child.name() == "sleep":
                    found.append(child.pid)
            except psutil.NoSuchProcess:
                continue
        return bool(found)

    wait_for(sleeping, timeout_s=20, what="the sleep process to run")
    return found[0]


def crash(c: Client, project_id: str, target: str) -> None:
    """Crash the hosted ``target`` of a project, as a SIGKILL would its own process."""
    assert c.call("inject_fault", {"project_id": project_id, "target": target}) == {
        "crashed": target
    }


def gone(pid: int) -> bool:
    """Whether process ``pid`` has exited, every thread of it: its parent can reap it now.

    A killed process's main thread shows as a zombie while its other threads still exit;
    until they have, ``waitid`` in the parent does not see it exited yet.
    """
    try:
        proc = psutil.Process(pid)
        return proc.status() == psutil.STATUS_ZOMBIE and proc.num_threads() <= 1
    except psutil.NoSuchProcess:
        return True


def live_role(c: Client, project_id: str, role: str) -> int | None:
    """The pid the project reports for ``role`` when that process runs, else None."""
    pid = c.diagnostics(project_id)["actors"].get(role)
    return pid if pid is not None and not gone(pid) else None


def replayed(events: list[Envelope], conversation_id: str, key: str) -> Any:
    """A projection recomputed from journal events, in its wire (JSON) shape."""
    return msgspec.json.decode(msgspec.json.encode(get_projection(events, conversation_id, key)))


def test_a_killed_tool_runner_is_restarted_and_its_running_call_fails_as_crashed(
    daemon: Daemon, project_root: str, journal: Journal
) -> None:
    with daemon.client() as c:
        c.start_project(project_root, project_id="p1", options=command_options())
        c.start_conversation("p1", "c1")
        sleep = start_slow_turn(c, journal, "p1", "c1", "corr-slow")
        crash(c, "p1", "toolrunner")
        wait_for(lambda: turn_over(journal, "p1", "corr-slow"), timeout_s=30, what="turn end")
        # the turn fails the call at the crash; the restart is recorded after its backoff
        wait_for(
            lambda: has_event(journal, "p1", "actor.restarted", actor="toolrunner"),
            timeout_s=30,
            what="the restart",
        )
        events = journal.read_project("p1")
        assert actor_events(events) == [
            ("actor.crashed", "toolrunner", 1),
            ("actor.restarted", "toolrunner", 1),
        ]
        turn = of_turn(events, "corr-slow")
        assert [e.type for e in turn] == CRASHED_TURN
        failed = next(e for e in turn if e.type == "tool.failed")
        assert failed.data["reason"] == {
            "code": "tool_crashed",
            "message": "the tool runner exited",
        }
        assert turn[-2].data["content"] == "Tool command.run failed: tool_crashed"
        assert c.get_projection("p1", "c1", "pending_tool_calls") == []
        verified = c.verify("p1")
        assert (verified["ok"], verified["mismatches"]) == (True, [])
        wait_for(lambda: gone(sleep), timeout_s=10, what="the crashed runner's command to exit")
        after = c.send_message("p1", "c1", "read notes.txt", correlation_id="corr-after", wait=True)
        assert after["outcome"] == "llm.completed"
        types = [e.type for e in of_turn(journal.read_project("p1"), "corr-after")]
        assert "tool.completed" in types and "tool.failed" not in types


def test_a_killed_conversation_is_restarted_and_goes_on_from_its_events(
    daemon: Daemon, project_root: str, journal: Journal
) -> None:
    with daemon.client() as c:
        c.start_project(project_root, project_id="p1", options=command_options())
        c.start_conversation("p1", "c1")
        c.send_message("p1", "c1", "read notes.txt", correlation_id="corr-first", wait=True)
        sleep = start_slow_turn(c, journal, "p1", "c1", "corr-slow")
        host = c.diagnostics("p1")["actors"]["project"]
        crash(c, "p1", "conversation:c1")
        wait_for(lambda: turn_over(journal, "p1", "corr-slow"), timeout_s=30, what="turn end")
        events = journal.read_project("p1")
        assert actor_events(events) == [
            ("actor.crashed", "conversation:c1", 1),
            ("actor.restarted", "conversation:c1", 1),
        ]
        turn = of_turn(events, "corr-slow")
        assert [e.type for e in turn] == CRASHED_TURN
        failed = next(e for e in turn if e.type == "tool.failed")
        assert failed.data["reason"] == {
            "code": "tool_crashed",
            "message": "conversation restarted",
        }
        ids = [e.event_id for e in events]
        assert len(ids) == len(set(ids))
        for key in PROJECTIONS:
            assert c.get_projection("p1", "c1", key) == replayed(events, "c1", key), key
        assert c.get_projection("p1", "c1", "pending_tool_calls") == []
        verified = c.verify("p1")
        assert (verified["ok"], verified["mismatches"], verified["conversations_compared"]) == (
            True,
            [],
            ["c1"],
        )
        # the restarted conversation told the runner to stop the call it can no longer see
        wait_for(lambda: gone(sleep), timeout_s=10, what="the orphaned command to be killed")
        assert live_role(c, "p1", "project") == host  # the host and its neighbours go on
        after = c.send_message("p1", "c1", "hello", correlation_id="corr-after", wait=True)
        assert after["outcome"] == "llm.completed"


def test_a_client_waiting_on_a_killed_conversation_gets_the_turn_from_its_replacement(
    daemon: Daemon, project_root: str, journal: Journal
) -> None:
    """The waiter is handed to the restarted conversation, which answers when the turn ends."""
    with daemon.client() as c:
        c.start_project(project_root, project_id="p1", options=command_options())
        c.start_conversation("p1", "c1")
        answers: list[Any] = []

        def wait_for_turn() -> None:
            with daemon.client() as waiting:
                try:
                    answers.append(
                        waiting.send_message(
                            "p1",
                            "c1",
                            "x",
                            correlation_id="corr-slow",
                            llm=SLOW_CALL,
                            wait=True,
                            wait_timeout_s=90,
                        )
                    )
                    # The same connection (and daemon endpoint) serves the next turn right:
                    answers.append(
                        waiting.send_message(
                            "p1", "c1", "hello", correlation_id="corr-next", wait=True
                        )
                    )
                except Exception as e:  # reported by the assertions below
                    answers.append(e)

        thread = threading.Thread(target=wait_for_turn)
        thread.start()
        wait_for(
            lambda: has_event(journal, "p1", "tool.started", name="command.run"),
            timeout_s=20,
            what="the call to start",
        )
        crash(c, "p1", "conversation:c1")
        thread.join(timeout=60)
        assert not thread.is_alive(), "the waiting client was never answered"
        first, second = answers
        assert first["correlation_id"] == "corr-slow"
        assert first["outcome"] == "llm.completed"
        assert [e.type for e in of_turn(journal.read_project("p1"), "corr-slow")] == CRASHED_TURN
        assert second["correlation_id"] == "corr-next"
        assert second["outcome"] == "llm.completed"


def test_a_killed_project_is_restarted_from_its_events_and_its_children_go_with_it(
    daemon: Daemon, project_root: str, journal: Journal
) -> None:
    with daemon.client() as c:
        c.start_project(project_root, project_id="p1")
        c.start_conversation("p1", "c1")
        c.send_message("p1", "c1", "read notes.txt", wait=True)
        before = c.diagnostics("p1")["actors"]
        os.kill(before["project"], signal.SIGKILL)
        wait_for(
            lambda: has_event(journal, "p1", "actor.restarted", actor="project:p1"),
            timeout_s=20,
            what="the project to restart",
        )
        events = journal.read_project("p1")
        assert actor_events(events) == [
            ("actor.crashed", "project:p1", 1),
            ("actor.restarted", "project:p1", 1),
        ]
        assert events[-2].data["reason"] == "process exited"
        orphans = [before[r] for r in ("policy", "toolrunner", "conversation:c1")]
        wait_for(lambda: all(gone(pid) for pid in orphans), timeout_s=10, what="old children")
        after = c.send_message("p1", "c1", "read notes.txt", correlation_id="corr-after", wait=True)
        assert after["outcome"] == "llm.completed"
        now = c.diagnostics("p1")
        assert now["health"] == {"status": "ok"}
        assert set(now["actors"].values()).isdisjoint(before.values())
        assert c.verify("p1")["ok"] is True


def test_a_killed_journal_is_restarted_and_no_acknowledged_event_is_lost_or_doubled(
    daemon: Daemon, project_root: str, journal: Journal
) -> None:
    with daemon.client() as c:
        c.start_project(project_root, project_id="p1")
        c.start_conversation("p1", "c1")
        acks = [c.send_message("p1", "c1", f"before {i}", wait=True) for i in range(3)]
        writer = c.status()["actors"]["journal"]
        os.kill(writer, signal.SIGKILL)
        wait_for(lambda: gone(writer), timeout_s=10, what="the journal process to exit")
        acks += [c.send_message("p1", "c1", f"after {i}", wait=True) for i in range(3)]
        assert [a["outcome"] for a in acks] == ["llm.completed"] * 6
        events = journal.read_project("p1")
        by_id = {e.event_id: e for e in events}
        assert [(by_id[a["event_id"]].seq, by_id[a["event_id"]].type) for a in acks] == [
            (a["seq"], "user.message") for a in acks
        ]
        assert len(by_id) == len(events)
        contents = [e.data["content"] for e in events if e.type == "user.message"]
        assert contents == [f"before {i}" for i in range(3)] + [f"after {i}" for i in range(3)]
        assert c.status()["actors"]["journal"] != writer
        # the runner records a direct run itself: it must know the new journal too
        result = c.run_tool(
            "p1",
            {"name": "fs.read", "args": {"path": "notes.txt"}, "meta": {"correlation_id": "d"}},
        )
        assert result["status"] == "ok"
        direct = [e.type for e in journal.read_project("p1") if e.correlation_id == "d"]
        assert direct == ["tool.requested", "policy.allowed", "tool.started", "tool.completed"]
        verified = c.verify("p1")
        assert (verified["ok"], verified["mismatches"]) == (True, [])
        # the crash is on record in the project (and so in its incident report)
        records = [e for e in journal.read_project("p1") if e.type.startswith("actor.")]
        assert [(e.type, e.data["actor"], e.data["restart_count"]) for e in records] == [
            ("actor.crashed", "journal", 1),
            ("actor.restarted", "journal", 1),
        ]
        assert records[1].causation_id == records[0].event_id
        report = c.incident_report("p1", "c1")
        assert [(a["type"], a["data"]["actor"]) for a in report["actor_events"]] == [
            ("actor.crashed", "journal"),
            ("actor.restarted", "journal"),
        ]


def test_a_project_kept_busy_by_requests_still_notices_a_killed_child(
    daemon: Daemon, project_root: str, journal: Journal
) -> None:
    stop = threading.Event()

    def hammer() -> None:
        with daemon.client() as busy:
            while not stop.is_set():
                busy.diagnostics("p1")  # a live_status request to the project each time

    with daemon.client() as c:
        c.start_project(project_root, project_id="p1")
        thread = threading.Thread(target=hammer)
        thread.start()
        try:
            crash(c, "p1", "toolrunner")
            wait_for(
                lambda: has_event(journal, "p1", "actor.restarted", actor="toolrunner"),
                timeout_s=20,
                what="the restart while requests keep coming",
            )
        finally:
            stop.set()
            thread.join()
        assert actor_events(journal.read_project("p1")) == [
            ("actor.crashed", "toolrunner", 1),
            ("actor.restarted", "toolrunner", 1),
        ]


def test_a_request_for_a_conversation_crashed_a_moment_ago_is_served_by_its_restarted_entity(
    daemon: Daemon, project_root: str, journal: Journal
) -> None:
    with daemon.client() as c:
        c.start_project(project_root, project_id="p1")
        c.start_conversation("p1", "c1")
        crash(c, "p1", "conversation:c1")
        # held while the restart's backoff runs, then served by the new entity
        done = c.send_message(
            "p1", "c1", "hello", correlation_id="corr-next", wait=True, wait_timeout_s=20
        )
        assert done["outcome"] == "llm.completed"
        events = journal.read_project("p1")
        assert actor_events(events) == [
            ("actor.crashed", "conversation:c1", 1),
            ("actor.restarted", "conversation:c1", 1),
        ]
        assert [e.type for e in of_turn(events, "corr-next")] == [
            "user.message",
            "llm.started",
            "assistant.delta",
            "assistant.message",
            "llm.completed",
        ]


def test_a_conversation_rehydrating_while_the_journal_is_down_reads_again_from_the_new_one(
    daemon: Daemon, project_root: str, journal: Journal
) -> None:
    with daemon.client() as c:
        c.start_project(project_root, project_id="p1", options={"idle_passivation_ms": 50})
        c.start_conversation("p1", "c1")
        first = c.send_message("p1", "c1", "hello", wait=True)
        wait_for(lambda: c.diagnostics("p1")["active_conversations"] == [], what="passivation")
        writer = c.status()["actors"]["journal"]
        os.kill(writer, signal.SIGKILL)
        wait_for(lambda: gone(writer), timeout_s=10, what="the journal process to exit")
        # rehydrating c1 sends its read to the dead journal; the restart re-sends it
        done = c.send_message(
            "p1", "c1", "again", correlation_id="corr-again", wait=True, wait_timeout_s=20
        )
        assert done["outcome"] == "llm.completed"
        timeline = c.get_projection("p1", "c1", "timeline")
        assert [e["event_id"] for e in timeline if e["type"] == "user.message"] == [
            first["event_id"],
            done["event_id"],
        ]
        verified = c.verify("p1")
        assert (verified["ok"], verified["mismatches"]) == (True, [])


def test_a_crashed_conversation_leaves_its_neighbours_in_the_host_alone(
    daemon: Daemon, project_root: str, journal: Journal
) -> None:
    with daemon.client() as c:
        c.start_project(project_root, project_id="p1", options=command_options())
        c.start_conversation("p1", "c1")
        c.start_conversation("p1", "c2")
        host = c.diagnostics("p1")["actors"]["project"]
        start_slow_turn(c, journal, "p1", "c2", "corr-c2")  # c2 is in the middle of a call
        crash(c, "p1", "conversation:c1")
        done = c.send_message("p1", "c1", "hello", correlation_id="corr-c1", wait=True)
        assert done["outcome"] == "llm.completed"
        events = journal.read_project("p1")
        assert actor_events(events) == [
            ("actor.crashed", "conversation:c1", 1),
            ("actor.restarted", "conversation:c1", 1),
        ]
        c2 = [e.type for e in of_turn(events, "corr-c2")]
        assert c2[-1] == "tool.started"  # c2's call still runs, untouched
        assert c.diagnostics("p1")["actors"]["project"] == host
        c.cancel("p1", "c2")
        wait_for(lambda: turn_over(journal, "p1", "corr-c2"), timeout_s=30, what="c2's end")


def test_fault_injection_is_refused_by_a_daemon_not_started_for_it(
    tmp_path: Any, project_root: str
) -> None:
    from runtime.daemon import start_daemon, stop_daemon
    from runtime.errors import BadRequestError
    from tests.integration.conftest import daemon_env

    home = str(tmp_path / "plain-home")
    start_daemon(home, env=daemon_env(ROOST_FAULT_INJECTION="0"), timeout_s=60)
    try:
        with Client.connect(home, timeout_s=30) as c:
            c.start_project(project_root, project_id="p1")
            with pytest.raises(BadRequestError) as raised:
                c.call("inject_fault", {"project_id": "p1", "target": "toolrunner"})
            assert raised.value.details["reason"] == "fault_injection_disabled"
            assert c.diagnostics("p1")["health"] == {"status": "ok"}
    finally:
        stop_daemon(home)
