"""What the options that name remote endpoints (``mcp_servers``, ``a2a_agents``) check alike.

Each such option is a list of objects; each object's ``name`` becomes the middle of its
tools' names (``mcp.<name>.<tool>``, ``a2a.<name>.send``) and an HTTP endpoint is a
``url``. A bad entry raises :class:`InvalidRuntimeOptError` with the option as ``key``,
``reason="invalid_entry"``, the entry's ``index`` and a stable ``problem`` (each option's
module lists its own).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, cast
from urllib.parse import urlsplit

from runtime.errors import InvalidRuntimeOptError

__all__ = [
    "MAX_ENTRIES",
    "NAME_PATTERN",
    "EntryRule",
    "entry_error",
    "entry_list",
    "entry_name",
    "entry_object",
    "http_url",
    "refuse_broken",
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


EntryRule = tuple[Callable[[Any], bool], str, Callable[[Any], str]]
"""``(broken, problem, message)``: when a value is refused, its ``problem`` and message."""


def refuse_broken(
    key: str, rules: tuple[EntryRule, ...], value: Any, index: int | None = None
) -> None:
    """Refuse ``value`` (of option ``key``, its entry ``index``) for the first rule it breaks."""
    for broken, problem, message in rules:
        if broken(value):
            raise entry_error(key, problem, message(value), index)


def entry_list(key: str, value: Any) -> list[Any]:
    """``value`` as a list of at most :data:`MAX_ENTRIES` entries (``expected_list``)."""
    rules: tuple[EntryRule, ...] = (
        (
            lambda v: not isinstance(v, list | tuple),
            "expected_list",
            lambda v: f"{key} must be a list of objects, got {v!r}",
        ),
        (
            lambda v: len(v) > MAX_ENTRIES,
            "expected_list",
            lambda v: f"{key} holds at most {MAX_ENTRIES} entries",
        ),
    )
    refuse_broken(key, rules, value)
    return list(value)


def _unknown(entry: Mapping[str, Any], fields: frozenset[str]) -> list[str]:
    return sorted(str(k) for k in entry if k not in fields)


def entry_object(
    key: str, index: int, entry: Any, fields: frozenset[str], shape: str
) -> Mapping[str, Any]:
    """``entry`` as an object of known ``fields`` (``expected_object``, ``unknown_field``)."""
    rules: tuple[EntryRule, ...] = (
        (
            lambda e: not isinstance(e, Mapping),
            "expected_object",
            lambda e: f"must be an object {shape}",
        ),
        (
            lambda e: bool(_unknown(e, fields)),
            "unknown_field",
            lambda e: f"has unknown fields {_unknown(e, fields)}",
        ),
    )
    refuse_broken(key, rules, entry, index)
    return cast(Mapping[str, Any], entry)


def entry_name(key: str, index: int, entry: Mapping[str, Any], seen: set[str], tools: str) -> str:
    """The entry's unique ``name`` (``invalid_name``, ``duplicate_name``); ``tools`` shows use."""
    rules: tuple[EntryRule, ...] = (
        (
            lambda n: not isinstance(n, str) or not NAME_PATTERN.match(n),
            "invalid_name",
            lambda n: f"name must match {NAME_PATTERN.pattern} (tools become {tools}), got {n!r}",
        ),
        (
            lambda n: n in seen,
            "duplicate_name",
            lambda n: f"name {n!r} is used by an earlier entry",
        ),
    )
    name: Any = entry.get("name")
    refuse_broken(key, rules, name, index)
    seen.add(name)
    return str(name)


def http_url(key: str, index: int, url: Any) -> str:
    """An ``http(s)`` URL with a host, stripped (``invalid_url``, ``url_scheme_not_http``).

    Only its shape: whether the egress policy lets it through is judged when it is used.
    """
    refuse_broken(key, _URL_TEXT, url, index)
    try:
        parts = urlsplit(url.strip())
    except ValueError as e:
        raise entry_error(key, "invalid_url", f"url {url!r} does not parse: {e}", index) from e
    refuse_broken(key, _URL_PARTS, (url, parts), index)
    return str(url.strip())


_URL_TEXT: tuple[EntryRule, ...] = (
    (
        lambda url: not isinstance(url, str) or not url.strip(),
        "invalid_url",
        lambda url: f"url must be a non-empty string, got {url!r}",
    ),
)
"""What an entry's ``url`` must be before it is parsed."""

_URL_PARTS: tuple[EntryRule, ...] = (
    (
        lambda given: given[1].scheme.lower() not in ("http", "https"),
        "url_scheme_not_http",
        lambda given: f"url must be http(s), got {given[0]!r}",
    ),
    (
        lambda given: not given[1].hostname,
        "invalid_url",
        lambda given: f"url {given[0]!r} has no host",
    ),
)
"""What a parsed ``url`` (with the text it was parsed from) must be, in order."""
