"""The ``mcp_servers`` option: external MCP servers whose tools a project offers.

Each entry is ``{name, command}`` (a stdio server: ``command`` is an argv list of
non-empty strings; a single string is refused, so no shell word splitting is ever
guessed) or ``{name, url}`` (streamable HTTP, ``http`` or ``https``), with an optional
``env`` object (stdio only) whose keys still pass ``tool_env_allowlist`` when the server
starts. The normalized entry is ``{name, command}`` or ``{name, url}`` plus ``env`` when
given, sorted by name.

A bad entry raises :class:`InvalidRuntimeOptError` with ``key="mcp_servers"``,
``reason="invalid_entry"``, its ``index`` and a stable ``problem``: :data:`PROBLEMS`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from runtime.errors import InvalidRuntimeOptError

__all__ = ["NAME_PATTERN", "PROBLEMS", "validate_mcp_servers"]

NAME_PATTERN = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")
"""A server name: lower case, starts with a letter, at most 32 characters (no dots)."""

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

_FIELDS = frozenset({"name", "command", "url", "env"})
_MAX_SERVERS = 32


def _bad(problem: str, message: str, index: int | None = None) -> InvalidRuntimeOptError:
    details: dict[str, Any] = {"problem": problem}
    if index is not None:
        details["index"] = index
        message = f"mcp_servers[{index}] {message}"
    return InvalidRuntimeOptError(message, key="mcp_servers", reason="invalid_entry", **details)


def _entry(index: int, entry: Any, seen: set[str]) -> dict[str, Any]:
    if not isinstance(entry, Mapping):
        raise _bad("expected_object", "must be an object {name, command} or {name, url}", index)
    unknown = sorted(str(k) for k in entry if k not in _FIELDS)
    if unknown:
        raise _bad("unknown_field", f"has unknown fields {unknown}", index)
    name = entry.get("name")
    if not isinstance(name, str) or not NAME_PATTERN.match(name):
        raise _bad(
            "invalid_name",
            f"name must match {NAME_PATTERN.pattern} (tools become mcp.<name>.<tool>), "
            f"got {name!r}",
            index,
        )
    if name in seen:
        raise _bad("duplicate_name", f"name {name!r} is used by an earlier entry", index)
    seen.add(name)
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
        url = entry["url"]
        if not isinstance(url, str) or not url.strip():
            raise _bad("invalid_url", f"url must be a non-empty string, got {url!r}", index)
        try:
            parts = urlsplit(url.strip())
        except ValueError as e:
            raise _bad("invalid_url", f"url {url!r} does not parse: {e}", index) from e
        if parts.scheme.lower() not in ("http", "https"):
            raise _bad("url_scheme_not_http", f"url must be http(s), got {url!r}", index)
        if not parts.hostname:
            raise _bad("invalid_url", f"url {url!r} has no host", index)
        out["url"] = url.strip()
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
    if not isinstance(value, list | tuple):
        raise _bad("expected_list", f"mcp_servers must be a list of objects, got {value!r}")
    if len(value) > _MAX_SERVERS:
        raise _bad("expected_list", f"mcp_servers holds at most {_MAX_SERVERS} servers")
    seen: set[str] = set()
    entries = [_entry(index, entry, seen) for index, entry in enumerate(value)]
    return sorted(entries, key=lambda e: str(e["name"]))
