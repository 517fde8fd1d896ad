"""The requests a conversation serves, on its core alone (no actor system).

What the Conversation actor used to decide itself is the core's now: which op becomes
which event, a stop, a projection, a ``run_tool`` naming the conversation, a new
conversation's start, the commit's acknowledgement, and whether the loop is busy. The ids
come from the gateway: a request without them is an internal error, never given new ones.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import msgspec
import pytest

from events import catalog as ev
from events.envelope import Envelope, NewEvent
from runtime.agent.core import ConversationCore
from runtime.agent.effects import Answer, AppendBatch, RunDirectForConversation
from runtime.errors import BadRequestError, RoostError
from runtime.policy.options import validate_options
from runtime.wire.op_args import SendEventArgs
from runtime.wire.ops import OP_TABLE, Call
from tests.runtime.calls import call_of


def send_args(event: dict[str, Any]) -> SendEventArgs:
    """``send_event``'s arguments for ``event`` in conversation ``c1`` (no ids minted)."""
    return msgspec.convert(
        {"project_id": "p1", "conversation_id": "c1", "event": event}, SendEventArgs
    )


CLIENT = "client-address"
NOW = datetime(2026, 11, 22, 10, 0, 0, tzinfo=UTC)


def make_core(**options: Any) -> ConversationCore:
    return ConversationCore(
        project_id="p1",
        conversation_id="c1",
        options=validate_options(options),
        clock=lambda: NOW,
    )


def commit(events: list[NewEvent], first_seq: int = 1) -> list[Envelope]:
    return [
        Envelope(
            seq=first_seq + i,
            stream_version=first_seq + i,
            hash="h",
            prev_hash="p",
            **msgspec.structs.asdict(e),
        )
        for i, e in enumerate(events)
    ]


def gateway(op: str, **args: Any) -> Call[Any]:
    """The request as the gateway forwards it: ids minted where the client gave none."""
    return call_of(op, args)


def test_send_event_appends_the_event_under_the_gateways_ids() -> None:
    core = make_core(orchestration=False)
    event = {"type": "user.message", "data": {"content": "hi"}, "correlation_id": "corr-a"}
    args = gateway("send_event", event=event, idempotency_key="k-1")
    (append,) = core.request(args, CLIENT)
    assert isinstance(append, AppendBatch)
    assert append.key == "p1/c1/k-1"  # scoped to the conversation
    assert append.ack_to == CLIENT
    assert [(e.type, e.correlation_id) for e in append.events] == [("user.message", "corr-a")]


def test_send_event_without_the_gateways_idempotency_key_is_an_internal_error() -> None:
    core = make_core()
    event = {"type": "user.message", "data": {"content": "hi"}, "correlation_id": "corr-a"}
    with pytest.raises(RoostError) as caught:
        core.request(Call(op="send_event", args=send_args(event), correlation_id="corr-a"), CLIENT)
    assert caught.value.code == "internal_error"
    assert caught.value.details["reason"] == "missing_idempotency_key"


@pytest.mark.parametrize("op", ["cancel", "resume", "stop_conversation"])
def test_an_op_without_the_gateways_correlation_id_is_an_internal_error(op: str) -> None:
    core = make_core()
    with pytest.raises(RoostError) as caught:
        args = msgspec.convert({"project_id": "p1", "conversation_id": "c1"}, OP_TABLE[op].args)
        core.request(Call(op=op, args=args), CLIENT)
    assert caught.value.code == "internal_error"
    assert caught.value.details["reason"] == "missing_correlation_id"


def test_an_inbound_event_without_a_correlation_id_is_an_internal_error() -> None:
    with pytest.raises(RoostError) as caught:
        make_core().inbound({"type": "user.message", "data": {"content": "hi"}}, CLIENT)
    assert not isinstance(caught.value, BadRequestError)
    assert caught.value.details["reason"] == "missing_correlation_id"


def test_cancel_with_a_reason_records_conversation_cancel_under_its_correlation() -> None:
    core = make_core()
    args = gateway("cancel", correlation_id="corr-c", reason="enough")
    (append,) = core.request(args, CLIENT)
    assert isinstance(append, AppendBatch)
    (event,) = append.events
    assert (event.type, event.data, event.correlation_id) == (
        "conversation.cancel",
        {"reason": "enough"},
        "corr-c",
    )


def test_stop_conversation_records_the_stop_then_answers() -> None:
    core = make_core()
    args = gateway("stop_conversation")
    append, answer = core.request(args, CLIENT)
    assert isinstance(append, AppendBatch)
    assert [e.type for e in append.events] == ["conversation.stopped"]
    assert append.events[0].correlation_id == args.correlation_id
    assert answer == Answer(to=CLIENT, result={"conversation_id": "c1", "stopped": True})


def test_get_projection_answers_at_once() -> None:
    core = make_core()
    args = gateway("get_projection", key="llm_context")
    (answer,) = core.request(args, CLIENT)
    assert answer == Answer(to=CLIENT, result=[])


def test_the_timeline_is_not_kept_by_the_live_conversation() -> None:
    core = make_core()
    with pytest.raises(BadRequestError, match="read from the journal"):
        core.request(gateway("get_projection", key="timeline"), CLIENT)


def test_run_tool_naming_the_conversation_goes_to_the_runner() -> None:
    core = make_core()
    request = {"name": "fs.read", "args": {}, "meta": {"conversation_id": "c1"}}
    args = gateway("run_tool", request=request)
    (effect,) = core.request(args, CLIENT)
    assert effect == RunDirectForConversation(request=args.args.request, reply_to=CLIENT)
    assert effect.request.meta.correlation_id == args.correlation()


def test_an_op_that_does_not_apply_to_a_conversation_is_a_bad_request() -> None:
    with pytest.raises(BadRequestError, match="does not apply to a conversation"):
        make_core().request(call_of("list_tools"), CLIENT)


def test_a_new_conversation_records_its_start_under_the_requests_correlation() -> None:
    core = make_core()
    append, answer = core.started("corr-s", CLIENT)
    assert isinstance(append, AppendBatch)
    assert [(e.type, e.correlation_id) for e in append.events] == [
        ("conversation.started", "corr-s")
    ]
    assert answer == Answer(to=CLIENT, result="c1")
    with pytest.raises(RoostError, match="without the correlation id"):
        core.started(None, CLIENT)


def test_a_direct_run_is_recorded_then_answered() -> None:
    core = make_core()
    payloads: list[ev.Event] = [ev.ToolRequested(call_id="call-1", name="fs.read", args={})]
    append, answer = core.direct_done(payloads, {"status": "ok"}, "corr-d", CLIENT)
    assert isinstance(append, AppendBatch)
    assert [(e.type, e.correlation_id) for e in append.events] == [("tool.requested", "corr-d")]
    assert answer == Answer(to=CLIENT, result={"status": "ok"})


def test_a_commit_acknowledges_its_first_event_to_the_client() -> None:
    core = make_core(orchestration=False)
    event = {"type": "user.message", "data": {"content": "hi"}, "correlation_id": "corr-a"}
    (append,) = core.request(gateway("send_event", event=event), CLIENT)
    assert isinstance(append, AppendBatch)
    envelopes = commit(append.events, first_seq=7)
    effects = core.acknowledged(append, envelopes)
    ack = {"seq": 7, "event_id": envelopes[0].event_id, "correlation_id": "corr-a"}
    assert effects[0] == Answer(to=CLIENT, result=ack)
    assert core.last_seq == envelopes[-1].seq


def test_busy_while_a_client_waits_for_its_turn() -> None:
    core = make_core()
    assert core.busy() is False
    event = {"type": "user.message", "data": {"content": "hi"}}
    args = gateway("send_event", event=event, wait=True)
    (append, *_rest) = core.request(args, CLIENT)
    assert isinstance(append, AppendBatch)
    assert append.ack_to is None  # answered at the end of the turn instead
    assert core.busy() is True


def test_a_rehydrated_conversation_answers_the_waiters_of_the_one_that_died() -> None:
    first = make_core()
    event = {"type": "user.message", "data": {"content": "hi"}}
    args = gateway("send_event", event=event, wait=True)
    (append, *_rest) = first.request(args, "old-client")
    assert isinstance(append, AppendBatch)
    committed = commit(append.events)
    correlation = args.correlation()
    fresh = make_core()
    effects = fresh.rehydrate(committed, [(correlation, "waiting-client")], recovering=True)
    assert fresh.waiters == {correlation: ["waiting-client"]}
    assert fresh.busy() is True
    assert effects  # the turn goes on: the model is asked again
