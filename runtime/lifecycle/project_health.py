"""A running project's health, from the MCP servers that did not start.

``project.assets_loaded`` lists each asset that failed to load; the servers among them are
the project's problems, and ``diagnostics`` (through ``live_status``) reports the project
``degraded`` while it has any.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

from runtime.tools.base import LoadProblem

__all__ = ["health", "server_problems"]

_PROBLEM_FIELDS: tuple[Literal["reason", "exit_status", "stderr_tail", "hint"], ...] = (
    "reason",
    "exit_status",
    "stderr_tail",
    "hint",
)


def server_problems(errors: Iterable[LoadProblem]) -> list[dict[str, Any]]:
    """The MCP servers of ``project.assets_loaded``'s ``errors`` that failed to start.

    ``{server, reason, exit_status?, stderr_tail?, hint?}`` each; servers left out on
    purpose (``protocol_not_allowed``) are not problems.
    """
    return [
        {"server": e.get("key"), **{k: e[k] for k in _PROBLEM_FIELDS if k in e}}
        for e in errors
        if e.get("type") == "mcp_server"
        and not str(e.get("reason", "")).startswith("protocol_not_allowed")
    ]


def health(problems: list[dict[str, Any]]) -> dict[str, Any]:
    """``diagnostics``' health of a running project: ``ok``, or ``degraded`` and why.

    ``problems`` maps each server to ``{reason, exit_status?, stderr_tail?, hint?}`` (a
    mapping, so ``roost project diagnostics`` shows each stderr tail whole, line by line).
    """
    if not problems:
        return {"status": "ok"}
    by_server = {str(p["server"]): {k: v for k, v in p.items() if k != "server"} for p in problems}
    return {"status": "degraded", "problems": by_server}
