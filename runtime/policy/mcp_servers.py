"""The ``mcp_servers`` option: external MCP servers whose tools a project offers.

Each entry is ``{name, command}`` (a stdio server: ``command`` is an argv list of
non-empty strings; a single string is refused, so no shell word splitting is ever
guessed) or ``{name, url}`` (streamable HTTP, ``http`` or ``https``), with an optional
``env`` object (stdio only) whose keys still pass ``tool_env_allowlist`` when the server
starts. The normalized entry is ``{name, command}`` or ``{name, url}`` plus ``env`` when
given, sorted by name.

A bad entry raises :class:`InvalidRuntimeOptError` with ``key="mcp_servers"``,
``reason="invalid_entry"``, its ``index`` and a stable ``problem``: :data:`PROBLEMS`
(the checks shared with ``a2a_agents`` are :mod:`runtime.policy.remote_entries`').
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NotRequired, TypedDict

from runtime.policy.remote_entries import (
    NAME_PATTERN,
    EntryRule,
    entry_list,
    entry_name,
    entry_object,
    http_url,
    refuse_broken,
)

__all__ = ["NAME_PATTERN", "PROBLEMS", "McpServer", "validate_mcp_servers"]

PROBLEMS: frozenset[str] = frozenset(
    {
        "expected_list",
        "expected_object",
        "unknown_field",
        "invalid_name",
        "duplicate_name",
        "command_and_url",
        "no_command_or_url",
        "invalid_command",
        "invalid_url",
        "url_scheme_not_http",
        "invalid_env",
        "env_with_url",
    }
)
"""Every ``problem`` a refused ``mcp_servers`` entry can carry."""

_KEY = "mcp_servers"
_FIELDS = frozenset({"name", "command", "url", "env"})


class McpServer(TypedDict):
    """One normalized ``mcp_servers`` entry."""

    name: str
    """The middle of its tools' names (``mcp.<name>.<tool>``)."""
    command: NotRequired[list[str]]
    """A stdio server's argv."""
    url: NotRequired[str]
    """A streamable HTTP server's endpoint."""
    env: NotRequired[dict[str, str]]
    """A stdio server's extra environment, sorted by name."""


def _bad_command(command: Any) -> bool:
    return (
        not isinstance(command, list | tuple)
        or not command
        or not all(isinstance(a, str) and a and "\x00" not in a for a in command)
    )


def _bad_env(env: Any) -> bool:
    return not isinstance(env, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in env.items()
    )


_TARGET_RULES: tuple[EntryRule, ...] = (
    (
        lambda e: "command" in e and "url" in e,
        "command_and_url",
        lambda e: "has both command and url; give one",
    ),
    (
        lambda e: "command" not in e and "url" not in e,
        "no_command_or_url",
        lambda e: "needs a command (stdio) or a url (HTTP)",
    ),
    (
        lambda e: "command" in e and _bad_command(e["command"]),
        "invalid_command",
        lambda e: (
            "command must be a non-empty list of non-empty strings (an argv; a single "
            f"string is not split), got {e['command']!r}"
        ),
    ),
)
"""What an entry's ``command`` or ``url`` must be, in order: ``(broken, problem, message)``."""

_ENV_RULES: tuple[EntryRule, ...] = (
    (
        lambda e: "env" in e and "url" in e,
        "env_with_url",
        lambda e: "env is for stdio servers (command) only",
    ),
    (
        lambda e: "env" in e and _bad_env(e["env"]),
        "invalid_env",
        lambda e: "env must be an object of string values",
    ),
)
"""What an entry's ``env`` must be (checked after its ``url``)."""


def _entry(index: int, raw: Any, seen: set[str]) -> McpServer:
    entry = entry_object(_KEY, index, raw, _FIELDS, "{name, command} or {name, url}")
    name = entry_name(_KEY, index, entry, seen, "mcp.<name>.<tool>")
    refuse_broken(_KEY, _TARGET_RULES, entry, index)
    out: McpServer = {"name": name}
    if "command" in entry:
        out["command"] = list(entry["command"])
    else:
        out["url"] = http_url(_KEY, index, entry["url"])
    refuse_broken(_KEY, _ENV_RULES, entry, index)
    if "env" in entry:
        out["env"] = dict(sorted(entry["env"].items()))
    return out


def validate_mcp_servers(key: str, value: Any) -> list[McpServer]:
    """Validate and normalize ``mcp_servers`` (see the module doc); sorted by name."""
    del key  # always "mcp_servers"
    seen: set[str] = set()
    entries = [_entry(index, entry, seen) for index, entry in enumerate(entry_list(_KEY, value))]
    return sorted(entries, key=lambda e: e["name"])
