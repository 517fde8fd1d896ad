"""The paths in a tool call's arguments, however they are wrapped.

:func:`extract_paths` is what the policy checks for a tool no trusted spec describes (an
MCP tool's, a command or workflow asset's) and for the values of a built-in tool's other
arguments: a path hidden in a nested object, a JSON string, ``key=value`` text or a
``file:`` URL is found like a plain one. Each kind of JSON value is searched in its own
way (:data:`_VISITS`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any
from urllib.parse import unquote, urlsplit

from runtime.guard.shapes.safe_json import json_document, json_type_name

__all__ = ["PATH_KEYS", "extract_paths"]

PATH_KEYS = frozenset(
    {
        "path",
        "paths",
        "file",
        "files",
        "filename",
        "filepath",
        "cwd",
        "dir",
        "dirs",
        "directory",
        "workdir",
        "workingdir",
        "target",
        "source",
        "src",
        "dest",
        "dst",
        "destination",
    }
)
"""Argument keys whose values are paths, compared lower-cased with ``_`` and ``-`` removed.

The name heuristics for arguments no trusted spec describes (an MCP tool's, a command or
workflow asset's) and for keys inside text or nested objects; a built-in tool declares its
path arguments (``ToolSpec.path_args``)."""

_KV_RE = re.compile(
    r"(?<!\w)(path|paths|file|files|filename|file_path|filepath|cwd|dir|directory|workdir"
    r"|target|source|src|dest|dst|destination)\s*=\s*"
    r"(?:\"([^\"]*)\"|'([^']*)'|([^\s,;&|]+))",
    re.IGNORECASE,
)
_MAX_DEPTH = 32
_MAX_NODES = 10_000


def _is_path_key(key: object) -> bool:
    return isinstance(key, str) and key.lower().replace("_", "").replace("-", "") in PATH_KEYS


def extract_paths(args: Any, *, path_keys: Collection[str] | None = None) -> list[str]:
    """Every path-like value in ``args``, in first-seen order, without duplicates.

    Found: values of keys named like ``path``/``file``/``cwd``/``dir``/``target``/``source``/
    ``dest`` (see :data:`PATH_KEYS`) at any depth, strings in lists under them, the contents
    of JSON-encoded strings (objects and arrays, parsed and searched the same way),
    ``key=value`` text in any string (``"path=../../etc/passwd"``, ``--cwd='/x'``), and
    ``file:`` URLs. Nesting deeper than 32 levels or beyond 10,000 values is not searched.

    ``path_keys`` (a trusted spec's declared path arguments): the top-level keys of
    ``args`` that are paths, whatever they are called; the other top-level keys are not
    paths by their name, only by what their values hold.
    """
    finder = _PathFinder(path_keys)
    finder.visit(args, False, 0)
    return list(finder.found)


class _PathFinder:
    """One search of :func:`extract_paths`: what it found, and how many values it may visit."""

    def __init__(self, path_keys: Collection[str] | None) -> None:
        self.path_keys = path_keys
        self.found: dict[str, None] = {}
        self.budget = _MAX_NODES

    def add(self, value: str) -> None:
        if value:
            self.found.setdefault(value, None)

    def visit(self, value: Any, in_path_key: bool, depth: int) -> None:
        self.budget -= 1
        if depth > _MAX_DEPTH or self.budget < 0:
            return
        _VISITS.get(json_type_name(value), _PathFinder.scalar)(self, value, in_path_key, depth)

    def text(self, text: str, in_path_key: bool, depth: int) -> None:
        if in_path_key:
            self.add(text)
        if text.startswith("file:"):
            self.add(unquote(urlsplit(text).path))
        for match in _KV_RE.finditer(text):
            self.add(next(g for g in match.groups()[1:] if g is not None))
        parsed = json_document(text)
        if parsed is not None:
            self.visit(parsed, in_path_key, depth + 1)

    def members(self, value: Mapping[Any, Any], in_path_key: bool, depth: int) -> None:
        for key, item in value.items():
            self.visit(item, self.is_path_key(key, depth), depth + 1)

    def elements(self, value: Sequence[Any], in_path_key: bool, depth: int) -> None:
        for item in value:
            self.visit(item, in_path_key, depth + 1)

    def scalar(self, value: Any, in_path_key: bool, depth: int) -> None:
        """A number, boolean or null holds no path."""

    def is_path_key(self, key: object, depth: int) -> bool:
        if self.path_keys is not None and depth == 0:
            return key in self.path_keys
        return _is_path_key(key)


_VISITS: dict[str, Callable[[_PathFinder, Any, bool, int], None]] = {
    "string": _PathFinder.text,
    "object": _PathFinder.members,
    "array": _PathFinder.elements,
}
"""What a value of each JSON type is searched for (other values hold no path)."""
