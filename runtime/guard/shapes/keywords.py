"""The JSON Schema keywords a tool's input schema may use, and :func:`check_schema`.

:func:`runtime.guard.shapes.schema.validate_args` enforces :data:`SUPPORTED_KEYWORDS`
and ignores annotations. A schema from a file (a command or workflow asset, an MCP
server's tool) is checked here when it is loaded: a keyword outside that set, or a value
the validator could not use, is refused, so no constraint is ever silently not enforced.
Each keyword's rule is a row of :data:`_KEYWORDS`, read in order by one loop.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from runtime.guard.shapes.safe_json import MAX_JSON_DEPTH, json_type_name, matches_json_type
from runtime.guard.shapes.untrusted_regex import UnsafePatternError, compile_untrusted

__all__ = ["SUPPORTED_KEYWORDS", "TYPE_NAMES", "check_schema"]

TYPE_NAMES = frozenset({"object", "array", "string", "integer", "number", "boolean", "null"})
"""The JSON Schema type names Roost understands."""

SUPPORTED_KEYWORDS = frozenset(
    {
        "type",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "enum",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "minLength",
        "maxLength",
        "pattern",
        "minItems",
        "maxItems",
    }
)
"""Keywords :func:`~runtime.guard.shapes.schema.validate_args` enforces."""

_ANNOTATIONS = frozenset({"description", "title", "default", "examples", "$schema", "$id"})

Valid = Callable[[Any, str], bool]
"""Whether a keyword's value is usable: ``(value, where) -> bool`` (``where``: its path)."""


def _type_names(types: Any, _at: str) -> bool:
    names = [types] if isinstance(types, str) else types
    return isinstance(names, list) and bool(names) and all(n in TYPE_NAMES for n in names)


def _compiles(value: str, at: str) -> None:
    """Raise unless RE2 compiles the pattern, the refusal's reason in brackets."""
    try:
        compile_untrusted(value, what=f"'{at}pattern'")
    except UnsafePatternError as e:
        raise ValueError(f"{e} [{e.reason}]") from e


def _nothing_more(value: Any, at: str) -> None:
    """A keyword whose value is usable once it has the right shape."""


def _null_or(valid: Valid) -> Valid:
    """``valid``, with null standing for an absent keyword."""
    return lambda value, at: value is None or valid(value, at)


def _properties(value: Any) -> Sequence[tuple[str, Any]]:
    return [(f"properties.{name}.", sub) for name, sub in value.items()]


def _no_subschemas(value: Any) -> Sequence[tuple[str, Any]]:
    return ()


def _subschema(keyword: str) -> Callable[[Any], Sequence[tuple[str, Any]]]:
    """The value of ``keyword`` when it is a schema (not a boolean or null)."""

    def found(value: Any) -> Sequence[tuple[str, Any]]:
        if isinstance(value, dict):
            return [(f"{keyword}.", value)]
        return ()

    return found


class _Keyword(NamedTuple):
    """What :func:`check_schema` accepts as one keyword's value, and the schemas in it."""

    name: str
    valid: Valid
    problem: str
    subschemas: Callable[[Any], Sequence[tuple[str, Any]]] = _no_subschemas
    usable: Callable[[Any, str], None] = _nothing_more
    """Raises when a value of the right shape still cannot be used (a pattern RE2 refuses)."""


_KEYWORDS = (
    _Keyword(
        "type",
        _null_or(_type_names),
        f"'type' must be one of {sorted(TYPE_NAMES)} or a list of them",
    ),
    _Keyword(
        "properties",
        lambda value, _: isinstance(value, dict),
        "'properties' must be an object",
        _properties,
    ),
    _Keyword(
        "required",
        lambda value, _: isinstance(value, list) and all(isinstance(r, str) for r in value),
        "'required' must be a list of strings",
    ),
    _Keyword(
        "additionalProperties",
        _null_or(lambda value, _: isinstance(value, (dict, bool))),
        "'additionalProperties' must be a schema or a boolean",
        _subschema("additionalProperties"),
    ),
    _Keyword(
        "items",
        _null_or(lambda value, _: isinstance(value, dict)),
        "'items' must be a schema",
        _subschema("items"),
    ),
    _Keyword("enum", lambda value, _: isinstance(value, list), "'enum' must be a list"),
    *(
        _Keyword(
            name, lambda value, _: matches_json_type(value, "number"), f"'{name}' must be a number"
        )
        for name in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
    ),
    *(
        _Keyword(
            name,
            lambda value, _: matches_json_type(value, "integer") and value >= 0,
            f"'{name}' must be a non-negative integer",
        )
        for name in ("minLength", "maxLength", "minItems", "maxItems")
    ),
    _Keyword(
        "pattern",
        lambda value, _: isinstance(value, str),
        "'pattern' must be a string",
        usable=_compiles,
    ),
)
"""Every keyword :func:`check_schema` looks at, in the order it looks: the first problem
is reported, and a keyword's subschemas are checked right after it."""


def check_schema(schema: Any, *, _depth: int = 1, _at: str = "") -> None:
    """Raise ``ValueError`` unless ``schema`` uses only what ``validate_args`` enforces.

    For input schemas that come from files (command and workflow assets): an unsupported
    keyword would otherwise be ignored and its constraint silently not enforced. A
    ``pattern`` must compile with RE2 (:mod:`runtime.guard.shapes.untrusted_regex`); the message
    ends with the refusal's reason in brackets, e.g. ``[unsupported_regex]``.
    """
    if _depth > MAX_JSON_DEPTH:
        raise ValueError(f"schema nests deeper than {MAX_JSON_DEPTH} levels")
    if not isinstance(schema, dict):
        raise ValueError(f"a schema must be an object, got {json_type_name(schema)}")
    unknown = sorted(str(k) for k in schema if k not in SUPPORTED_KEYWORDS | _ANNOTATIONS)
    if unknown:
        raise ValueError(f"unsupported schema keyword(s): {', '.join(unknown)}")
    for keyword in _KEYWORDS:
        if keyword.name in schema:
            value = schema[keyword.name]
            if not keyword.valid(value, _at):
                raise ValueError(keyword.problem)
            keyword.usable(value, _at)
            for where, sub in keyword.subschemas(value):
                check_schema(sub, _depth=_depth + 1, _at=f"{_at}{where}")
