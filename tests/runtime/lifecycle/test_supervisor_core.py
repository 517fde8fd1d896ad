"""The Supervisor's core without an actor system: boot, requests, restarts, escalation."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from runtime.lifecycle import effects as fx
from runtime.lifecycle.supervision import RestartPolicy
from runtime.lifecycle.supervisor_core import JOURNAL, SupervisorCore
from runtime.wire.op_args import NoArgs, StartProjectArgs
from runtime.wire.ops import Call
from tests.runtime.calls import call_of
from tests.runtime.lifecycle.helpers import (
    NOW,
    NOW_AT,
    Clock,
    appended,
    envelope,
    error_of,
    ids,
    of,
)


def make_core(tmp_path: Path, *, max_restarts: int = 3) -> tuple[SupervisorCore, Clock]:
    clock = Clock()
    core = SupervisorCore(
        clock=lambda: NOW,
        new_id=ids(),
        restarts=RestartPolicy(max_restarts, 5000, clock=clock),
        journal_restarts=RestartPolicy(10, 60000, clock=clock),
    )
    home = tmp_path / "home"
    home.mkdir()
    core.boot(str(home), "daemon")
    core.spawned(JOURNAL, "journal-1")
    core.restore([])
    return core, clock


def ask(core: SupervisorCore, op: str, args: dict[str, Any]) -> list[fx.Effect]:
    """A request as the gateway forwards it: ids minted where the client gave none."""
    return core.request(call_of(op, args), "client", None)


def start(core: SupervisorCore, root: Path, project_id: str = "p1", **args: Any) -> list[fx.Effect]:
    root.mkdir(exist_ok=True)
    request = {"root": str(root), "project_id": project_id, **args}
    effects = ask(core, "start_project", request)
    for spawn in of(effects, fx.Spawn):
        core.spawned(spawn.name, f"addr-{spawn.name}")
    return effects


def test_boot_starts_the_journal_and_reads_the_lifecycle_once_it_is_set_up(tmp_path: Path) -> None:
    core = SupervisorCore(clock=lambda: NOW, new_id=ids())
    assert core.boot(str(tmp_path), "daemon") == [fx.Spawn(name="journal")]
    assert core.journal_ready() == [fx.ReadLifecycle()]


def test_a_journal_that_cannot_open_fails_the_boot_at_once_with_its_error(tmp_path: Path) -> None:
    core = SupervisorCore(clock=lambda: NOW, new_id=ids())
    core.boot(str(tmp_path), "daemon")
    error = {"code": "journal_error", "message": "POSTGRES_PASSWORD is not set", "details": {}}
    assert core.journal_ready(error) == [fx.Answer(to="daemon", ok=False, error=error)]
    later = core.journal_ready(error)  # a restarted Journal: logged, nobody waits
    assert [(e.level, e.event) for e in of(later, fx.Log)] == [("error", "journal_not_open")]


def test_a_project_whose_start_was_not_recorded_is_forgotten_not_restarted(
    tmp_path: Path,
) -> None:
    core, _ = make_core(tmp_path)
    start(core, tmp_path / "root")
    error = {"code": "journal_error", "message": "disk full", "details": {}}
    effects = core.escalated("p1", "start", error)
    assert of(effects, fx.Stop) == [fx.Stop(to="addr-project:p1")]
    assert of(effects, fx.AppendThen) == []  # nothing to record on a full disk, no restart
    assert "p1" not in core.projects and "p1" not in core.failed
    assert "p1" not in core.list_projects()


def test_restore_restarts_the_projects_whose_last_event_is_started(tmp_path: Path) -> None:
    core = SupervisorCore(clock=lambda: NOW, new_id=ids())
    (tmp_path / "home").mkdir()
    (tmp_path / "a").mkdir()
    core.boot(str(tmp_path / "home"), "daemon")
    started = {"root": str(tmp_path / "a"), "options": {"max_restarts": 1}}
    effects = core.restore(
        [
            envelope("project.started", "pa", started),
            envelope("project.started", "pb", started),
            envelope("project.stopped", "pb", {}),
        ]
    )
    assert of(effects, fx.Spawn) == [fx.Spawn(name="project:pa", restore=True)]
    assert core.projects["pa"].options == {"max_restarts": 1}
    assert of(effects, fx.Answer) == [fx.Answer(to="daemon", ok=True, result={"restored": ["pa"]})]


def test_restore_refuses_a_root_that_contains_roost_home_and_stops_it(tmp_path: Path) -> None:
    core = SupervisorCore(clock=lambda: NOW, new_id=ids())
    home = tmp_path / "home"
    home.mkdir()
    core.boot(str(home), "daemon")
    effects = core.restore([envelope("project.started", "p1", {"root": str(tmp_path)})])
    assert of(effects, fx.Spawn) == []
    reason = "invalid_root_path: contains_roost_home"
    assert appended(effects) == [("project.stopped", {"reason": reason})]
    assert core.list_projects()["p1"] == {"status": "failed", "reason": reason}


def test_start_project_refuses_a_relative_root(tmp_path: Path) -> None:
    core, _ = make_core(tmp_path)
    effects = ask(core, "start_project", {"root": "rel/dir"})
    error = error_of(effects)
    assert error["code"] == "invalid_root_path"
    assert error["message"] == (
        "project root 'rel/dir' must be an absolute path to an existing directory"
    )


def test_start_project_refuses_a_root_inside_roost_home(tmp_path: Path) -> None:
    core, _ = make_core(tmp_path)
    inside = tmp_path / "home" / "sub"
    inside.mkdir()
    error = error_of(ask(core, "start_project", {"root": str(inside)}))
    assert (error["code"], error["details"]["reason"]) == ("invalid_root_path", "inside_roost_home")


def test_start_project_refuses_a_project_id_of_the_wrong_shape(tmp_path: Path) -> None:
    core, _ = make_core(tmp_path)
    (tmp_path / "r").mkdir()
    args = {"root": str(tmp_path / "r"), "project_id": "no spaces/here"}
    error = error_of(ask(core, "start_project", args))
    assert (error["code"], error["details"]["reason"]) == ("bad_request", "invalid_project_id")


def test_start_project_spawns_the_project_with_its_resolved_root(tmp_path: Path) -> None:
    core, _ = make_core(tmp_path)
    effects = start(core, tmp_path / "r")
    (spawn,) = effects
    assert spawn == fx.Spawn(
        name="project:p1", reply_to="client", correlation_id=spawn.correlation_id
    )
    assert spawn.correlation_id and spawn.correlation_id.startswith("corr-")
    assert core.projects["p1"].root == os.path.realpath(tmp_path / "r")
    assert core.projects["p1"].started_at == NOW_AT


def test_a_second_start_of_a_running_project_is_already_started(tmp_path: Path) -> None:
    core, _ = make_core(tmp_path)
    start(core, tmp_path / "r")
    assert error_of(start(core, tmp_path / "r"))["code"] == "already_started"


def test_a_request_for_a_project_goes_to_that_project(tmp_path: Path) -> None:
    core, _ = make_core(tmp_path)
    start(core, tmp_path / "r")
    effects = core.request(call_of("describe_project"), "client", "the-request")
    assert effects == [fx.Send(to=fx.Child("project:p1"), message="the-request")]
    assert core.address("project:p1") == "addr-project:p1"


def test_a_request_for_a_project_that_does_not_run_is_project_not_found(tmp_path: Path) -> None:
    core, _ = make_core(tmp_path)
    error = error_of(core.request(call_of("describe_project", project_id="nope"), "client", None))
    assert error["code"] == "project_not_found"


def test_an_op_the_supervisor_does_not_know_is_a_bad_request(tmp_path: Path) -> None:
    core, _ = make_core(tmp_path)
    error = error_of(core.request(Call(op="dance", args=NoArgs()), "client", None))
    assert (error["code"], error["details"]) == (
        "bad_request",
        {"reason": "unknown_op", "op": "dance"},
    )


def test_stop_project_stops_it_and_answers_once_project_stopped_is_committed(
    tmp_path: Path,
) -> None:
    core, _ = make_core(tmp_path)
    start(core, tmp_path / "r")
    effects = core.request(call_of("stop_project"), "client", None)
    assert effects[0] == fx.Stop(to="addr-project:p1")
    (append,) = of(effects, fx.AppendThen)
    assert appended(effects) == [("project.stopped", {"reason": "requested"})]
    assert append.then is not None
    result = {"project_id": "p1", "stopped": True}
    assert append.then(None) == [fx.Answer(to="client", ok=True, result=result)]
    assert core.child_exited("addr-project:p1") == []


def test_stop_project_answers_the_journals_error_when_the_stop_is_not_committed(
    tmp_path: Path,
) -> None:
    core, _ = make_core(tmp_path)
    start(core, tmp_path / "r")
    (append,) = of(
        core.request(call_of("stop_project"), "client", None),
        fx.AppendThen,
    )
    assert append.then is not None
    error = {"code": "journal_error", "message": "disk full", "details": {}}
    assert append.then(error) == [fx.Answer(to="client", ok=False, error=error)]


def test_a_crashed_project_is_restarted_from_its_events_after_a_backoff(tmp_path: Path) -> None:
    core, _ = make_core(tmp_path)
    start(core, tmp_path / "r")
    effects = core.child_exited("addr-project:p1")
    crash = {"actor": "project:p1", "reason": "process exited", "restart_count": 1}
    assert appended(effects) == [("actor.crashed", crash)]
    (wakeup,) = of(effects, fx.Wakeup)
    assert wakeup.delay_s == 0.05
    crashed = of(effects, fx.AppendThen)[0].events[0]
    again = core.wakeup(wakeup.payload)
    assert of(again, fx.Spawn) == [fx.Spawn(name="project:p1", restore=True)]
    (restarted,) = of(again, fx.AppendThen)[0].events
    assert (restarted.type, restarted.causation_id) == ("actor.restarted", crashed.event_id)
    assert restarted.correlation_id == crashed.correlation_id


def test_requests_for_a_project_waiting_for_its_restart_are_held_and_then_sent(
    tmp_path: Path,
) -> None:
    core, _ = make_core(tmp_path)
    start(core, tmp_path / "r")
    (wakeup,) = of(core.child_exited("addr-project:p1"), fx.Wakeup)
    held = core.request(
        call_of("describe_project", {"project_id": "p1"}), "client-2", "the-request"
    )
    assert held == []  # not project_not_found: its host is only being restarted
    again = core.wakeup(wakeup.payload)
    assert of(again, fx.Spawn) == [fx.Spawn(name="project:p1", restore=True)]
    assert of(again, fx.Send) == [fx.Send(to=fx.Child("project:p1"), message="the-request")]


def test_a_request_for_a_project_whose_host_died_unnoticed_restarts_it_and_waits(
    tmp_path: Path,
) -> None:
    core, _ = make_core(tmp_path)
    start(core, tmp_path / "r")
    core.actor_started("project:p1", 4242)
    dead = {4242}
    core.is_dead = lambda pid: pid in dead
    effects = core.request(
        call_of("describe_project", {"project_id": "p1"}), "client-2", "the-request"
    )
    assert [t for t, _ in appended(effects)] == ["actor.crashed"]  # not forwarded to the dead
    assert of(effects, fx.Send) == []
    (wakeup,) = of(effects, fx.Wakeup)
    again = core.wakeup(wakeup.payload)
    assert of(again, fx.Send) == [fx.Send(to=fx.Child("project:p1"), message="the-request")]
    core.spawned("project:p1", "addr-project:p1-2")  # the new host, before it announces
    later = core.request(call_of("describe_project", {"project_id": "p1"}), "client-3", "next")
    assert of(later, fx.Send) == [fx.Send(to=fx.Child("project:p1"), message="next")]
    assert appended(later) == []  # the dead pid was the former host's, not this one's


def test_requests_held_for_a_project_that_is_not_restarted_are_refused(tmp_path: Path) -> None:
    core, _ = make_core(tmp_path, max_restarts=1)
    start(core, tmp_path / "r")
    (wakeup,) = of(core.child_exited("addr-project:p1"), fx.Wakeup)
    assert core.request(call_of("describe_project", {"project_id": "p1"}), "client-2", "m") == []
    core.wakeup(wakeup.payload)
    core.spawned("project:p1", "addr-project:p1-2")
    core.child_exited("addr-project:p1-2")  # beyond its intensity: not restarted
    late = core.request(call_of("describe_project", {"project_id": "p1"}), "client-3", "m")
    assert error_of(late)["code"] == "project_not_found"


def test_a_project_crashing_beyond_its_intensity_is_escalated_and_listed_failed(
    tmp_path: Path,
) -> None:
    core, _ = make_core(tmp_path, max_restarts=0)
    start(core, tmp_path / "r")
    effects = core.child_exited("addr-project:p1")
    assert [t for t, _ in appended(effects)] == ["actor.crashed", "actor.escalated"]
    assert of(effects, fx.Wakeup) == []
    assert core.list_projects()["p1"] == {"status": "failed", "reason": "process exited"}


def test_a_project_that_escalates_is_stopped_and_restarted(tmp_path: Path) -> None:
    core, _ = make_core(tmp_path)
    start(core, tmp_path / "r")
    effects = core.escalated("p1", "toolrunner")
    assert effects[0] == fx.Stop(to="addr-project:p1")
    assert appended(effects)[0][1]["reason"] == "escalated: toolrunner"
    assert len(of(effects, fx.Wakeup)) == 1
    assert core.child_exited("addr-project:p1") == []


def test_a_dead_journal_is_restarted_and_its_crash_recorded_in_every_project(
    tmp_path: Path,
) -> None:
    core, _ = make_core(tmp_path)
    start(core, tmp_path / "a", "pa")
    start(core, tmp_path / "b", "pb")
    effects = core.child_exited("journal-1")
    assert core.journal is None
    assert of(effects, fx.Wakeup) == [fx.Wakeup(delay_s=0.05, payload="journal")]
    again = core.wakeup("journal")
    assert again[:2] == [fx.Spawn(name="journal"), fx.PeerChanged(peer="journal")]
    events = [e for a in of(again, fx.AppendThen) for e in a.events]
    assert [(e.project_id, e.type) for e in events] == [
        ("pa", "actor.crashed"),
        ("pa", "actor.restarted"),
        ("pb", "actor.crashed"),
        ("pb", "actor.restarted"),
    ]
    assert events[1].causation_id == events[0].event_id


def test_nothing_is_restarted_once_the_actor_system_shuts_down(tmp_path: Path) -> None:
    core, _ = make_core(tmp_path)
    start(core, tmp_path / "r")
    core.exit()
    assert core.child_exited("addr-project:p1") == []
    assert core.wakeup("journal") == []


def test_list_projects_shows_running_projects_and_actor_pids(tmp_path: Path) -> None:
    core, _ = make_core(tmp_path)
    start(core, tmp_path / "r")
    core.actor_started("journal", 42)
    (reply,) = core.request(call_of("list_projects", {}), "client", None)
    assert isinstance(reply, fx.Answer)
    root = os.path.realpath(tmp_path / "r")
    assert reply.result["p1"] == {"root": root, "started_at": NOW_AT, "status": "running"}
    assert reply.result["_actors"]["journal"] == 42


def test_start_project_refuses_an_empty_root(tmp_path: Path) -> None:
    core, _ = make_core(tmp_path)
    error = error_of(ask(core, "start_project", {"root": ""}))
    assert (error["code"], error["message"]) == (
        "invalid_root_path",
        "the project root must be a non-empty path",
    )


def test_start_and_stop_are_recorded_under_the_requests_correlation(tmp_path: Path) -> None:
    core, _ = make_core(tmp_path)
    (spawn,) = start(core, tmp_path / "r", correlation_id="corr-begin")
    assert spawn.correlation_id == "corr-begin"
    effects = ask(core, "stop_project", {"project_id": "p1", "correlation_id": "corr-end"})
    (append,) = of(effects, fx.AppendThen)
    assert [e.correlation_id for e in append.events] == ["corr-end"]


def test_a_start_project_that_skipped_the_gateway_is_an_internal_error(tmp_path: Path) -> None:
    core, _ = make_core(tmp_path)
    (tmp_path / "r").mkdir()
    error = error_of(
        core.request(
            Call(op="start_project", args=StartProjectArgs(root=str(tmp_path / "r"))), "c", None
        )
    )
    assert (error["code"], error["details"]["reason"]) == (
        "internal_error",
        "missing_correlation_id",
    )
    assert core.projects == {}
