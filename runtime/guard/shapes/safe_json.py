"""JSON read defensively: bounded nesting, no repeated keys, type names.

Text from a repository, a model or a client is parsed here before anything looks at it:
:func:`json_depth_exceeds` measures the nesting without parsing (so a hostile document
cannot exhaust the interpreter's recursion limit), :func:`object_without_duplicates`
refuses an object that gives a key twice (parsers disagree on which one wins), and
:func:`json_document` tells whether a string argument carries a JSON document that a
scanner should look inside. :mod:`runtime.guard.shapes.schema` validates tool arguments with them;
the options file and ``.roost`` frontmatter use them too.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable
from typing import Any

__all__ = [
    "MAX_JSON_DEPTH",
    "DuplicateJsonKey",
    "json_depth_exceeds",
    "json_document",
    "json_kind",
    "json_type_name",
    "matches_json_type",
    "object_without_duplicates",
    "value_depth_exceeds",
]

MAX_JSON_DEPTH = 32
"""Deepest accepted nesting of objects and arrays; the top-level object is level 1."""

# A string (an unterminated one runs to the end, so a failed match is never retried) or a
# bracket: one pass, linear in the text.
_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"?|[\[\]{}]', re.DOTALL)


_JSON_TYPE_NAMES: dict[type, str] = {
    type(None): "null",
    bool: "boolean",
    int: "integer",
    float: "number",
    str: "string",
    list: "array",
    tuple: "array",
    dict: "object",
}
"""The JSON type name of each Python type a JSON value can have (a subclass takes its base's)."""


def json_type_name(value: Any) -> str:
    """Return the JSON type name of a Python value (``integer``, ``object``, ...).

    The nearest class in the value's MRO that :data:`_JSON_TYPE_NAMES` names decides
    (``bool`` before ``int``); any other value is named after its type.
    """
    for cls in type(value).__mro__:
        if cls in _JSON_TYPE_NAMES:
            return _JSON_TYPE_NAMES[cls]
    return type(value).__name__


def json_kind(value: Any) -> str:
    """:func:`json_type_name`, but ``nonfinite`` for NaN and the infinities (no JSON number)."""
    name = json_type_name(value)
    if name == "number" and not math.isfinite(value):
        return "nonfinite"
    return name


_SATISFIES = {"integer": ("integer", "number"), "nonfinite": ()}
"""Kinds that satisfy other type names than their own (every other kind: its own only)."""


def matches_json_type(value: Any, name: str) -> bool:
    """Whether ``value`` is of the JSON Schema type ``name``.

    An integer is a ``number`` too; a boolean is neither, and NaN and the infinities are
    no ``number``.
    """
    kind = json_kind(value)
    return name in _SATISFIES.get(kind, (kind,))


_STEPS = {"[": 1, "{": 1, "]": -1, "}": -1}
"""How each bracket changes the nesting (a string token changes nothing)."""


def json_depth_exceeds(text: str, limit: int = MAX_JSON_DEPTH) -> bool:
    """Tell whether JSON ``text`` nests objects/arrays deeper than ``limit``, without parsing.

    Brackets inside strings do not count. Linear in the text, no recursion.
    """
    depth = 0
    for match in _TOKENS.finditer(text):
        depth = max(depth + _STEPS.get(match.group(), 0), 0)  # a stray closer: stays at 0
        if depth > limit:
            return True
    return False


_CHILDREN: dict[str, Callable[[Any], Iterable[Any]]] = {"object": dict.values, "array": iter}
"""The members of a container, by its JSON type (other values have none)."""


def value_depth_exceeds(value: Any, limit: int = MAX_JSON_DEPTH) -> bool:
    """Tell whether a parsed value nests objects/arrays deeper than ``limit`` (no recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = _CHILDREN.get(json_type_name(item))
        if children is None:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children(item))
    return False


class DuplicateJsonKey(ValueError):
    """A JSON object gives ``key`` twice (parsers disagree on which one wins)."""

    def __init__(self, key: str) -> None:
        super().__init__(f"duplicate key {key!r} in a JSON object")
        self.key = key


def object_without_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``object_pairs_hook`` for :mod:`json`: the object, or :class:`DuplicateJsonKey`."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise DuplicateJsonKey(key)
        out[key] = value
    return out


def json_document(text: str) -> Any | None:
    """The JSON object or array that ``text`` is as a whole (surrounding blanks aside).

    None when it is not one: scanners use this to look inside a string argument that
    carries a JSON document, and treat any other string as plain text.
    """
    stripped = text.strip()
    if len(stripped) < 2 or stripped[0] not in "[{" or stripped[-1] not in "]}":
        return None
    try:
        return json.loads(stripped)
    except (ValueError, RecursionError):
        return None
