"""The ``a2a_agents`` option: remote A2A agents a project may delegate to.

Each entry is ``{name, url}``: ``url`` is the agent's base ``http(s)`` URL, where its agent
card is served (``<url>/.well-known/agent-card.json``); the agent becomes the tool
``a2a.<name>.send`` (:mod:`runtime.tools.a2a_client.tools`). The normalized entries are
sorted by name.

A bad entry raises :class:`InvalidRuntimeOptError` with ``key="a2a_agents"``,
``reason="invalid_entry"``, its ``index`` and a stable ``problem``: :data:`PROBLEMS`.
"""

from __future__ import annotations

from typing import Any, TypedDict

from runtime.policy.remote_entries import (
    entry_error,
    entry_list,
    entry_name,
    entry_object,
    http_url,
)

__all__ = ["PROBLEMS", "A2AAgent", "validate_a2a_agents"]

PROBLEMS: frozenset[str] = frozenset(
    {
        "expected_list",
        "expected_object",
        "unknown_field",
        "invalid_name",
        "duplicate_name",
        "no_url",
        "invalid_url",
        "url_scheme_not_http",
    }
)
"""Every ``problem`` a refused ``a2a_agents`` entry can carry."""

_KEY = "a2a_agents"
_FIELDS = frozenset({"name", "url"})


class A2AAgent(TypedDict):
    """One normalized ``a2a_agents`` entry."""

    name: str
    """The middle of its tool's name (``a2a.<name>.send``)."""
    url: str
    """The agent's base URL, where its card is served."""


def _entry(index: int, raw: Any, seen: set[str]) -> A2AAgent:
    entry = entry_object(_KEY, index, raw, _FIELDS, "{name, url}")
    name = entry_name(_KEY, index, entry, seen, "a2a.<name>.send")
    if "url" not in entry:
        raise entry_error(_KEY, "no_url", "needs the agent's url (where its card is)", index)
    return {"name": name, "url": http_url(_KEY, index, entry["url"])}


def validate_a2a_agents(key: str, value: Any) -> list[A2AAgent]:
    """Validate and normalize ``a2a_agents`` (see the module doc); sorted by name."""
    del key  # always "a2a_agents"
    seen: set[str] = set()
    entries = [_entry(index, entry, seen) for index, entry in enumerate(entry_list(_KEY, value))]
    return sorted(entries, key=lambda e: e["name"])
