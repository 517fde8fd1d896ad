"""The client's codec on ``json``: what msgspec would send, read as the daemon reads it."""

from __future__ import annotations

import datetime
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.errors import BadRequestError
from runtime.wire import client_ops, ops
from runtime.wire.client_codec import (
    MalformedFrameError,
    ServerFrame,
    decode_server_frame,
    encode_json,
    encode_request,
)
from runtime.wire.protocol import decode_request, encode_error, encode_reply, encode_stream_event

# Any text (hypothesis leaves out lone surrogates), integers of any size, no floats: the
# bytes must be msgspec's exactly.
exact_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
# With floats of every kind (NaN and the infinities too) and bytes: the same values. Integers
# within what the daemon accepts (the journal's range; beyond it a request is refused with
# integer_out_of_range, tests/runtime/wire/test_protocol.py).
any_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats()
    | st.text(max_size=20)
    | st.binary(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)


def as_daemon_reads(raw: bytes) -> Any:
    return msgspec.json.decode(raw)


@settings(max_examples=200)
@given(value=exact_values)
def test_without_floats_the_bytes_are_msgspecs(value: object) -> None:
    assert encode_json(value) == msgspec.json.encode(value)
    assert encode_json(value, indent=True) == msgspec.json.format(
        msgspec.json.encode(value), indent=2
    )


@settings(max_examples=200)
@given(value=any_values)
def test_the_daemon_reads_the_value_msgspec_would_have_sent(value: object) -> None:
    assert as_daemon_reads(encode_json(value)) == as_daemon_reads(msgspec.json.encode(value))
    request = decode_request(encode_request(5, "ping", {"v": value})[4:])
    assert (request.id, request.op) == (5, "ping")
    assert request.args == {"v": as_daemon_reads(msgspec.json.encode(value))}


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (float("nan"), b"null"),
        ([float("inf"), -float("inf")], b"[null,null]"),
        (b"\x00\xff", b'"AP8="'),
        ({"tags": frozenset({"a"})}, b'{"tags":["a"]}'),
        (datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.UTC), b'"2026-01-02T03:04:05Z"'),
        ('é\u2028\x00"\\', '"é\u2028\\u0000\\"\\\\"'.encode()),
        (2**70, b"1180591620717411303424"),
        (1e16, b"1e+16"),  # msgspec spells it 1e16: the same number
    ],
)
def test_values_json_does_not_know_are_written_as_msgspec_writes_them(
    value: object, expected: bytes
) -> None:
    assert encode_json(value) == expected
    assert as_daemon_reads(expected) == as_daemon_reads(msgspec.json.encode(value))


def test_a_lone_surrogate_is_refused_as_msgspec_refuses_it() -> None:
    with pytest.raises(UnicodeEncodeError):
        msgspec.json.encode("\udcff")
    with pytest.raises(UnicodeEncodeError):
        encode_request(1, "send_event", {"text": "\udcff"})


@settings(max_examples=100)
@given(value=any_values)
def test_the_daemons_frames_decode_to_their_kind_and_value(value: object) -> None:
    expected = as_daemon_reads(msgspec.json.encode(value))
    assert decode_server_frame(encode_reply(3, value)[4:]) == ServerFrame(3, "result", expected)
    assert decode_server_frame(encode_stream_event(4, value)[4:]) == ServerFrame(
        4, "event", expected
    )


def test_an_error_frame_decodes_to_the_wire_error() -> None:
    body = encode_error(2, BadRequestError("bad", reason="x"))[4:]
    wire = {"code": "bad_request", "message": "bad", "details": {"reason": "x"}}
    assert decode_server_frame(body) == ServerFrame(2, "error", wire)


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (b"{nope", "reply is not valid JSON"),
        (b'{"id": 1, "ok": true, "result": "\xff"}', "reply is not valid JSON"),
        (b"[" * 100_000 + b"]" * 100_000, "reply is not valid JSON"),
        (b'{"id": "1", "ok": true, "result": 1}', "reply must be an object with an integer 'id'"),
        (b'{"id": true, "end": true}', "reply must be an object with an integer 'id'"),
        (b'{"id": 1, "what": 2}', "unrecognised reply keys ['id', 'what']"),
    ],
)
def test_a_reply_of_the_wrong_shape_is_malformed(body: bytes, problem: str) -> None:
    with pytest.raises(MalformedFrameError) as info:
        decode_server_frame(body)
    assert info.value.details["reason"] == "malformed_frame"
    assert info.value.details["problem"].startswith(problem)


def test_an_idempotency_key_is_a_random_uuid_spelt_as_uuid_spells_it() -> None:
    keys = {client_ops.new_idempotency_key() for _ in range(1000)}
    assert len(keys) == 1000
    for key in keys:
        parsed = uuid.UUID(key)
        assert (str(parsed), parsed.version, parsed.variant) == (key, 4, uuid.RFC_4122)


SAMPLE_ARGS: list[dict[str, Any]] = [
    {},
    {"wait": True, "wait_timeout_s": 5.0, "event": {"type": "user.message"}},
    {"wait": True, "wait_timeout_s": 7, "event": {"type": "tool.approved"}},
    {"wait": False, "wait_timeout_s": 5.0, "event": {"type": "user.message"}},
    {"wait": True, "wait_timeout_s": "soon", "event": {"type": "user.message"}},
]


@pytest.mark.parametrize("op", sorted(ops.OP_TABLE))
def test_the_clients_time_limits_are_the_op_tables(op: str) -> None:
    spec = ops.OP_TABLE[op]
    assert client_ops.OP_TIMEOUTS_S.get(op, client_ops.DEFAULT_OP_TIMEOUT_S) == spec.timeout_s
    for args in SAMPLE_ARGS:
        assert client_ops.op_timeout_s(op, args) == ops.op_timeout_s(op, args), args
    assert client_ops.op_timeout_s("no_such_op", {}) == ops.op_timeout_s("no_such_op", {})


def test_the_client_loads_neither_msgspec_nor_the_events_package() -> None:
    code = (
        "import sys, runtime.client, runtime.cli.app\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('msgspec', 'events')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=Path(__file__).resolve().parents[3],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert done.stdout.strip() == "[]"
