"""The frontmatter grammar of asset files and the ``{{name}}`` placeholder templating.

Both are plain text functions with no knowledge of asset kinds; :mod:`runtime.tools.asset_store`
applies them. The grammar (also in ``docs/assets.md``) is a small, line-based subset of
what YAML frontmatter usually holds, so no YAML parser is needed:

- the file's first line is ``---``; the block ends at the next line that is ``---``;
- blank lines and lines whose first non-blank character is ``#`` are skipped;
- every other line is ``key: value``, the key at column 0 matching
  ``[A-Za-z_][A-Za-z0-9_-]*``, each key at most once;
- a value starting with ``"`` is a JSON string; with ``'`` a literal string in which
  ``''`` stands for one quote; with ``[`` or ``{`` a JSON value (no duplicate object keys,
  no ``NaN``) that may continue on the following lines; anything else is a plain string,
  trimmed, taken verbatim (no inline comments, no escapes; empty is allowed).

A placeholder is ``{{name}}`` (spaces inside the braces allowed), ``name`` matching
``[A-Za-z_][A-Za-z0-9_]*``. Every ``{{`` must open a placeholder; there is no escape.
Substitution is one pass over one string: a substituted value is never re-read as a
template, split, or given to a shell.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from runtime.errors import ToolError
from runtime.guard.shapes.safe_json import (
    MAX_JSON_DEPTH,
    json_depth_exceeds,
    object_without_duplicates,
)
from runtime.tools.rules import Check, check

__all__ = [
    "FrontmatterError",
    "parse_frontmatter",
    "placeholder_names",
    "render_text",
    "render_value",
]

_ENTRY = re.compile(r"^([A-Za-z_][A-Za-z0-9_-]*)[ \t]*:(.*)$")
_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
_FULL_PLACEHOLDER = re.compile(r"^\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}$")


class FrontmatterError(ValueError):
    """An asset's text does not follow the frontmatter grammar or its kind's rules."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


# --- grammar ----------------------------------------------------------------------------


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


_DECODER = json.JSONDecoder(
    object_pairs_hook=object_without_duplicates, parse_constant=_no_constant
)


def _bad(lineno: int, what: str) -> FrontmatterError:
    return FrontmatterError("invalid_frontmatter", f"frontmatter line {lineno}: {what}")


def _single_quoted(raw: str, lineno: int) -> str:
    inner = raw[1:-1]
    if len(raw) < 2 or not raw.endswith("'") or "'" in inner.replace("''", ""):
        raise _bad(lineno, "a single-quoted value must end with ' and write a quote as ''")
    return inner.replace("''", "'")


def _json_value(raw: str, following: list[str], key: str, lineno: int) -> tuple[object, int]:
    """A JSON value, perhaps continued on ``following`` lines; how many of them it took."""
    rest = "\n".join([raw, *following])
    try:
        value, stop = _DECODER.raw_decode(rest)
    except (ValueError, RecursionError) as e:
        raise _bad(lineno, f"the value of {key!r} is not valid JSON: {e}") from e
    check(
        _JSON_VALUE_RULES,
        functools.partial(_bad, lineno),
        key=key,
        json=rest[:stop],
        after=rest[stop:],
    )
    return value, rest[:stop].count("\n")


_JSON_VALUE_RULES = (
    Check(
        lambda json, **_: json_depth_exceeds(json, MAX_JSON_DEPTH),
        f"the JSON value of {{key!r}} nests over {MAX_JSON_DEPTH} deep",
    ),
    Check(
        lambda after, **_: bool(after.split("\n", 1)[0].strip()),
        "unexpected text after the JSON value of {key!r}",
    ),
)
"""What a JSON value must be once decoded: not too deep, alone on its last line."""


def _json_string(raw: str, following: list[str], key: str, lineno: int) -> tuple[object, int]:
    """A JSON string (a JSON text that opens with ``"`` can only be one)."""
    try:
        return json.loads(raw), 0
    except ValueError as e:
        raise _bad(lineno, f"the value of {key!r} is not a valid JSON string") from e


def _literal(raw: str, following: list[str], key: str, lineno: int) -> tuple[object, int]:
    """A single-quoted literal string."""
    return _single_quoted(raw, lineno), 0


def _plain(raw: str, following: list[str], key: str, lineno: int) -> tuple[object, int]:
    """Any other value: the trimmed text itself."""
    return raw, 0


_VALUE_KIND = re.compile(r"(?P<json>[\[{])|(?P<string>\")|(?P<literal>')|(?P<plain>)")
"""A value's kind, told by its first character."""

_VALUES: dict[str, Callable[[str, list[str], str, int], tuple[object, int]]] = {
    "json": _json_value,
    "string": _json_string,
    "literal": _literal,
    "plain": _plain,
}
"""How each kind of value is read: ``(raw, following lines, key, line number)`` to the
value and the number of following lines it took."""


def parse_frontmatter(text: str) -> tuple[dict[str, object], str]:
    """Split ``text`` into its frontmatter fields and its Markdown body.

    Grammar: the first line is ``---``; the block ends at the next ``---`` line. Inside,
    blank lines and lines starting with ``#`` are skipped; every other line is
    ``key: value`` with the key at column 0 (``[A-Za-z_][A-Za-z0-9_-]*``), each key once.
    A value starting with ``"`` is a JSON string; with ``'`` a literal string (``''`` is
    a quote); with ``[`` or ``{`` a JSON value that may continue on the next lines; any
    other value is a plain string, trimmed (empty allowed). Text without a leading ``---``
    line has no frontmatter. The values are unchecked JSON: each asset kind's rules check
    the keys they read. Raises :class:`FrontmatterError`.
    """
    lines = text.split("\n")
    if lines[0].rstrip() != "---":
        return {}, text
    end = next((i for i in range(1, len(lines)) if lines[i].rstrip() == "---"), None)
    if end is None:
        raise FrontmatterError(
            "unterminated_frontmatter", "the frontmatter opened on line 1 has no closing '---'"
        )
    block = [line.rstrip("\r") for line in lines[1:end]]
    fields: dict[str, object] = {}
    i = 0
    while i < len(block):
        line, lineno = block[i], i + 2
        i += 1
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = _ENTRY.match(line)
        if match is None:
            raise _bad(lineno, "expected 'key: value' with the key at the start of the line")
        key, raw = match.group(1), match.group(2).strip()
        if key in fields:
            raise _bad(lineno, f"the key {key!r} appears twice")
        kind = _VALUE_KIND.match(raw)
        assert kind is not None  # the empty "plain" alternative matches any text
        value, more = _VALUES[str(kind.lastgroup)](raw, block[i:], key, lineno)
        i += more
        fields[key] = value
    return fields, "\n".join(lines[end + 1 :])


# --- placeholders ----------------------------------------------------------------------


def placeholder_names(template: str, where: str) -> list[str]:
    """Return the placeholder names in ``template``, in order (repeats kept).

    Raises ``FrontmatterError("invalid_placeholder")`` when a ``{{`` opens no placeholder;
    ``where`` names the template in the message (``argv[1]``).
    """
    names = _PLACEHOLDER.findall(template)
    if template.count("{{") != len(names):
        raise FrontmatterError(
            "invalid_placeholder",
            f"{where} has a '{{{{' that does not open a '{{{{name}}}}' placeholder",
        )
    return names


def _missing(names: set[str]) -> ToolError:
    keys = sorted(names)
    return ToolError(
        "invalid_tool_args",
        f"missing input(s) for the template: {', '.join(keys)}",
        kind="missing_required_args",
        keys=keys,
    )


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))


def render_text(template: str, inputs: Mapping[str, object]) -> str:
    """Replace each placeholder in ``template`` with its input as text, in one pass.

    Strings are inserted verbatim, anything else as compact JSON (``5``, ``true``).
    Raises ``ToolError("invalid_tool_args", kind="missing_required_args", keys=[...])``.
    """
    missing = {n for n in _PLACEHOLDER.findall(template) if n not in inputs}
    if missing:
        raise _missing(missing)
    return _PLACEHOLDER.sub(lambda m: _as_text(inputs[m.group(1)]), template)


@functools.singledispatch
def render_value(value: Any, inputs: Mapping[str, object]) -> Any:
    """Render every string inside ``value`` (objects and lists at any depth; keys untouched).

    A string that is exactly one placeholder becomes the input's value with its type;
    anything but a string, an object or a list is kept as it is.
    """
    return value


@render_value.register
def _(value: str, inputs: Mapping[str, object]) -> Any:
    whole = _FULL_PLACEHOLDER.match(value)
    if whole is not None:
        if whole.group(1) not in inputs:
            raise _missing({whole.group(1)})
        return inputs[whole.group(1)]
    return render_text(value, inputs)


@render_value.register(dict)
def _(value: dict[Any, Any], inputs: Mapping[str, object]) -> Any:
    return {k: render_value(v, inputs) for k, v in value.items()}


@render_value.register(list)
def _(value: list[Any], inputs: Mapping[str, object]) -> Any:
    return [render_value(v, inputs) for v in value]
