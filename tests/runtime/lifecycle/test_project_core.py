"""The Project's core without an actor system: start, routing, waiters, restarts."""

from __future__ import annotations

from typing import Any

import pytest

from runtime.errors import RoostError
from runtime.lifecycle import effects as fx
from runtime.lifecycle.project_core import ProjectCore
from runtime.wire.op_args import NoArgs, StartConversationArgs
from runtime.wire.ops import Call
from tests.runtime.calls import call_of
from tests.runtime.lifecycle.helpers import NOW, Clock, appended, envelope, error_of, ids, of

SUMMARY = {"generation": 2, "counts": {"skills": 1}, "errors": []}


def make_core(
    *, restore: bool = False, dead: set[int] | None = None, **options: Any
) -> tuple[ProjectCore, Clock]:
    clock = Clock()
    core = ProjectCore(
        project_id="p1",
        options=dict(options),
        restore=restore,
        reply_to="starter",
        list_tools=lambda source: [{"name": "fs.read", "source": source}],
        is_dead=lambda pid: pid in (dead or set()),
        clock=lambda: NOW,
        monotonic=clock,
        new_id=ids(),
        pid=7,
        correlation_id="corr-start",
    )
    return core, clock


def run(core: ProjectCore, effects: list[fx.Effect]) -> list[fx.Effect]:
    """Give every spawned child an address, as the shell does."""
    for spawn in of(effects, fx.Spawn):
        core.spawned(spawn.name, f"addr-{spawn.name}")
    return effects


def ready(core: ProjectCore, *known: str) -> None:
    run(core, core.start("/root", SUMMARY, ["bwrap"]))
    events = [envelope("conversation.started", "p1", {}, c) for c in known]
    core.restored(events)


def ask(core: ProjectCore, op: str, reply_to: str = "client", **args: Any) -> list[fx.Effect]:
    return run(core, core.request(call_of(op, args), reply_to, f"{op}-request"))


def waiting_send(conversation_id: str, correlation: str, timeout: float) -> dict[str, Any]:
    event = {"type": "user.message", "correlation_id": correlation}
    return {
        "conversation_id": conversation_id,
        "event": event,
        "wait": True,
        "wait_timeout_s": timeout,
    }


def test_a_new_project_starts_its_children_and_records_its_start() -> None:
    core, _ = make_core()
    effects = core.start("/root", SUMMARY, ["bwrap"])
    assert effects[:2] == [fx.Spawn(name="policy"), fx.Spawn(name="toolrunner")]
    assert appended(effects) == [
        ("project.started", {"root": "/root", "options": {}, "sandbox_layers": ["bwrap"]}),
        ("project.assets_loaded", {"generation": 2, "counts": {"skills": 1}, "errors": []}),
    ]
    (append,) = of(effects, fx.AppendThen)
    assert append.events[1].causation_id == append.events[0].event_id


def test_a_recorded_start_reads_the_projects_conversations_before_answering() -> None:
    core, _ = make_core()
    (append,) = of(core.start("/root", SUMMARY, []), fx.AppendThen)
    assert append.then is not None
    assert append.then(None) == [fx.ReadHistory()]
    effects = core.restored([envelope("conversation.started", "p1", {}, "c1")])
    assert effects == [fx.Answer(to="starter", ok=True, result="p1")]
    assert core.known == {"c1"}


def test_a_start_the_journal_refuses_answers_its_error_and_has_the_supervisor_forget_it() -> None:
    core, _ = make_core()
    (append,) = of(core.start("/root", SUMMARY, []), fx.AppendThen)
    assert append.then is not None
    ask(core, "list_tools")  # waits for the start
    error = {"code": "journal_error", "message": "disk full", "details": {}}
    assert append.then(error) == [
        fx.EscalateChild(child="start", error=error),
        fx.Answer(to="starter", ok=False, error=error),
        fx.Answer(to="client", ok=False, error=error),
    ]


def test_a_conversation_whose_start_was_not_recorded_is_forgotten_not_restarted() -> None:
    core, _ = make_core()
    ready(core)
    ask(core, "start_conversation", conversation_id="c2", correlation_id="corr-c")
    address = core.live["c2"]
    assert core.failed("c2", unrecorded=True) == [fx.Stop(to=address)]
    assert "c2" not in core.known
    error = error_of(ask(core, "cancel", conversation_id="c2"))
    assert error["code"] == "conversation_not_found"


def test_a_restored_project_reads_its_events_and_records_no_start() -> None:
    core, _ = make_core(restore=True)
    effects = core.start("/root", SUMMARY, None)
    assert effects == [fx.Spawn(name="policy"), fx.Spawn(name="toolrunner"), fx.ReadHistory()]
    assert core.restored([]) == []


def test_requests_before_the_start_is_read_wait_and_are_served_after_it() -> None:
    core, _ = make_core(restore=True)
    run(core, core.start("/root", SUMMARY, None))
    assert ask(core, "list_tools") == []
    effects = core.restored([])
    listed = [{"name": "fs.read", "source": None}]
    assert effects == [fx.Answer(to="client", ok=True, result=listed)]


def test_list_tools_passes_the_callers_source_on() -> None:
    core, _ = make_core()
    ready(core)
    listed = [{"name": "fs.read", "source": "mcp"}]
    assert ask(core, "list_tools", source="mcp") == [fx.Answer(to="client", ok=True, result=listed)]


def test_start_conversation_spawns_a_new_conversation() -> None:
    core, _ = make_core()
    ready(core)
    effects = ask(core, "start_conversation", conversation_id="c1", correlation_id="corr-s")
    spawn = fx.Spawn(name="conversation:c1", new=True, reply_to="client", correlation_id="corr-s")
    assert effects == [spawn]
    assert core.address("conversation:c1") == "addr-conversation:c1"


def test_a_stopped_conversation_started_again_reads_its_history_first() -> None:
    core, _ = make_core()
    ready(core, "c1")
    ask(core, "stop_conversation", conversation_id="c1")
    effects = ask(core, "start_conversation", conversation_id="c1", correlation_id="corr-r")
    spawn = fx.Spawn(
        name="conversation:c1", new=True, history=True, reply_to="client", correlation_id="corr-r"
    )
    # the stopped incarnation, still live until it passivates, goes first: one at a time
    assert effects == [fx.Stop(to="addr-conversation:c1"), spawn]
    core.spawned("conversation:c1", "addr-2")
    # its idle offer stops it alone; the new incarnation's own offer passivates that one
    assert core.idle("c1", handled=2, sender="addr-conversation:c1") == [
        fx.Stop(to="addr-conversation:c1")
    ]
    assert core.address("conversation:c1") == "addr-2"
    assert core.idle("c1", handled=0, sender="addr-2") == [fx.Stop(to="addr-2")]
    assert core.child_exited("addr-conversation:c1") == []  # stopped on purpose


def test_a_start_conversation_without_the_gateways_correlation_is_an_internal_error() -> None:
    core, _ = make_core()
    ready(core)
    args = StartConversationArgs(project_id="p1", conversation_id="c1")
    error = error_of(core.request(Call(op="start_conversation", args=args), "client", "m"))
    assert (error["code"], error["details"]["reason"]) == (
        "internal_error",
        "missing_correlation_id",
    )
    assert core.live == {}


def test_starting_a_conversation_that_exists_is_conversation_already_started() -> None:
    core, _ = make_core()
    ready(core, "c1")
    error = error_of(ask(core, "start_conversation", conversation_id="c1", correlation_id="x"))
    assert error["code"] == "conversation_already_started"


def test_a_request_for_a_passivated_conversation_starts_it_again_then_passes_it_on() -> None:
    core, _ = make_core()
    ready(core, "c1")
    effects = ask(core, "get_projection", conversation_id="c1", key="diagnostics")
    assert effects == [
        fx.Spawn(name="conversation:c1"),
        fx.Send(to=fx.Child("conversation:c1"), message="get_projection-request"),
    ]


def test_two_waiting_requests_for_one_passivated_conversation_start_it_once() -> None:
    core, _ = make_core(restore=True)
    run(core, core.start("/root", SUMMARY, None))
    core.request(call_of("cancel"), "a", "first")
    core.request(call_of("cancel"), "b", "second")
    effects = core.restored([envelope("conversation.started", "p1", {}, "c1")])
    assert len(of(effects, fx.Spawn)) == 1
    assert [s.message for s in of(effects, fx.Send)] == ["first", "second"]


def test_a_request_for_an_unknown_conversation_is_conversation_not_found() -> None:
    core, _ = make_core()
    ready(core)
    error = error_of(ask(core, "cancel", conversation_id="c9"))
    assert error == {
        "code": "conversation_not_found",
        "message": (
            "no conversation c9 in project p1; start it with `roost conversation start p1 --id c9`"
        ),
        "details": {"project_id": "p1", "conversation_id": "c9"},
    }


def test_a_stopped_conversation_is_not_found_with_reason_stopped() -> None:
    core, _ = make_core()
    ready(core, "c1")
    ask(core, "stop_conversation", conversation_id="c1")
    error = error_of(ask(core, "cancel", conversation_id="c1"))
    assert (error["code"], error["details"]["reason"]) == ("conversation_not_found", "stopped")
    assert core.child_exited("addr-conversation:c1") == []


def test_run_tool_without_a_conversation_goes_straight_to_the_tool_runner() -> None:
    core, _ = make_core()
    ready(core)
    call = call_of("run_tool", request={"name": "fs.read", "args": {}, "meta": {}})
    assert run(core, core.request(call, "client", "m")) == [
        fx.RunDirectForProject(request=call.args.request, reply_to="client")
    ]


def test_run_tool_naming_a_conversation_goes_to_that_conversation() -> None:
    core, _ = make_core()
    ready(core, "c1")
    request = {"name": "fs.read", "args": {}, "meta": {"conversation_id": "c1"}}
    effects = ask(core, "run_tool", request=request)
    assert of(effects, fx.Send) == [
        fx.Send(to=fx.Child("conversation:c1"), message="run_tool-request")
    ]


def test_an_op_that_does_not_apply_to_a_project_is_a_bad_request() -> None:
    core, _ = make_core()
    ready(core)
    error = error_of(core.request(Call(op="start_project", args=NoArgs()), "client", "m"))
    assert (error["code"], error["details"]) == ("bad_request", {"reason": "unknown_op"})


def test_live_status_lists_conversations_and_the_pids_of_running_ones() -> None:
    core, _ = make_core()
    ready(core, "c1", "c2")
    ask(core, "cancel", conversation_id="c1")
    core.actor_started("conversation:c1", 11)
    core.actor_started("conversation:c2", 12)
    (reply,) = ask(core, "live_status")
    assert isinstance(reply, fx.Answer)
    assert reply.result == {
        "conversations": ["c1", "c2"],
        "active_conversations": ["c1"],
        "health": {"status": "ok"},
        "pids": {"conversation:c1": 11, "project": 7},
    }


def test_an_idle_conversation_is_stopped_when_nothing_reached_it_since() -> None:
    core, _ = make_core()
    ready(core, "c1")
    ask(core, "cancel", conversation_id="c1")
    assert core.idle("c1", handled=0, sender="addr-conversation:c1") == []
    assert core.idle("c1", handled=1, sender="addr-conversation:c1") == [
        fx.Stop(to="addr-conversation:c1")
    ]
    assert core.child_exited("addr-conversation:c1") == []
    assert core.live == {}


def test_a_crashed_conversation_holds_requests_until_it_is_restarted() -> None:
    core, _ = make_core()
    ready(core, "c1")
    ask(core, "cancel", conversation_id="c1")
    effects = core.child_exited("addr-conversation:c1")
    crash = {"actor": "conversation:c1", "reason": "process exited", "restart_count": 1}
    assert appended(effects) == [("actor.crashed", crash)]
    assert ask(core, "cancel", conversation_id="c1") == []
    (wakeup,) = of(effects, fx.Wakeup)
    woken = core.wakeup(wakeup.payload)
    assert of(woken, fx.Send) == []  # the held requests wait for actor.restarted's commit
    again = run(core, woken)
    assert of(again, fx.Spawn) == [fx.Spawn(name="conversation:c1", recovering=True)]
    assert [t for t, _ in appended(again)] == ["actor.restarted"]
    (commit,) = of(again, fx.AppendThen)
    assert commit.then is not None
    sent = of(commit.then(None), fx.Send)
    assert sent == [fx.Send(to=fx.Child("conversation:c1"), message="cancel-request")]


def test_a_conversation_the_journal_refused_restarts_at_once_and_never_escalates() -> None:
    core, _ = make_core()
    ready(core, "c1")
    ask(core, "cancel", conversation_id="c1")  # wakes it
    for _ in range(10):  # far past max_restarts
        address = core.live["c1"]
        assert core.failed("c1", code="journal_error") == [fx.Stop(to=address)]
        effects = run(core, core.child_exited(address))
        assert of(effects, fx.Spawn) == [fx.Spawn(name="conversation:c1", recovering=True)]
        assert of(effects, fx.EscalateChild) == [] and of(effects, fx.Wakeup) == []
        assert [t for t, _ in appended(effects)] == ["actor.restarted"]
    core.failed("c1", code="journal_conflict")  # another writer: a crash as before
    assert of(core.child_exited(core.live["c1"]), fx.Wakeup) != []


def test_a_restarted_conversation_answers_the_clients_whose_wait_has_not_expired() -> None:
    core, clock = make_core()
    ready(core, "c1")
    run(core, core.request(call_of("send_event", waiting_send("c1", "corr-a", 5.0)), "a", "m1"))
    run(core, core.request(call_of("send_event", waiting_send("c1", "corr-b", 60.0)), "b", "m2"))
    clock.now += 10
    (wakeup,) = of(core.child_exited("addr-conversation:c1"), fx.Wakeup)
    (spawn,) = of(core.wakeup(wakeup.payload), fx.Spawn)
    assert spawn.waiters == [("corr-b", "b")]


def test_a_conversation_found_dead_while_forwarding_counts_as_a_crash() -> None:
    core, _ = make_core(dead={11})
    ready(core, "c1")
    ask(core, "cancel", conversation_id="c1")
    core.actor_started("conversation:c1", 11)
    effects = ask(core, "cancel", conversation_id="c1")
    assert [t for t, _ in appended(effects)] == ["actor.crashed"]
    assert of(effects, fx.Send) == []
    ((held, to, message),) = core.held["c1"]
    assert (held.op, held.args.conversation_id, to, message) == (
        "cancel",
        "c1",
        "client",
        "cancel-request",
    )


def test_a_crashed_tool_runner_is_restarted_and_the_conversations_told() -> None:
    core, _ = make_core()
    ready(core)
    (wakeup,) = of(core.child_exited("addr-toolrunner"), fx.Wakeup)
    again = core.wakeup(wakeup.payload)
    assert again[:2] == [
        fx.Spawn(name="toolrunner"),
        fx.PeerChanged(peer="toolrunner", lost="the tool runner exited"),
    ]


def test_a_child_crashing_beyond_the_intensity_escalates_to_the_supervisor() -> None:
    core, _ = make_core(max_restarts=1, restart_period_ms=1000)
    ready(core)
    core.child_exited("addr-policy")
    effects = core.child_exited("addr-policy")
    assert appended(effects)[1] == (
        "actor.escalated",
        {"actor": "policy", "reason": "more than 1 restarts within 1000 ms", "restart_count": 2},
    )
    assert of(effects, fx.EscalateChild) == [fx.EscalateChild(child="policy")]
    assert of(effects, fx.Wakeup) == []


def test_a_lost_journal_read_is_asked_again_when_the_journal_returns() -> None:
    core, _ = make_core(restore=True)
    run(core, core.start("/root", SUMMARY, None))
    assert core.journal_changed() == [fx.PeerChanged(peer="journal"), fx.ReadHistory()]
    core.restored([])
    assert core.journal_changed() == [fx.PeerChanged(peer="journal")]


def test_nothing_is_restarted_once_the_project_stops() -> None:
    core, _ = make_core()
    ready(core, "c1")
    core.exit()
    assert core.child_exited("addr-toolrunner") == []
    assert core.wakeup({"child": "toolrunner"}) == []


def test_an_unexpected_failure_is_answered_as_internal_error() -> None:
    def broken(source: str | None) -> list[dict[str, Any]]:
        raise RuntimeError("registry unreadable")

    core, _ = make_core()
    core.list_tools = broken
    ready(core)
    assert error_of(ask(core, "list_tools")) == {
        "code": "internal_error",
        "message": "RuntimeError: registry unreadable",
        "details": {},
    }


def test_a_refused_forward_does_not_keep_the_conversation_from_passivating() -> None:
    core, _ = make_core()
    ready(core, "c1")
    ask(core, "cancel", conversation_id="c1")  # spawns c1, forwards one request
    (send,) = of(ask(core, "resume", conversation_id="c1"), fx.Send)
    assert core.send_refused(send) == []  # the mailbox was full: it never got there
    assert core.idle("c1", handled=1, sender="addr-conversation:c1") == [
        fx.Stop(to="addr-conversation:c1")
    ]


def test_a_refused_stop_leaves_the_conversation_existing() -> None:
    core, _ = make_core()
    ready(core, "c1")
    ask(core, "cancel", conversation_id="c1")

    class Stop:
        op = "stop_conversation"

    (send,) = of(
        run(core, core.request(call_of("stop_conversation"), "client", Stop())),
        fx.Send,
    )
    core.send_refused(send)
    assert "c1" in core.known
    assert of(ask(core, "cancel", conversation_id="c1"), fx.Send)


def test_a_new_project_records_its_start_under_the_start_requests_correlation() -> None:
    core, _ = make_core()
    (append,) = of(core.start("/root", SUMMARY, []), fx.AppendThen)
    assert {e.correlation_id for e in append.events} == {"corr-start"}


def test_a_new_project_without_the_gateways_correlation_is_refused() -> None:
    core = ProjectCore(project_id="p1", options={}, restore=False, reply_to="starter")
    with pytest.raises(RoostError, match="without the correlation id"):
        core.start("/root", SUMMARY, [])
    restored = ProjectCore(project_id="p1", options={}, restore=True)
    assert of(restored.start("/root", SUMMARY, None), fx.ReadHistory) == [fx.ReadHistory()]


def test_an_error_reply_carries_the_errors_wire_shape() -> None:
    assert fx.error_reply("c", RoostError("gone", reason="x")) == fx.Answer(
        to="c",
        ok=False,
        error={"code": "internal_error", "message": "gone", "details": {"reason": "x"}},
    )
    plain = fx.error_reply("c", ValueError("boom"))
    assert plain.error == {"code": "internal_error", "message": "ValueError: boom", "details": {}}


def test_check_protocol_allows_a_protocol_the_allowlist_names_and_records_nothing() -> None:
    core, _ = make_core(protocol_allowlist=["a2a", "mcp"])
    ready(core)
    args = {"protocol": "a2a", "operation": "POST /", "correlation_id": "corr-1"}
    effects = ask(core, "check_protocol", **args)
    assert effects == [fx.Answer(to="client", ok=True, result={"protocol": "a2a", "allowed": True})]


def test_check_protocol_records_security_protocol_denied_before_answering_a_refusal() -> None:
    core, _ = make_core(protocol_allowlist=["mcp"])
    ready(core)
    args = {"protocol": "a2a", "operation": "POST /", "correlation_id": "corr-1"}
    effects = ask(core, "check_protocol", **args)
    assert appended(effects) == [
        ("security.protocol_denied", {"protocol": "a2a", "operation": "POST /"})
    ]
    (append,) = of(effects, fx.AppendThen)
    assert append.events[0].correlation_id == "corr-1"
    assert append.events[0].conversation_id is None
    assert append.then is not None
    refused = {"protocol": "a2a", "allowed": False}
    assert append.then(None) == [fx.Answer(to="client", ok=True, result=refused)]
    error = {"code": "journal_error", "message": "disk full", "details": {}}
    assert append.then(error) == [fx.Answer(to="client", ok=False, error=error)]


def test_describe_project_answers_what_the_shell_read() -> None:
    core = ProjectCore(
        project_id="p1",
        options={},
        restore=True,
        describe=lambda: {"description": "Hello.", "source": "README.md"},
    )
    run(core, core.start("/root", SUMMARY, None))
    core.restored([])
    described = {"project_id": "p1", "description": "Hello.", "source": "README.md"}
    assert ask(core, "describe_project") == [fx.Answer(to="client", ok=True, result=described)]
