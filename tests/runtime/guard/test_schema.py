"""Tool-argument validation against input schemas, and safe parsing of JSON arguments."""

from __future__ import annotations

import collections
import enum
import json
import math
import re
from typing import Any, NamedTuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.errors import ToolError
from runtime.guard.shapes.safe_json import MAX_JSON_DEPTH, json_depth_exceeds, json_type_name
from runtime.guard.shapes.schema import check_schema, parse_json_args, validate_args

FS_READ: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "minLength": 1},
        "offset": {"type": "integer", "minimum": 0},
        "limit": {"type": "integer", "minimum": 1, "maximum": 10000},
    },
    "required": ["path"],
}

HTTP_FETCH: dict[str, Any] = {
    "type": "object",
    "properties": {
        "url": {"type": "string"},
        "method": {"type": "string", "enum": ["GET", "POST", "HEAD"]},
        "headers": {"type": "object", "additionalProperties": {"type": "string"}},
        "body": {"type": ["string", "null"], "maxLength": 5},
    },
    "required": ["url"],
    "additionalProperties": False,
}

WORKFLOW: dict[str, Any] = {
    "type": "object",
    "properties": {
        "steps": {
            "type": "array",
            "minItems": 1,
            "maxItems": 3,
            "items": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "args": {"type": "object"}},
                "required": ["name"],
                "additionalProperties": False,
            },
        },
        "options": {"type": "object", "properties": {"dry_run": {"type": "boolean"}}},
        "ratio": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
        "tag": {"type": "string", "pattern": "^[a-z]+$"},
    },
}


def reason(schema: dict[str, Any], args: Any) -> dict[str, Any]:
    with pytest.raises(ToolError) as info:
        validate_args(schema, args)
    assert info.value.code == "invalid_tool_args"
    found = info.value.reason()
    found.pop("message")
    return found


def message(schema: dict[str, Any], args: Any) -> str:
    with pytest.raises(ToolError) as info:
        validate_args(schema, args)
    return info.value.message


def nested(depth: int) -> dict[str, Any]:
    """An object ``depth`` levels deep (the outer object is level 1), built without recursion."""
    value: dict[str, Any] = {}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


# --- valid arguments ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("schema", "args"),
    [
        (FS_READ, {"path": "README.md"}),
        (FS_READ, {"path": "a", "offset": 0, "limit": 10000}),
        (HTTP_FETCH, {"url": "https://x", "method": "POST", "headers": {"a": "b"}, "body": None}),
        (HTTP_FETCH, {"url": "https://x", "body": "12345"}),
        (WORKFLOW, {"steps": [{"name": "fs.read", "args": {"path": "x"}}], "ratio": 0.5}),
        (WORKFLOW, {"options": {"dry_run": True, "extra": 1}, "tag": "abc"}),
        (WORKFLOW, {}),
        ({"type": "object", "properties": {"n": {"type": "number"}}}, {"n": 3}),
        ({"type": "object", "properties": {"x": {}}}, {"x": [1, {"y": None}]}),
        ({"type": "object", "additionalProperties": True}, {"anything": 1}),
    ],
)
def test_valid_arguments_pass(schema: dict[str, Any], args: dict[str, Any]) -> None:
    assert validate_args(schema, args) is None


# --- missing and unexpected --------------------------------------------------------------


def test_missing_required_arguments_are_listed() -> None:
    schema = {**FS_READ, "required": ["path", "limit"]}
    assert reason(schema, {"offset": 1}) == {
        "code": "invalid_tool_args",
        "kind": "missing_required_args",
        "keys": ["limit", "path"],
    }


def test_the_missing_message_names_the_arguments() -> None:
    assert message(FS_READ, {}) == "missing required argument(s): path"


def test_unexpected_arguments_are_listed_with_the_allowed_ones() -> None:
    assert reason(FS_READ, {"path": "a", "pth": "a", "force": True}) == {
        "code": "invalid_tool_args",
        "kind": "unexpected_args",
        "keys": ["force", "pth"],
        "allowed": ["limit", "offset", "path"],
    }


def test_the_unexpected_message_names_both_sides() -> None:
    assert message(FS_READ, {"path": "a", "x": 1}) == (
        "unexpected argument(s): x; allowed: limit, offset, path"
    )


def test_unexpected_arguments_are_reported_before_missing_ones() -> None:
    assert reason(FS_READ, {"pth": "a"})["kind"] == "unexpected_args"


def test_absent_additional_properties_means_none_at_the_top_level() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    assert reason(schema, {"b": 1})["kind"] == "unexpected_args"


def test_a_schema_without_properties_accepts_no_arguments() -> None:
    assert reason({"type": "object"}, {"x": 1})["keys"] == ["x"]
    assert validate_args({"type": "object"}, {}) is None


def test_absent_additional_properties_means_any_below_the_top_level() -> None:
    assert validate_args(WORKFLOW, {"options": {"dry_run": False, "verbose": 1}}) is None


def test_nested_unexpected_arguments_are_reported_with_their_path() -> None:
    assert reason(WORKFLOW, {"steps": [{"name": "a"}, {"name": "b", "nmae": "c"}]}) == {
        "code": "invalid_tool_args",
        "kind": "unexpected_args",
        "keys": ["steps[1].nmae"],
        "allowed": ["args", "name"],
    }


def test_nested_missing_arguments_are_reported_with_their_path() -> None:
    assert reason(WORKFLOW, {"steps": [{"args": {}}]}) == {
        "code": "invalid_tool_args",
        "kind": "missing_required_args",
        "keys": ["steps[0].name"],
    }


# --- types -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("declared", "value", "actual"),
    [
        ("integer", True, "boolean"),
        ("integer", False, "boolean"),
        ("integer", 1.0, "number"),
        ("integer", "1", "string"),
        ("number", True, "boolean"),
        ("number", "1.5", "string"),
        ("number", float("nan"), "number"),
        ("number", float("inf"), "number"),
        ("string", 1, "integer"),
        ("string", None, "null"),
        ("boolean", 1, "integer"),
        ("boolean", "true", "string"),
        ("array", "a,b", "string"),
        ("array", {"a": 1}, "object"),
        ("object", [1], "array"),
        ("null", 0, "integer"),
        ("null", "", "string"),
    ],
)
def test_a_value_of_the_wrong_type_is_invalid_type(declared: str, value: Any, actual: str) -> None:
    schema = {"type": "object", "properties": {"v": {"type": declared}}}
    assert reason(schema, {"v": value}) == {
        "code": "invalid_tool_args",
        "kind": "invalid_type",
        "key": "v",
        "expected": declared,
        "actual": actual,
    }


@pytest.mark.parametrize(
    ("declared", "value"),
    [
        ("integer", 0),
        ("integer", -(10**30)),
        ("number", 1),
        ("number", 1.5),
        ("number", 10**400),
        ("string", ""),
        ("boolean", False),
        ("array", []),
        ("array", (1, 2)),
        ("object", {}),
        ("null", None),
    ],
)
def test_a_value_of_the_right_type_passes(declared: str, value: Any) -> None:
    assert validate_args({"properties": {"v": {"type": declared}}}, {"v": value}) is None


def test_a_list_of_types_accepts_any_of_them() -> None:
    assert validate_args(HTTP_FETCH, {"url": "u", "body": None}) is None
    assert reason(HTTP_FETCH, {"url": "u", "body": 3}) == {
        "code": "invalid_tool_args",
        "kind": "invalid_type",
        "key": "body",
        "expected": "string or null",
        "actual": "integer",
    }


def test_the_type_message_names_the_argument_and_both_types() -> None:
    assert message(FS_READ, {"path": "a", "limit": True}) == "limit must be integer, got boolean"


def test_an_additional_properties_schema_checks_each_extra_value() -> None:
    assert reason(HTTP_FETCH, {"url": "u", "headers": {"ok": "1", "bad": 2}}) == {
        "code": "invalid_tool_args",
        "kind": "invalid_type",
        "key": "headers.bad",
        "expected": "string",
        "actual": "integer",
    }


def test_an_array_item_of_the_wrong_type_is_reported_with_its_index() -> None:
    assert reason(WORKFLOW, {"steps": [{"name": "a"}, {"name": 5}]})["key"] == "steps[1].name"


@pytest.mark.parametrize("args", [None, [], "{}", 3, True])
def test_arguments_that_are_not_an_object_are_invalid_type(args: Any) -> None:
    assert reason(FS_READ, args) == {
        "code": "invalid_tool_args",
        "kind": "invalid_type",
        "expected": "object",
        "actual": json_type_name(args),
    }


def test_a_non_string_key_is_invalid_type() -> None:
    assert reason({"type": "object", "additionalProperties": True}, {1: "x"}) == {
        "code": "invalid_tool_args",
        "kind": "invalid_type",
        "reason": "non_string_key",
        "expected": "string",
        "actual": "integer",
    }


# --- constraints -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("schema", "args", "key", "why"),
    [
        (HTTP_FETCH, {"url": "u", "method": "get"}, "method", "not_in_enum"),
        (HTTP_FETCH, {"url": "u", "body": "123456"}, "body", "too_long"),
        (FS_READ, {"path": ""}, "path", "too_short"),
        (FS_READ, {"path": "a", "offset": -1}, "offset", "below_minimum"),
        (FS_READ, {"path": "a", "limit": 10001}, "limit", "above_maximum"),
        (WORKFLOW, {"ratio": 0}, "ratio", "below_minimum"),
        (WORKFLOW, {"ratio": 1.0}, "ratio", "above_maximum"),
        (WORKFLOW, {"steps": []}, "steps", "too_few_items"),
        (WORKFLOW, {"steps": [{"name": "a"}] * 4}, "steps", "too_many_items"),
        (WORKFLOW, {"tag": "ABC"}, "tag", "pattern_mismatch"),
    ],
)
def test_a_violated_constraint_is_invalid_type_with_its_reason(
    schema: dict[str, Any], args: dict[str, Any], key: str, why: str
) -> None:
    found = reason(schema, args)
    assert (found["kind"], found["key"], found["reason"]) == ("invalid_type", key, why)


def test_a_huge_number_over_the_maximum_is_reported_in_short_form() -> None:
    assert message(FS_READ, {"path": "a", "limit": 10**5000}) == (
        "limit must be <= 10000, got an integer of about 5001 digits"
    )


def test_an_enum_does_not_confuse_booleans_with_integers() -> None:
    schema = {"properties": {"v": {"enum": [1, "a"]}}}
    assert reason(schema, {"v": True})["reason"] == "not_in_enum"
    assert validate_args(schema, {"v": 1.0}) is None


def test_the_enum_message_lists_the_choices() -> None:
    assert message(HTTP_FETCH, {"url": "u", "method": "PUT"}) == (
        'method must be one of "GET", "POST", "HEAD"'
    )


def test_the_length_message_gives_the_limit_and_the_length() -> None:
    assert message(HTTP_FETCH, {"url": "u", "body": "abcdefg"}) == (
        "body must have at most 5 characters, got 7"
    )


# --- nesting -----------------------------------------------------------------------------

DEEP_REASON = {
    "code": "invalid_tool_args",
    "kind": "invalid_type",
    "reason": "nesting_too_deep",
    "max_depth": MAX_JSON_DEPTH,
}
OPEN = {"type": "object", "additionalProperties": True}


def test_arguments_nested_to_the_limit_pass() -> None:
    assert validate_args(OPEN, nested(MAX_JSON_DEPTH)) is None


def test_arguments_nested_past_the_limit_are_rejected() -> None:
    assert reason(OPEN, nested(MAX_JSON_DEPTH + 1)) == DEEP_REASON


def test_very_deep_arguments_are_rejected_without_recursion() -> None:
    value: list[Any] = []
    for _ in range(100_000):
        value = [value]
    assert reason(OPEN, {"a": value}) == DEEP_REASON


# --- parse_json_args ---------------------------------------------------------------------


def test_a_json_object_is_parsed() -> None:
    assert parse_json_args('{"path": "a", "n": [1, {"b": null}]}') == {
        "path": "a",
        "n": [1, {"b": None}],
    }


def test_json_bytes_are_parsed() -> None:
    assert parse_json_args('{"p": "é"}'.encode()) == {"p": "é"}


def parse_reason(text: str | bytes) -> dict[str, Any]:
    with pytest.raises(ToolError) as info:
        parse_json_args(text)
    found = info.value.reason()
    found.pop("message")
    return found


@pytest.mark.parametrize(
    ("text", "key"),
    [('{"a": 1, "a": 2}', "a"), ('{"x": {"b": 1, "c": 2, "b": 3}}', "b")],
)
def test_a_duplicate_key_is_rejected(text: str, key: str) -> None:
    assert parse_reason(text) == {
        "code": "invalid_tool_args",
        "kind": "invalid_type",
        "reason": "duplicate_key",
        "key": key,
    }


@pytest.mark.parametrize("number", ["18446744073709551616", "-9223372036854775809"])
def test_an_integer_the_journal_cannot_store_is_rejected(number: str) -> None:
    assert parse_reason('{"a": [1, ' + number + "]}") == {
        "code": "invalid_tool_args",
        "kind": "invalid_type",
        "reason": "integer_out_of_range",
    }


def test_integers_at_the_storable_bounds_are_parsed() -> None:
    assert parse_json_args('{"a": 18446744073709551615, "b": -9223372036854775808}') == {
        "a": 2**64 - 1,
        "b": -(2**63),
    }


def test_deep_json_is_rejected_before_parsing() -> None:
    assert parse_reason('{"a": ' + "[" * 100_000 + "]" * 100_000 + "}") == DEEP_REASON


def test_json_nested_to_the_limit_is_parsed() -> None:
    text = json.dumps(nested(MAX_JSON_DEPTH))
    assert parse_json_args(text) == nested(MAX_JSON_DEPTH)


def test_json_nested_one_past_the_limit_is_rejected() -> None:
    assert parse_reason(json.dumps(nested(MAX_JSON_DEPTH + 1))) == DEEP_REASON


def test_brackets_inside_strings_do_not_count_as_nesting() -> None:
    text = json.dumps({"s": "[{" * 1000, "t": 'q\\"[[[' * 100})
    assert parse_json_args(text) == json.loads(text)


@pytest.mark.parametrize(
    "text",
    ["", "{", "{'a': 1}", '{"a": 1,}', b'{"a": "\xff"}', '{"n": ' + "1" * 5000 + "}"],
)
def test_malformed_json_is_rejected(text: str | bytes) -> None:
    found = parse_reason(text)
    assert (found["kind"], found["reason"]) == ("invalid_type", "invalid_json")


@pytest.mark.parametrize(("text", "actual"), [("[]", "array"), ('"x"', "string"), ("1", "integer")])
def test_json_that_is_not_an_object_is_rejected(text: str, actual: str) -> None:
    assert parse_reason(text) == {
        "code": "invalid_tool_args",
        "kind": "invalid_type",
        "reason": "not_an_object",
        "expected": "object",
        "actual": actual,
    }


def test_closers_before_any_opener_do_not_lower_the_depth_count() -> None:
    assert json_depth_exceeds("]]]]" + "[" * 3, 3) is False
    assert json_depth_exceeds("]]]]" + "[" * 4, 3) is True


def test_an_unterminated_string_hides_the_brackets_after_it() -> None:
    assert json_depth_exceeds('"' + "[" * 10, 3) is False


def test_a_long_run_of_escaped_quotes_is_scanned_in_one_pass() -> None:
    # Quadratic rescanning would take hours here and trip the test timeout.
    text = '{"a": "' + '\\"' * 500_000
    assert parse_reason(text)["reason"] == "invalid_json"


def depth_of(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((depth_of(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((depth_of(v) for v in value), default=0)
    return 0


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=3), children, max_size=3)
    ),
    max_leaves=40,
)


@settings(max_examples=200, deadline=None)
@given(JSON_VALUES, st.integers(0, 8))
def test_the_depth_scan_agrees_with_the_parsed_depth(value: Any, limit: int) -> None:
    assert json_depth_exceeds(json.dumps(value), limit) is (depth_of(value) > limit)


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.text(max_size=5), JSON_VALUES, max_size=4))
def test_parsing_encoded_arguments_gives_them_back(args: dict[str, Any]) -> None:
    assert parse_json_args(json.dumps(args)) == args
    assert parse_json_args(json.dumps(args, ensure_ascii=False).encode()) == args


# --- check_schema ------------------------------------------------------------------------


@pytest.mark.parametrize("schema", [FS_READ, HTTP_FETCH, WORKFLOW, {}])
def test_the_supported_subset_passes_the_schema_check(schema: dict[str, Any]) -> None:
    assert check_schema(schema) is None


@pytest.mark.parametrize(
    ("schema", "error"),
    [
        ([], "a schema must be an object, got array"),
        ({"type": "object", "oneOf": []}, "unsupported schema keyword(s): oneOf"),
        ({"type": "date"}, "'type' must be one of"),
        ({"type": []}, "'type' must be one of"),
        ({"properties": []}, "'properties' must be an object"),
        ({"properties": {"a": {"format": "uri"}}}, "unsupported schema keyword(s): format"),
        ({"required": "path"}, "'required' must be a list of strings"),
        ({"items": True}, "'items' must be a schema"),
        ({"additionalProperties": "no"}, "'additionalProperties' must be a schema or a boolean"),
        ({"additionalProperties": 1}, "'additionalProperties' must be a schema or a boolean"),
        ({"additionalProperties": 0.0}, "'additionalProperties' must be a schema or a boolean"),
        ({"enum": "a"}, "'enum' must be a list"),
        ({"minimum": "0"}, "'minimum' must be a number"),
        ({"maxLength": -1}, "'maxLength' must be a non-negative integer"),
        ({"minItems": True}, "'minItems' must be a non-negative integer"),
        ({"pattern": "("}, "'pattern' is not a valid RE2 regular expression (missing ): ()"),
    ],
)
def test_an_unsupported_schema_is_refused(schema: Any, error: str) -> None:
    with pytest.raises(ValueError, match=r"^" + re.escape(error)):
        check_schema(schema)


def test_a_schema_pattern_re2_cannot_run_is_refused_naming_where_and_why() -> None:
    schema = {"type": "object", "properties": {"tag": {"type": "string", "pattern": "(?=a)"}}}
    expected = (
        "'properties.tag.pattern' uses a feature the linear-time matcher (RE2) does not have "
        "(invalid perl operator: (?=): "
    )
    with pytest.raises(ValueError, match=r"^" + re.escape(expected) + r".*\[unsupported_regex\]$"):
        check_schema(schema)


def test_a_schema_pattern_must_be_a_string() -> None:
    with pytest.raises(ValueError, match=r"^'pattern' must be a string$"):
        check_schema({"pattern": 5})


@pytest.mark.parametrize("pattern", ["^(a+)+$", "^(?:a|a)+$", "^(a|aa)+$"])
def test_a_catastrophic_pattern_validates_long_values_correctly(pattern: str) -> None:
    schema = {"type": "object", "properties": {"tag": {"type": "string", "pattern": pattern}}}
    validate_args(schema, {"tag": "a" * 50_000})
    with pytest.raises(ToolError) as exc:
        validate_args(schema, {"tag": "a" * 50_000 + "!"})
    assert (exc.value.details["key"], exc.value.details["reason"]) == ("tag", "pattern_mismatch")


def test_a_value_with_a_lone_surrogate_is_checked_against_a_pattern_like_any_other() -> None:
    schema = {"type": "object", "properties": {"tag": {"type": "string", "pattern": "^[a-z]+$"}}}
    with pytest.raises(ToolError) as exc:
        validate_args(schema, json.loads('{"tag": "ab\\ud800"}'))
    assert (exc.value.details["key"], exc.value.details["reason"]) == ("tag", "pattern_mismatch")


def test_an_unchecked_schema_with_an_unusable_pattern_fails_the_call_without_re() -> None:
    schema = {"type": "object", "properties": {"tag": {"type": "string", "pattern": "(?<=a)b"}}}
    with pytest.raises(ToolError) as exc:
        validate_args(schema, {"tag": "ab"})
    assert exc.value.code == "invalid_tool_args"
    assert exc.value.details == {
        "kind": "invalid_type",
        "key": "tag",
        "reason": "invalid_schema_pattern",
        "expected": "(?<=a)b",
        "actual": "string",
    }


def test_a_schema_nested_too_deep_is_refused() -> None:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(40):
        schema = {"type": "object", "properties": {"a": schema}}
    with pytest.raises(ValueError, match=r"^schema nests deeper than 32 levels$"):
        check_schema(schema)


class _Level(enum.IntEnum):
    LOW = 1


class _Point(NamedTuple):
    x: int


@pytest.mark.parametrize(
    ("value", "name"),
    [
        (_Level.LOW, "integer"),  # a subclass takes its base's name (bool's before int's)
        (True, "boolean"),
        (collections.OrderedDict(), "object"),
        (_Point(1), "array"),
        (b"x", "bytes"),  # no JSON type: the Python type's name
        (object(), "object"),
    ],
)
def test_json_type_name_of_subclasses_and_other_values(value: object, name: str) -> None:
    assert json_type_name(value) == name


def test_a_null_type_items_or_additional_properties_counts_as_absent() -> None:
    check_schema({"type": None, "items": None, "additionalProperties": None})
    with pytest.raises(ValueError, match=r"^'properties' must be an object$"):
        check_schema({"properties": None})
    with pytest.raises(ValueError, match=r"^'minimum' must be a number$"):
        check_schema({"minimum": None})


def test_non_finite_numbers_match_no_type_and_meet_no_bound() -> None:
    schema = {"type": "object", "properties": {"n": {"maximum": 1}}}
    validate_args(schema, {"n": float("inf")})  # no ``type``: a bound does not apply to it
    with pytest.raises(ToolError) as exc:
        validate_args({"type": "object", "properties": {"n": {"type": "number"}}}, {"n": math.nan})
    assert (exc.value.details["expected"], exc.value.details["actual"]) == ("number", "number")
