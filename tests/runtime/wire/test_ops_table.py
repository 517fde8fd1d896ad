"""The op table: each op's route, time limit, waiting rule and correlation, declared once."""

from __future__ import annotations

import re
import typing
from typing import Any

import msgspec
import pytest

from runtime.errors import BadRequestError, RoostError
from runtime.wire.dispatch import call_from_wire
from runtime.wire.host_link import HostRequest
from runtime.wire.op_args import ConversationArgs
from runtime.wire.ops import (
    GATEWAY_OPS,
    OP_TABLE,
    OPS,
    STREAM_OPS,
    Call,
    event_type_of,
    op_timeout_s,
    route_of,
    validate_args,
    waits_for_turn,
    with_ids,
)

CORRELATION = re.compile(r"^corr-[0-9a-f]{20}$")


@pytest.mark.parametrize(
    ("op", "route"),
    [
        ("ping", "gateway"),
        ("subscribe", "stream"),
        ("verify", "daemon"),
        ("start_project", "supervisor"),
        ("list_projects", "supervisor"),
        ("run_tool", "project"),
        ("live_status", "project"),
        ("send_event", "conversation"),
        ("approve", "conversation"),
    ],
)
def test_each_op_names_the_actor_that_serves_it(op: str, route: str) -> None:
    assert route_of(op) == route


def test_an_unknown_op_has_no_route() -> None:
    assert route_of("dance") is None


def test_the_gateway_and_stream_sets_are_read_from_the_table() -> None:
    assert {"ping", "status", "shutdown"} == GATEWAY_OPS
    assert {"subscribe"} == STREAM_OPS


def test_the_daemons_own_live_status_is_no_client_op() -> None:
    assert OP_TABLE["live_status"].client is False
    assert "live_status" not in OPS
    with pytest.raises(BadRequestError, match=r"^unknown operation 'live_status'; known"):
        validate_args("live_status", {"project_id": "p1"})


def test_the_event_ops_name_the_event_they_record() -> None:
    events = {op: event_type_of(op) for op in OPS if event_type_of(op)}
    assert events == {
        "cancel": "conversation.cancel",
        "resume": "conversation.resume",
        "approve": "tool.approved",
        "reject": "tool.rejected",
    }


def test_a_send_event_waiting_for_its_turn_gets_its_wait_and_no_more() -> None:
    args = {"event": {"type": "user.message"}, "wait": True, "wait_timeout_s": 30}
    assert op_timeout_s("send_event", args) == 30.0
    other = {**args, "event": {"type": "conversation.cancel"}}  # answered at commit
    assert op_timeout_s("send_event", other) == 90.0
    assert op_timeout_s("send_event", {**args, "wait": False}) == 60.0
    assert (op_timeout_s("verify", {}), op_timeout_s("incident_report", {})) == (3600.0, 300.0)


def _send(**args: object) -> Call[Any]:
    checked = validate_args("send_event", {"project_id": "p1", "conversation_id": "c1", **args})
    return with_ids("send_event", checked)


def test_only_a_waited_user_message_waits_for_its_turn() -> None:
    event = {"type": "user.message"}
    assert waits_for_turn(_send(event=event, wait=True)) is True
    assert waits_for_turn(_send(event=event, wait=False)) is False
    cancel = with_ids(
        "cancel", validate_args("cancel", {"project_id": "p", "conversation_id": "c"})
    )
    assert waits_for_turn(cancel) is False


def test_a_timeout_is_the_same_for_a_clients_dict_and_the_gateways_struct() -> None:
    call = _send(event={"type": "user.message"}, wait=True, wait_timeout_s=30)
    assert op_timeout_s("send_event", call.args) == 30.0


def test_the_gateway_mints_a_missing_correlation_id_where_the_op_records_one() -> None:
    call = _send(event={"type": "user.message", "correlation_id": None})
    assert CORRELATION.fullmatch(call.correlation())
    assert call.args.event.correlation_id == call.correlation_id  # written at its path too
    cancel = validate_args("cancel", {"project_id": "p", "conversation_id": "c"})
    assert CORRELATION.fullmatch(with_ids("cancel", cancel).correlation())


def test_a_correlation_id_and_idempotency_key_the_client_gave_are_kept() -> None:
    call = _send(
        event={"type": "user.message", "correlation_id": "corr-mine"}, idempotency_key="key-mine"
    )
    assert (call.correlation(), call.idempotency()) == ("corr-mine", "key-mine")
    assert call.args.event.correlation_id == "corr-mine"


def test_the_gateway_mints_a_missing_idempotency_key_for_send_event() -> None:
    call = _send(event={"type": "user.message", "correlation_id": "corr-mine"})
    assert call.idempotency() == call.args.idempotency_key
    assert re.fullmatch(r"^[0-9a-f-]{36}$", call.idempotency())
    again = _send(event={"type": "user.message", "correlation_id": "corr-mine"})
    assert again.idempotency() != call.idempotency()


def test_ops_whose_correlation_the_client_cannot_choose_always_get_one() -> None:
    for op, args in [
        ("start_conversation", {"project_id": "p1"}),
        ("stop_conversation", {"project_id": "p1", "conversation_id": "c1"}),
        ("run_tool", {"project_id": "p1", "request": {"name": "fs.read", "meta": {}}}),
    ]:
        assert CORRELATION.fullmatch(with_ids(op, validate_args(op, args)).correlation())


def test_ids_the_gateway_did_not_mint_are_an_internal_error_below_it() -> None:
    args = ConversationArgs(project_id="p1", conversation_id="c1")
    with pytest.raises(RoostError) as caught:
        Call(op="cancel", args=args).correlation()
    assert caught.value.code == "internal_error"
    assert caught.value.details["reason"] == "missing_correlation_id"
    with pytest.raises(RoostError) as caught:
        Call(op="send_event", args=args, correlation_id="corr-1").idempotency()
    assert caught.value.details["reason"] == "missing_idempotency_key"


def test_an_op_that_records_no_correlation_gets_no_ids() -> None:
    args = validate_args(
        "get_projection", {"project_id": "p1", "conversation_id": "c", "key": "timeline"}
    )
    call = with_ids("get_projection", args)
    assert (call.args, call.correlation_id, call.idempotency_key) == (args, None, None)


def test_a_call_from_a_host_link_frame_has_its_ops_struct_again() -> None:
    call = _send(event={"type": "user.message", "data": {"content": "hi"}}, wait=True)
    frame = msgspec.msgpack.encode(HostRequest(id=1, call=call))
    decoded = msgspec.msgpack.decode(frame, type=HostRequest).call
    assert isinstance(decoded.args, dict)
    assert call_from_wire(decoded) == call


def test_every_id_a_client_may_choose_is_a_field_of_its_ops_struct() -> None:
    for name, op in OP_TABLE.items():
        for _, path in op.ids:
            holder: Any = op.args
            for field in path:
                fields = {f.name: f.type for f in msgspec.structs.fields(holder)}
                assert field in fields, f"{name}: {'.'.join(path)}"
                holder = (
                    next(
                        (
                            t
                            for t in typing.get_args(fields[field]) or (fields[field],)
                            if isinstance(t, type) and issubclass(t, msgspec.Struct)
                        ),
                        None,
                    )
                    or holder
                )
