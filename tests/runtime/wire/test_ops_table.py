"""The op table: each op's route, time limit, waiting rule and correlation, declared once."""

from __future__ import annotations

import re

import pytest

from runtime.errors import BadRequestError
from runtime.wire.ops import (
    GATEWAY_OPS,
    OP_TABLE,
    OPS,
    STREAM_OPS,
    event_type_of,
    op_timeout_s,
    route_of,
    validate_args,
    waits_for_turn,
    with_correlation,
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


def test_a_waiting_send_event_gets_its_wait_on_top_of_the_default_time() -> None:
    args = {"event": {"type": "user.message"}, "wait": True, "wait_timeout_s": 30}
    assert op_timeout_s("send_event", args) == 90.0
    assert op_timeout_s("send_event", {**args, "wait": False}) == 60.0
    assert (op_timeout_s("verify", {}), op_timeout_s("incident_report", {})) == (3600.0, 300.0)


def test_only_a_waited_user_message_waits_for_its_turn() -> None:
    args = {"event": {"type": "user.message"}, "wait": True}
    assert waits_for_turn("send_event", args) is True
    assert waits_for_turn("send_event", {**args, "wait": False}) is False
    assert waits_for_turn("cancel", args) is False


def test_the_gateway_mints_a_missing_correlation_id_where_the_op_records_one() -> None:
    args = {"conversation_id": "c1", "event": {"type": "user.message", "correlation_id": None}}
    minted = with_correlation("send_event", args)
    assert CORRELATION.fullmatch(minted["event"]["correlation_id"])
    assert args["event"]["correlation_id"] is None  # the caller's dict is left alone
    assert CORRELATION.fullmatch(
        with_correlation("cancel", {"correlation_id": ""})["correlation_id"]
    )


def test_a_correlation_id_the_client_gave_is_kept() -> None:
    args = {"event": {"type": "user.message", "correlation_id": "corr-mine"}}
    assert with_correlation("send_event", args) == args


def test_an_op_that_records_no_correlation_is_left_unchanged() -> None:
    args = {"project_id": "p1", "key": "timeline"}
    assert with_correlation("get_projection", args) is args
