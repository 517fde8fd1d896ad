"""Frames, request decoding, op argument checks and event normalization."""

from __future__ import annotations

import os
import socket
import struct
from collections.abc import Iterator

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.errors import BadRequestError
from runtime.wire.op_args import RunToolArgs
from runtime.wire.ops import OPS, STREAM_OPS, normalize_event, op_timeout_s, validate_args
from runtime.wire.protocol import (
    MAX_DEPTH,
    DuplicateKeyError,
    FrameTooLargeError,
    IntegerOutOfRangeError,
    MalformedFrameError,
    TooDeeplyNestedError,
    TruncatedFrameError,
    decode_request,
    decode_server_frame,
    encode_end,
    encode_error,
    encode_frame,
    encode_reply,
    encode_request,
    encode_stream_event,
    read_frame,
)
from runtime.wire.transport import bind_unix_socket, connect_unix_socket


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    a.settimeout(5)
    b.settimeout(5)
    yield a, b
    a.close()
    b.close()


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=100)
@given(value=json_values)
def test_a_frame_round_trips_any_json_value(value: object) -> None:
    a, b = socket.socketpair()
    with a, b:
        a.sendall(encode_frame(value))
        body = read_frame(b, 1 << 20)
    assert body is not None
    assert msgspec.json.decode(body) == value


def test_a_frame_is_a_big_endian_length_then_the_json_body() -> None:
    assert encode_frame({"a": 1}) == b"\x00\x00\x00\x07" + b'{"a":1}'


def test_read_frame_returns_none_when_the_peer_closes_between_frames(pair) -> None:
    a, b = pair
    a.close()
    assert read_frame(b, 1024) is None


def test_an_oversized_frame_is_refused_before_its_body_is_read(pair) -> None:
    a, b = pair
    a.sendall(struct.pack(">I", 1025))  # no body follows: reading it would time out
    with pytest.raises(FrameTooLargeError) as info:
        read_frame(b, 1024)
    assert info.value.code == "bad_request"
    assert info.value.details == {"reason": "frame_too_large", "size": 1025, "max": 1024}


def test_a_frame_cut_in_its_header_is_truncated(pair) -> None:
    a, b = pair
    a.sendall(b"\x00\x00")
    a.close()
    with pytest.raises(TruncatedFrameError, match=r"^connection closed after 2 of 4 bytes$"):
        read_frame(b, 1024)


def test_a_frame_cut_in_its_body_is_truncated(pair) -> None:
    a, b = pair
    a.sendall(struct.pack(">I", 10) + b"abc")
    a.close()
    with pytest.raises(TruncatedFrameError, match=r"^connection closed after 3 of 10 bytes$"):
        read_frame(b, 1024)


def test_a_request_decodes_with_its_id_op_and_args() -> None:
    body = encode_request(7, "list_projects", {"x": 1})[4:]
    request = decode_request(body)
    assert (request.id, request.op, request.args) == (7, "list_projects", {"x": 1})


def test_a_request_without_args_gets_an_empty_dict() -> None:
    assert decode_request(b'{"id": 1, "op": "ping"}').args == {}


@pytest.mark.parametrize(
    ("body", "problem", "request_id"),
    [
        (b"{nope", None, 0),
        (b"[1, 2]", "expected an object, got list", 0),
        (b'{"op": "ping"}', "'id' must be a non-negative integer", 0),
        (b'{"id": true, "op": "ping"}', "'id' must be a non-negative integer", 0),
        (b'{"id": 3, "op": 5}', "'op' must be a string", 3),
        (b'{"id": 3, "op": "ping", "args": []}', "'args' must be an object", 3),
        (b'{"id": 3, "op": "ping", "extra": 1}', "unexpected keys ['extra']", 3),
    ],
)
def test_a_malformed_request_is_refused_with_the_reason_malformed_frame(
    body: bytes, problem: str | None, request_id: int
) -> None:
    with pytest.raises(MalformedFrameError) as info:
        decode_request(body)
    assert info.value.code == "bad_request"
    assert info.value.details["reason"] == "malformed_frame"
    assert info.value.request_id == request_id
    if problem is not None:
        assert info.value.details["problem"] == problem
    else:
        assert info.value.details["problem"].startswith("not valid JSON")


@pytest.mark.parametrize(
    ("body", "key", "path", "request_id"),
    [
        (b'{"id": 1, "op": "ping", "op": "shutdown"}', "op", "$", 1),
        (b'{"id": 1, "id": 2, "op": "ping"}', "id", "$", 0),
        (b'{"id": 4, "op": "x", "args": {"a": 1, "a": 2}}', "a", "$.args", 4),
        (
            b'{"id": 4, "op": "x", "args": {"l": [0, {"b": {"c": 1, "c": 1}}]}}',
            "c",
            "$.args.l[1].b",
            4,
        ),
        (b'{"id": 5, "op": "ping", "\\u006fp": "shutdown"}', "op", "$", 5),
    ],
)
def test_a_key_given_twice_anywhere_is_refused_with_duplicate_key(
    body: bytes, key: str, path: str, request_id: int
) -> None:
    with pytest.raises(DuplicateKeyError) as info:
        decode_request(body)
    assert info.value.code == "bad_request"
    assert info.value.details == {"reason": "duplicate_key", "key": key, "path": path}
    assert info.value.message == f"key {key!r} appears more than once in the object at {path}"
    assert info.value.request_id == request_id


def test_colons_brackets_and_escaped_quotes_inside_strings_are_not_structure() -> None:
    text = 'a:b\\" : {"x": [[[["'
    body = encode_request(3, "ping", {"s": text, "t": {"u": ":"}})[4:]
    assert decode_request(body).args == {"s": text, "t": {"u": ":"}}


@settings(max_examples=100)
@given(value=json_values)
def test_any_encoded_request_decodes_strictly(value: object) -> None:
    body = encode_request(9, "ping", {"v": value})[4:]
    assert decode_request(body).args == {"v": value}


def nested(depth: int) -> bytes:
    """A request whose ``args`` make the whole frame ``depth`` levels deep."""
    inner = b"[" * (depth - 2) + b"]" * (depth - 2)
    return b'{"id": 6, "op": "ping", "args": {"x": ' + inner + b"}}"


def test_a_request_nested_up_to_the_limit_is_accepted() -> None:
    assert decode_request(nested(MAX_DEPTH)).id == 6


@pytest.mark.parametrize(("depth", "request_id"), [(MAX_DEPTH + 1, 6), (100_000, 0)])
def test_a_request_nested_deeper_than_the_limit_is_refused(depth: int, request_id: int) -> None:
    with pytest.raises(TooDeeplyNestedError) as info:
        decode_request(nested(depth))
    assert info.value.details == {"reason": "too_deeply_nested", "max_depth": MAX_DEPTH}
    assert info.value.message == "frame nested deeper than 64 levels of objects and arrays"
    assert info.value.request_id == request_id


@pytest.mark.parametrize(
    ("args", "path"),
    [
        (b'{"n": 18446744073709551616}', "$.args.n"),
        (b'{"e": {"data": [1, -9223372036854775809]}}', "$.args.e.data[1]"),
    ],
)
def test_an_integer_the_journal_cannot_store_is_refused_with_its_path(
    args: bytes, path: str
) -> None:
    with pytest.raises(IntegerOutOfRangeError) as info:
        decode_request(b'{"id": 4, "op": "ping", "args": ' + args + b"}")
    assert info.value.code == "bad_request"
    assert info.value.details["reason"] == "integer_out_of_range"
    assert info.value.details["path"] == path
    assert info.value.request_id == 4


def test_integers_at_the_bounds_and_long_digits_in_strings_and_floats_are_accepted() -> None:
    body = (
        b'{"id": 4, "op": "ping", "args": {"a": 18446744073709551615, '
        b'"b": -9223372036854775808, "s": "123456789012345678901234", '
        b'"f": 12345678901234567890123.5}}'
    )
    assert decode_request(body).args["a"] == 2**64 - 1


def test_an_id_out_of_range_is_answered_with_id_zero() -> None:
    with pytest.raises(IntegerOutOfRangeError) as info:
        decode_request(b'{"id": 99999999999999999999999, "op": "ping", "args": {}}')
    assert info.value.request_id == 0


def test_server_frames_decode_to_their_kind() -> None:
    err = BadRequestError("bad", reason="x")
    frames = [
        (encode_reply(1, [1]), "result", [1]),
        (encode_reply(1, None), "result", None),
        (
            encode_error(2, err),
            "error",
            {"code": "bad_request", "message": "bad", "details": {"reason": "x"}},
        ),
        (encode_stream_event(3, {"seq": 1}), "event", {"seq": 1}),
        (encode_end(4), "end", None),
    ]
    for frame, kind, value in frames:
        decoded = decode_server_frame(frame[4:])
        assert (decoded.kind, decoded.value) == (kind, value)


def test_a_server_frame_of_unknown_shape_is_malformed() -> None:
    with pytest.raises(MalformedFrameError, match=r"unrecognised reply keys \['id', 'what'\]"):
        decode_server_frame(b'{"id": 1, "what": 2}')


def test_an_unknown_op_is_refused_with_the_reason_unknown_op() -> None:
    with pytest.raises(BadRequestError) as info:
        validate_args("explode", {})
    assert info.value.details == {"reason": "unknown_op", "op": "explode"}


def test_arguments_of_the_wrong_type_are_refused_with_the_problem() -> None:
    with pytest.raises(BadRequestError) as info:
        validate_args("start_project", {"root": 5})
    assert info.value.details == {
        "reason": "invalid_args",
        "op": "start_project",
        "problem": "Expected `str`, got `int` - at `$.root`",
    }


def test_unknown_arguments_are_refused() -> None:
    with pytest.raises(BadRequestError) as info:
        validate_args("list_projects", {"verbose": True})
    assert info.value.details["problem"] == "Object contains unknown field `verbose`"


def test_missing_arguments_are_refused() -> None:
    with pytest.raises(BadRequestError) as info:
        validate_args("stop_conversation", {"project_id": "p"})
    assert info.value.details["problem"] == "Object missing required field `conversation_id`"


def test_validated_arguments_carry_every_default() -> None:
    args = validate_args(
        "send_event",
        {"project_id": "p", "conversation_id": "c", "event": {"type": "user.message"}},
    )
    assert msgspec.to_builtins(args) == {
        "project_id": "p",
        "conversation_id": "c",
        "event": {"type": "user.message", "data": {}, "correlation_id": None},
        "wait": False,
        "wait_timeout_s": 60.0,
        "idempotency_key": None,
    }


def test_run_tool_arguments_get_an_empty_meta() -> None:
    args = validate_args("run_tool", {"project_id": "p", "request": {"name": "fs.list"}})
    assert msgspec.to_builtins(args)["request"] == {
        "name": "fs.list",
        "args": {},
        "meta": {"conversation_id": None, "correlation_id": None, "source": "run_tool"},
    }


def test_run_tool_takes_the_mcp_source_and_no_other() -> None:
    request = {"name": "fs.list", "meta": {"source": "mcp"}}
    args = validate_args("run_tool", {"project_id": "p", "request": request})
    assert isinstance(args, RunToolArgs)
    assert args.request.meta.source == "mcp"
    for source in ("model", "workflow", "policy"):
        request = {"name": "fs.list", "meta": {"source": source}}
        with pytest.raises(BadRequestError, match="Invalid enum value"):
            validate_args("run_tool", {"project_id": "p", "request": request})


def test_a_negative_after_seq_is_refused() -> None:
    with pytest.raises(BadRequestError, match="Expected `int` >= 0"):
        validate_args("subscribe", {"project_id": "p", "after_seq": -1})


def test_every_op_of_the_spec_is_known_and_subscribe_streams() -> None:
    spec_ops = {
        "ping", "status", "shutdown", "start_project", "stop_project", "list_projects",
        "diagnostics", "list_tools", "run_tool", "start_conversation", "stop_conversation",
        "send_event", "cancel", "resume", "approve", "reject", "get_projection",
        "incident_timeline", "incident_report", "verify", "subscribe",
    }  # fmt: skip
    beyond_the_spec = {"check_protocol", "describe_project"}  # for roost a2a serve
    beyond_the_spec |= {"project_events"}  # roost project events
    beyond_the_spec |= {"delete_project"}  # roost project delete
    beyond_the_spec |= {"inject_fault"}  # a testing aid (ROOST_FAULT_INJECTION=1)
    assert spec_ops | beyond_the_spec == OPS
    assert frozenset({"subscribe"}) == STREAM_OPS


def test_a_waiting_send_event_gets_its_wait_on_top_of_the_default_deadline() -> None:
    assert op_timeout_s("send_event", {"wait": True, "wait_timeout_s": 5.0}) == 65.0
    assert op_timeout_s("send_event", {"wait": False, "wait_timeout_s": 5.0}) == 60.0
    assert op_timeout_s("verify", {}) == 3600.0


def test_an_event_with_meta_correlation_and_top_level_content_is_normalized() -> None:
    event = {"type": "user.message", "content": "list skills", "meta": {"correlation_id": "c-1"}}
    assert normalize_event(event) == {
        "type": "user.message",
        "data": {"content": "list skills"},
        "correlation_id": "c-1",
    }


def test_a_top_level_correlation_id_wins_over_meta() -> None:
    event = {"type": "t", "correlation_id": "top", "meta": {"correlation_id": "meta"}}
    assert normalize_event(event)["correlation_id"] == "top"


def test_a_payload_field_given_twice_is_refused() -> None:
    with pytest.raises(BadRequestError) as info:
        normalize_event({"type": "t", "content": "a", "data": {"content": "b"}})
    assert info.value.details == {"reason": "duplicate_field", "key": "content"}


def test_an_unknown_meta_key_is_refused() -> None:
    with pytest.raises(BadRequestError) as info:
        normalize_event({"type": "t", "meta": {"trace": 1}})
    assert info.value.details == {"reason": "unexpected_meta", "keys": ["trace"]}


def test_a_socket_path_longer_than_the_kernel_limit_still_binds_and_connects(tmp_path) -> None:
    home = tmp_path / ("x" * 120)
    path = str(home / "roost.sock")
    assert len(path) > 108
    listener = bind_unix_socket(path)
    with listener:
        client = connect_unix_socket(path, 5)
        server, _ = listener.accept()
        with client, server:
            client.sendall(encode_frame("hi"))
            assert read_frame(server, 100) == b'"hi"'
    assert os.path.exists(path)


def test_take_frame_waits_for_a_whole_frame_and_refuses_a_large_one_before_its_body() -> None:
    from runtime.wire.framing import frame, take_frame

    buffer = bytearray(frame(b"one") + frame(b"two")[:5])
    assert take_frame(buffer, 10) == b"one"
    assert take_frame(buffer, 10) is None
    buffer += frame(b"two")[5:]
    assert take_frame(buffer, 10) == b"two"
    assert buffer == b""
    big = bytearray(struct.pack(">I", 11))
    with pytest.raises(
        FrameTooLargeError, match=r"^frame of 11 bytes exceeds the maximum of 10 bytes$"
    ):
        take_frame(big, 10)


def test_read_frame_with_a_deadline_times_out_instead_of_blocking() -> None:
    import time

    from runtime.wire.framing import read_frame

    a, b = socket.socketpair()
    with a, b:
        a.sendall(struct.pack(">I", 4) + b"ab")
        with pytest.raises(TimeoutError):
            read_frame(b, 10, deadline=time.monotonic() + 0.05)
