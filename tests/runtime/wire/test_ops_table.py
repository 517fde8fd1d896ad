"""The op table: each op's route, time limit, waiting rule and correlation, declared once."""

from __future__ import annotations

import re

import pytest

from runtime.errors import BadRequestError, RoostError
from runtime.wire.ops import (
    GATEWAY_OPS,
    OP_TABLE,
    OPS,
    STREAM_OPS,
    event_type_of,
    minted_correlation,
    minted_idempotency_key,
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


def test_only_a_waited_user_message_waits_for_its_turn() -> None:
    args = {"event": {"type": "user.message"}, "wait": True}
    assert waits_for_turn("send_event", args) is True
    assert waits_for_turn("send_event", {**args, "wait": False}) is False
    assert waits_for_turn("cancel", args) is False


def test_the_gateway_mints_a_missing_correlation_id_where_the_op_records_one() -> None:
    args = {"conversation_id": "c1", "event": {"type": "user.message", "correlation_id": None}}
    minted = with_ids("send_event", args)
    assert CORRELATION.fullmatch(minted["event"]["correlation_id"])
    assert args["event"]["correlation_id"] is None  # the caller's dict is left alone
    assert CORRELATION.fullmatch(with_ids("cancel", {"correlation_id": ""})["correlation_id"])


def test_a_correlation_id_and_idempotency_key_the_client_gave_are_kept() -> None:
    args = {
        "event": {"type": "user.message", "correlation_id": "corr-mine"},
        "idempotency_key": "key-mine",
    }
    assert with_ids("send_event", args) == args


def test_the_gateway_mints_a_missing_idempotency_key_for_send_event() -> None:
    args = {"event": {"type": "user.message", "correlation_id": "corr-mine"}}
    minted = with_ids("send_event", args)
    assert minted["event"] == args["event"]
    assert minted_idempotency_key("send_event", minted) == minted["idempotency_key"]
    assert minted["idempotency_key"] != with_ids("send_event", args)["idempotency_key"]
    assert "idempotency_key" not in args


def test_ops_whose_correlation_the_client_cannot_choose_always_get_one() -> None:
    for op, args in [
        ("start_conversation", {"project_id": "p1"}),
        ("stop_conversation", {"project_id": "p1", "conversation_id": "c1"}),
        ("run_tool", {"project_id": "p1", "request": {"name": "fs.read", "meta": {}}}),
    ]:
        assert CORRELATION.fullmatch(minted_correlation(op, with_ids(op, args)))


def test_ids_the_gateway_did_not_mint_are_an_internal_error_below_it() -> None:
    with pytest.raises(RoostError) as caught:
        minted_correlation("cancel", {"project_id": "p1", "conversation_id": "c1"})
    assert caught.value.code == "internal_error"
    assert caught.value.details["reason"] == "missing_correlation_id"
    with pytest.raises(RoostError) as caught:
        minted_idempotency_key("send_event", {"event": {"correlation_id": "corr-1"}})
    assert caught.value.details["reason"] == "missing_idempotency_key"


def test_an_op_that_records_no_correlation_is_left_unchanged() -> None:
    args = {"project_id": "p1", "key": "timeline"}
    assert with_ids("get_projection", args) is args
