"""The event catalog: every type round-trips, old bytes still decode, ids have their shape."""

from __future__ import annotations

import re
import typing
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from events import catalog
from events.catalog import PAYLOAD_TYPES, Event, decode_data, payload_to_data, validate_data
from events.codecs import (
    canonical_json,
    decode_envelope_json,
    decode_envelope_msgpack,
    encode_envelope_json,
    encode_envelope_msgpack,
)
from events.envelope import (
    Envelope,
    format_at,
    new_call_id,
    new_correlation_id,
    new_event,
)

json_scalars = st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=20)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)


def _strategy(tp: Any) -> st.SearchStrategy[Any]:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp is Any:
        return json_values
    if origin is typing.Union or str(origin) == "<class 'types.UnionType'>":
        return st.one_of(*[_strategy(a) for a in args])
    if origin is dict:
        return st.dictionaries(st.text(max_size=8), _strategy(args[1]), max_size=3)
    if origin is list:
        return st.lists(_strategy(args[0]), max_size=3)
    if tp is type(None):
        return st.none()
    if tp is str:
        return st.text(max_size=30)
    if tp is int:
        return st.integers(-(2**53), 2**53)
    if tp is bool:
        return st.booleans()
    if typing.is_typeddict(tp):
        hints = typing.get_type_hints(tp)
        return st.fixed_dictionaries(
            {key: _strategy(hints[key]) for key in sorted(tp.__required_keys__)},
            optional={key: _strategy(hints[key]) for key in sorted(tp.__optional_keys__)},
        )
    raise AssertionError(f"no strategy for {tp!r}")


def payloads(cls: type[Event]) -> st.SearchStrategy[Event]:
    hints = typing.get_type_hints(cls)
    fields = {name: _strategy(hints[name]) for name in cls.__struct_fields__}
    return st.builds(cls, **fields)


@pytest.mark.parametrize("name", sorted(PAYLOAD_TYPES))
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_every_event_type_round_trips_through_json_and_msgpack(name: str, data: Any) -> None:
    cls = PAYLOAD_TYPES[name]
    payload = data.draw(payloads(cls))
    event = new_event(payload, project_id="p", at="2026-11-22T00:00:00.000Z", correlation_id="c")
    envelope = Envelope(
        seq=1, stream_version=1, hash="h", prev_hash="0" * 64, **msgspec.structs.asdict(event)
    )
    assert decode_envelope_json(encode_envelope_json(envelope)) == envelope
    assert decode_envelope_msgpack(encode_envelope_msgpack(envelope)) == envelope
    assert validate_data(name, envelope.data) == payload
    assert envelope.type == name


def test_every_payload_field_has_a_docstring() -> None:
    import ast
    import inspect

    tree = ast.parse(inspect.getsource(catalog))
    missing = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            body = node.body
            for i, stmt in enumerate(body):
                if isinstance(stmt, ast.AnnAssign):
                    nxt = body[i + 1] if i + 1 < len(body) else None
                    is_doc = isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant)
                    if not is_doc:
                        missing.append(f"{node.name}.{ast.unparse(stmt.target)}")
    assert missing == []


def test_old_bytes_decode_after_a_field_with_a_default_is_added() -> None:
    class ToolStartedV1(Event, tag="tool.started"):
        call_id: str
        name: str

    class ToolStartedV2(Event, tag="tool.started"):
        call_id: str
        name: str
        attempt: int = 1
        """New in v2."""

    old = msgspec.json.encode(ToolStartedV1(call_id="call-1", name="fs.read"))
    new = msgspec.json.decode(old, type=ToolStartedV2)
    assert new == ToolStartedV2(call_id="call-1", name="fs.read", attempt=1)
    # and the other way: a new writer's bytes still decode with the old reader
    assert msgspec.json.decode(msgspec.json.encode(new), type=ToolStartedV1) == ToolStartedV1(
        call_id="call-1", name="fs.read"
    )


def test_payload_data_has_no_type_tag() -> None:
    data = payload_to_data(catalog.ToolStarted(call_id="call-1", name="fs.read"))
    assert data == {"call_id": "call-1", "name": "fs.read"}


def test_validate_data_rejects_a_wrong_field_type() -> None:
    with pytest.raises(
        msgspec.ValidationError, match=r"Expected `str`, got `int` - at `\$.call_id`"
    ):
        validate_data("tool.started", {"call_id": 1, "name": "x"})


def test_validate_data_rejects_an_unknown_type() -> None:
    with pytest.raises(KeyError):
        validate_data("no.such", {})


def test_decode_data_gives_the_typed_payload_of_a_stored_event() -> None:
    payload = catalog.ToolFailed(call_id="call-1", name="fs.read", reason={"code": "denied"})
    envelope = new_event(payload, project_id="p1", at="2026-01-01T00:00:00Z", correlation_id="c")
    decoded = decode_data(envelope.type, envelope.data)
    assert decoded == payload
    match decoded:
        case catalog.ToolFailed(reason={"code": code}):
            assert code == "denied"
        case _:
            pytest.fail(f"not matched: {decoded!r}")


def test_decode_data_fills_defaults_and_leaves_extra_fields_out() -> None:
    decoded = decode_data("tool.requested", {"call_id": "c", "name": "n", "newer_field": 1})
    assert decoded == catalog.ToolRequested(call_id="c", name="n", args={}, run_mode="sync")


def test_decode_data_of_an_unknown_type_is_none() -> None:
    assert decode_data("no.such", {"call_id": "c"}) is None


@pytest.mark.parametrize(
    "data",
    [
        {"call_id": 1, "name": "x"},  # a field of the wrong type
        {"name": "x"},  # a required field missing
        ["call_id", "x"],  # not an object at all
        None,
    ],
)
def test_decode_data_of_malformed_data_is_none(data: Any) -> None:
    assert decode_data("tool.started", data) is None


def test_decode_data_leaves_the_stored_data_as_it_was() -> None:
    data = {"call_id": "c", "name": "n", "args": {"path": "a"}, "newer_field": [1]}
    before = msgspec.json.encode(data)
    decode_data("tool.requested", data)
    assert msgspec.json.encode(data) == before


def test_correlation_ids_are_corr_and_twenty_hex_digits() -> None:
    ids = {new_correlation_id() for _ in range(100)}
    assert len(ids) == 100
    assert all(re.fullmatch(r"corr-[0-9a-f]{20}", i) for i in ids)
    assert re.fullmatch(r"call-[0-9a-f]{16}", new_call_id())


def test_at_is_utc_iso8601_with_milliseconds() -> None:
    moment = datetime(2026, 11, 22, 12, 30, 1, 987654, tzinfo=timezone(timedelta(hours=2)))
    assert format_at(moment) == "2026-11-22T10:30:01.987Z"
    assert format_at(datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)) == "2026-01-02T03:04:05.000Z"


def test_canonical_json_is_independent_of_key_order() -> None:
    assert canonical_json({"b": 1, "a": {"d": 2, "c": 3}}) == b'{"a":{"c":3,"d":2},"b":1}'


def test_the_event_catalog_doc_is_generated_from_the_catalog() -> None:
    import importlib.util
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    spec = importlib.util.spec_from_file_location("gen", root / "scripts" / "gen_events_doc.py")
    assert spec is not None and spec.loader is not None
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    doc = (root / "docs" / "events.md").read_text()
    assert doc == gen.render(), "run: python scripts/gen_events_doc.py"
    assert all(f"### `{name}`" in doc for name in PAYLOAD_TYPES)
