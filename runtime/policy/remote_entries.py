"""What the options that name remote endpoints (``mcp_servers``, ``a2a_agents``) check alike.

Each such option is a list of objects; each object's ``name`` becomes the middle of its
tools' names (``mcp.<name>.<tool>``, ``a2a.<name>.send``) and an HTTP endpoint is a
``url``. A bad entry raises :class:`InvalidRuntimeOptError` with the option as ``key``,
``reason="invalid_entry"``, the entry's ``index`` and a stable ``problem`` (each option's
module lists its own).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from runtime.errors import InvalidRuntimeOptError

__all__ = [
    "MAX_ENTRIES",
    "NAME_PATTERN",
    "entry_error",
    "entry_list",
    "entry_name",
    "entry_object",
    "http_url",
]

NAME_PATTERN = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")
"""An entry's name: lower case, starts with a letter, at most 32 characters (no dots)."""

MAX_ENTRIES = 32
"""Entries one option may hold."""


def entry_error(
    key: str, problem: str, message: str, index: int | None = None
) -> InvalidRuntimeOptError:
    """The refusal of option ``key`` (its entry ``index``, when one is to blame)."""
    details: dict[str, str | int] = {"problem": problem}
    if index is not None:
        details["index"] = index
        message = f"{key}[{index}] {message}"
    return InvalidRuntimeOptError(message, key=key, reason="invalid_entry", **details)


def entry_list(key: str, value: Any) -> list[Any]:
    """``value`` as a list of at most :data:`MAX_ENTRIES` entries (``expected_list``)."""
    if not isinstance(value, list | tuple):
        raise entry_error(key, "expected_list", f"{key} must be a list of objects, got {value!r}")
    if len(value) > MAX_ENTRIES:
        raise entry_error(key, "expected_list", f"{key} holds at most {MAX_ENTRIES} entries")
    return list(value)


def entry_object(
    key: str, index: int, entry: Any, fields: frozenset[str], shape: str
) -> Mapping[str, Any]:
    """``entry`` as an object of known ``fields`` (``expected_object``, ``unknown_field``)."""
    if not isinstance(entry, Mapping):
        raise entry_error(key, "expected_object", f"must be an object {shape}", index)
    unknown = sorted(str(k) for k in entry if k not in fields)
    if unknown:
        raise entry_error(key, "unknown_field", f"has unknown fields {unknown}", index)
    return entry


def entry_name(key: str, index: int, entry: Mapping[str, Any], seen: set[str], tools: str) -> str:
    """The entry's unique ``name`` (``invalid_name``, ``duplicate_name``); ``tools`` shows use."""
    name = entry.get("name")
    if not isinstance(name, str) or not NAME_PATTERN.match(name):
        raise entry_error(
            key,
            "invalid_name",
            f"name must match {NAME_PATTERN.pattern} (tools become {tools}), got {name!r}",
            index,
        )
    if name in seen:
        raise entry_error(
            key, "duplicate_name", f"name {name!r} is used by an earlier entry", index
        )
    seen.add(name)
    return name


def http_url(key: str, index: int, url: Any) -> str:
    """An ``http(s)`` URL with a host, stripped (``invalid_url``, ``url_scheme_not_http``).

    Only its shape: whether the egress policy lets it through is judged when it is used.
    """
    if not isinstance(url, str) or not url.strip():
        raise entry_error(key, "invalid_url", f"url must be a non-empty string, got {url!r}", index)
    try:
        parts = urlsplit(url.strip())
    except ValueError as e:
        raise entry_error(key, "invalid_url", f"url {url!r} does not parse: {e}", index) from e
    if parts.scheme.lower() not in ("http", "https"):
        raise entry_error(key, "url_scheme_not_http", f"url must be http(s), got {url!r}", index)
    if not parts.hostname:
        raise entry_error(key, "invalid_url", f"url {url!r} has no host", index)
    return url.strip()
