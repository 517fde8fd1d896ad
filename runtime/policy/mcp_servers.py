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
from typing import Any

from runtime.errors import InvalidRuntimeOptError
from runtime.policy.remote_entries import (
    NAME_PATTERN,
    entry_error,
    entry_list,
    entry_name,
    entry_object,
    http_url,
)

__all__ = ["NAME_PATTERN", "PROBLEMS", "validate_mcp_servers"]

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


def _bad(problem: str, message: str, index: int) -> InvalidRuntimeOptError:
    return entry_error(_KEY, problem, message, index)


def _entry(index: int, raw: Any, seen: set[str]) -> dict[str, Any]:
    entry = entry_object(_KEY, index, raw, _FIELDS, "{name, command} or {name, url}")
    name = entry_name(_KEY, index, entry, seen, "mcp.<name>.<tool>")
    has_command, has_url = "command" in entry, "url" in entry
    if has_command and has_url:
        raise _bad("command_and_url", "has both command and url; give one", index)
    if not has_command and not has_url:
        raise _bad("no_command_or_url", "needs a command (stdio) or a url (HTTP)", index)
    out: dict[str, Any] = {"name": name}
    if has_command:
        command = entry["command"]
        if (
            not isinstance(command, list | tuple)
            or not command
            or not all(isinstance(a, str) and a and "\x00" not in a for a in command)
        ):
            raise _bad(
                "invalid_command",
                "command must be a non-empty list of non-empty strings (an argv; a single "
                f"string is not split), got {command!r}",
                index,
            )
        out["command"] = list(command)
    else:
        out["url"] = http_url(_KEY, index, entry["url"])
    if "env" in entry:
        env = entry["env"]
        if has_url:
            raise _bad("env_with_url", "env is for stdio servers (command) only", index)
        if not isinstance(env, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in env.items()
        ):
            raise _bad("invalid_env", "env must be an object of string values", index)
        out["env"] = dict(sorted(env.items()))
    return out


def validate_mcp_servers(key: str, value: Any) -> list[dict[str, Any]]:
    """Validate and normalize ``mcp_servers`` (see the module doc); sorted by name."""
    del key  # always "mcp_servers"
    seen: set[str] = set()
    entries = [_entry(index, entry, seen) for index, entry in enumerate(entry_list(_KEY, value))]
    return sorted(entries, key=lambda e: str(e["name"]))
