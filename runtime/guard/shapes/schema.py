"""Tool-argument validation: the JSON Schema subset Roost's tools declare, and safe JSON.

The ToolRunner checks every call's arguments against the tool's ``input_schema`` with
:func:`validate_args` before anything else runs (SPEC section 6: unknown tool → schema →
...). A failure raises :class:`runtime.errors.ToolError` with code ``invalid_tool_args``
and ``kind`` one of:

- ``missing_required_args`` with ``keys`` (sorted paths of the missing arguments);
- ``unexpected_args`` with ``keys`` (sorted paths) and ``allowed`` (the declared names);
- ``invalid_type`` with ``key`` (the path, e.g. ``headers.accept`` or ``steps[0].name``;
  absent when the arguments themselves are not an object), ``expected``, ``actual`` and,
  for a constraint rather than a type, ``reason`` (``not_in_enum``, ``below_minimum``,
  ``above_maximum``, ``too_short``, ``too_long``, ``too_few_items``, ``too_many_items``,
  ``pattern_mismatch``, ``invalid_schema_pattern``, ``non_string_key``,
  ``nesting_too_deep``).

Supported keywords: ``type`` (a name or a list of names), ``properties``, ``required``,
``additionalProperties`` (bool or schema; absent means false at the top level and true
below it), ``items``, ``enum``, ``minimum``, ``maximum``, ``exclusiveMinimum``,
``exclusiveMaximum``, ``minLength``, ``maxLength``, ``pattern``, ``minItems``,
``maxItems``; annotations (``description``, ``title``, ``default``, ``examples``,
``$schema``) are ignored. :func:`check_schema` rejects anything else, so a command asset
cannot declare a constraint that would silently not be enforced.

``pattern`` is matched with RE2 (:mod:`runtime.guard.shapes.untrusted_regex`), in time linear in the
value, never with Python's backtracking ``re``: a schema comes from a repository, and a
pattern like ``(a+)+$`` would otherwise let one argument stall the process. RE2 syntax has
no backreferences or lookaround; a pattern RE2 cannot run is refused by
:func:`check_schema` (and, should one reach :func:`validate_args` unchecked, fails the
call with ``invalid_schema_pattern``).

Unlike JSON Schema, ``integer`` does not match ``1.0`` (tools receive Python values) and
neither ``integer`` nor ``number`` matches a boolean. Values nest at most
:data:`runtime.guard.shapes.safe_json.MAX_JSON_DEPTH` levels; :func:`parse_json_args` checks that
before parsing, so a hostile input cannot exhaust the interpreter's recursion limit.
"""

from __future__ import annotations

import json
import math
import operator
from collections.abc import Callable, Mapping
from typing import Any

from runtime.errors import ToolError
from runtime.guard.shapes.keywords import SUPPORTED_KEYWORDS, check_schema
from runtime.guard.shapes.safe_json import (
    MAX_JSON_DEPTH,
    DuplicateJsonKey,
    json_depth_exceeds,
    json_kind,
    json_type_name,
    matches_json_type,
    object_without_duplicates,
    value_depth_exceeds,
)
from runtime.guard.shapes.untrusted_regex import (
    UnsafePatternError,
    UntrustedRegex,
    compile_untrusted,
)

__all__ = [
    "SUPPORTED_KEYWORDS",
    "check_schema",
    "parse_json_args",
    "validate_args",
]


def _invalid(key: str | None, message: str, **fields: Any) -> ToolError:
    if key is not None:
        fields["key"] = key
    return ToolError("invalid_tool_args", message, kind="invalid_type", **fields)


def _too_deep() -> ToolError:
    return _invalid(
        None,
        f"arguments nest deeper than {MAX_JSON_DEPTH} levels",
        reason="nesting_too_deep",
        max_depth=MAX_JSON_DEPTH,
    )


class _UnstorableInt(ValueError):
    """An integer literal outside what the journal stores (int64 to uint64)."""


def _storable_int(literal: str) -> int:
    """``json.loads``'s ``parse_int``: the integer, or :class:`_UnstorableInt`."""
    value = int(literal)
    if not -(2**63) <= value <= 2**64 - 1:
        raise _UnstorableInt(literal)
    return value


def parse_json_args(text: str | bytes) -> dict[str, Any]:
    """Parse tool arguments from JSON text: an object, no duplicate keys, bounded nesting.

    Raises ``ToolError("invalid_tool_args", kind="invalid_type")`` with ``reason``
    ``invalid_json``, ``duplicate_key`` (and ``key``), ``nesting_too_deep``,
    ``integer_out_of_range`` (an integer the journal, whose events record the arguments,
    cannot store: outside -2**63..2**64-1) or ``not_an_object``.
    """
    if isinstance(text, bytes | bytearray):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as e:
            raise _invalid(
                None, f"arguments are not valid UTF-8: {e.reason}", reason="invalid_json"
            ) from e
    if json_depth_exceeds(text, MAX_JSON_DEPTH):
        raise _too_deep()
    try:
        value = json.loads(
            text, object_pairs_hook=object_without_duplicates, parse_int=_storable_int
        )
    except DuplicateJsonKey as e:
        raise _invalid(
            e.key,
            f"duplicate key {e.key!r} in the arguments; send each key once",
            reason="duplicate_key",
        ) from e
    except _UnstorableInt as e:
        raise _invalid(
            None,
            f"the integer {str(e)[:40]} in the arguments is outside -2**63..2**64-1; "
            "send it as a string",
            reason="integer_out_of_range",
        ) from e
    except (ValueError, RecursionError) as e:
        raise _invalid(None, f"arguments are not valid JSON: {e}", reason="invalid_json") from e
    if not isinstance(value, dict):
        raise _invalid(
            None,
            f"arguments must be a JSON object, got {json_type_name(value)}",
            reason="not_an_object",
            expected="object",
            actual=json_type_name(value),
        )
    return value


def _json_equal(a: Any, b: Any) -> bool:
    kind_a, kind_b = json_type_name(a), json_type_name(b)
    numeric = {"integer", "number"}
    same_kind = kind_a == kind_b or (kind_a in numeric and kind_b in numeric)
    return same_kind and bool(a == b)


def _path(parent: str, key: str) -> str:
    return key if not parent else f"{parent}.{key}"


def _pattern(pattern: str, path: str) -> UntrustedRegex:
    """Compile a schema's ``pattern`` with RE2 (linear time; see ``shapes.untrusted_regex``).

    Schemas from files are checked by :func:`check_schema` when loaded, so a refusal here
    means a schema that skipped that check: it fails the call, it does not run ``re``.
    """
    try:
        return compile_untrusted(pattern, what="'pattern'")
    except UnsafePatternError as e:
        raise _invalid(
            path or None,
            f"the schema of {path or 'the arguments'} has an unusable pattern: {e}",
            reason="invalid_schema_pattern",
            expected=pattern,
            actual="string",
        ) from e


def _check(schema: Mapping[str, Any], value: Any, path: str, top: bool) -> None:
    """Validate ``value`` at ``path``; recursion is bounded by the value's checked depth."""
    where = path or "arguments"
    types = schema.get("type")
    if types is not None:
        names = [types] if isinstance(types, str) else list(types)
        if not any(matches_json_type(value, n) for n in names):
            expected = " or ".join(names)
            raise _invalid(
                path or None,
                f"{where} must be {expected}, got {json_type_name(value)}",
                expected=expected,
                actual=json_type_name(value),
            )
    if "enum" in schema and not any(_json_equal(value, e) for e in schema["enum"]):
        allowed = ", ".join(json.dumps(e) for e in schema["enum"])
        raise _invalid(
            path or None,
            f"{where} must be one of {allowed}",
            reason="not_in_enum",
            expected=list(schema["enum"]),
            actual=json_type_name(value),
        )
    _CONSTRAINTS.get(json_kind(value), _no_constraints)(schema, value, path, top)


def _no_constraints(schema: Mapping[str, Any], value: Any, path: str, top: bool) -> None:
    """A boolean, null or non-finite number: no keyword beyond ``type`` and ``enum`` applies."""


def _check_array(schema: Mapping[str, Any], value: Any, path: str, _top: bool) -> None:
    _check_size(schema, len(value), path, "array")
    items = schema.get("items")
    if isinstance(items, dict):
        for index, item in enumerate(value):
            _check(items, item, f"{path}[{index}]", False)


def _check_string(schema: Mapping[str, Any], value: str, path: str, _top: bool) -> None:
    _check_size(schema, len(value), path, "string")
    pattern = schema.get("pattern")
    if isinstance(pattern, str) and not _pattern(pattern, path).search(value):
        raise _invalid(
            path or None,
            f"{path or 'arguments'} must match the pattern {pattern!r}",
            reason="pattern_mismatch",
            expected=pattern,
            actual="string",
        )


_SIZE_LIMITS = {
    "array": (
        ("minItems", operator.lt, "at least", "items", "too_few_items"),
        ("maxItems", operator.gt, "at most", "items", "too_many_items"),
    ),
    "string": (
        ("minLength", operator.lt, "at least", "characters", "too_short"),
        ("maxLength", operator.gt, "at most", "characters", "too_long"),
    ),
}
"""Per kind: each size keyword, the comparison that breaks it, its words and its reason."""


def _check_size(schema: Mapping[str, Any], size: int, path: str, kind: str) -> None:
    where = path or "arguments"
    for keyword, breaks, bound, unit, reason in _SIZE_LIMITS[kind]:
        if keyword in schema and breaks(size, schema[keyword]):
            raise _invalid(
                path or None,
                f"{where} must have {bound} {schema[keyword]} {unit}, got {size}",
                reason=reason,
                expected=f"{keyword} {schema[keyword]}",
                actual=size,
            )


def _long_int(value: int) -> str:
    """Describe an integer too long to print (``str`` refuses past 4300 digits)."""
    return f"an integer of about {int(value.bit_length() * math.log10(2)) + 1} digits"


def _check_number(schema: Mapping[str, Any], value: float, path: str, _top: bool) -> None:
    where = path or "arguments"
    rules = (
        ("minimum", operator.ge, ">=", "below_minimum"),
        ("exclusiveMinimum", operator.gt, ">", "below_minimum"),
        ("maximum", operator.le, "<=", "above_maximum"),
        ("exclusiveMaximum", operator.lt, "<", "above_maximum"),
    )
    for keyword, ok, symbol, reason in rules:
        if keyword in schema and not ok(value, schema[keyword]):
            big = isinstance(value, int) and abs(value) >= 10**40
            shown = _long_int(int(value)) if big else str(value)
            raise _invalid(
                path or None,
                f"{where} must be {symbol} {schema[keyword]}, got {shown}",
                reason=reason,
                expected=f"{symbol} {schema[keyword]}",
                actual=value if len(shown) <= 40 else shown,
            )


def _check_object(schema: Mapping[str, Any], value: dict[Any, Any], path: str, top: bool) -> None:
    for key in value:
        if not isinstance(key, str):
            raise _invalid(
                path or None,
                f"{path or 'arguments'} has a non-string key {key!r}",
                reason="non_string_key",
                expected="string",
                actual=json_type_name(key),
            )
    properties: Mapping[str, Any] = schema.get("properties") or {}
    extra = schema.get("additionalProperties", not top)
    if extra is False:
        unexpected = sorted(k for k in value if k not in properties)
        if unexpected:
            allowed = sorted(properties)
            raise ToolError(
                "invalid_tool_args",
                f"unexpected argument(s): {', '.join(_path(path, k) for k in unexpected)}; "
                f"allowed: {', '.join(allowed) or '(none)'}",
                kind="unexpected_args",
                keys=[_path(path, k) for k in unexpected],
                allowed=allowed,
            )
    missing = sorted(k for k in schema.get("required", ()) if k not in value)
    if missing:
        raise ToolError(
            "invalid_tool_args",
            f"missing required argument(s): {', '.join(_path(path, k) for k in missing)}",
            kind="missing_required_args",
            keys=[_path(path, k) for k in missing],
        )
    for key in sorted(value):
        sub = properties.get(key, extra)
        if isinstance(sub, dict):
            _check(sub, value[key], _path(path, key), False)


_Checker = Callable[[Mapping[str, Any], Any, str, bool], None]

_CONSTRAINTS: dict[str, _Checker] = {
    "object": _check_object,
    "array": _check_array,
    "string": _check_string,
    "integer": _check_number,
    "number": _check_number,
}
"""Past ``type`` and ``enum``: the check of each kind of value (other kinds have none)."""


def validate_args(schema: Mapping[str, Any], args: Any) -> None:
    """Check a tool call's ``args`` against its input ``schema``; raise ``ToolError`` if not.

    ``args`` must be an object. The first problem found is reported: the arguments' type,
    then per object unexpected keys, missing required keys, then each value in key order.
    """
    if not isinstance(args, dict):
        raise _invalid(
            None,
            f"arguments must be an object, got {json_type_name(args)}",
            expected="object",
            actual=json_type_name(args),
        )
    if value_depth_exceeds(args, MAX_JSON_DEPTH):
        raise _too_deep()
    _check(schema, args, "", True)
