"""The tool listing of ``mcp_servers`` at project start, in a short-lived child process.

:func:`list_servers` runs ``python -m runtime.tools.mcp_client.listing`` with the servers, the
root and the options as JSON on stdin; the child starts each server (confined as for
calls, :class:`runtime.tools.mcp_client.connection.Connection`), lists its tools, stops it, and
prints ``{name: {tools: [...]} | {error: {...}}}`` (with ``removed``: what the check took
away). The process that builds the registry
(the Project actor, which forks its children) so never starts a thread or an event loop.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any, TypedDict

from runtime.errors import ToolError
from runtime.tools.mcp_client.connection import Connection
from runtime.tools.sdk_loop import (
    MAX_ANSWER_BYTES,
    Failed,
    child_answers,
    child_main,
    gather_by_name,
    short_error,
)

__all__ = [
    "LIST_TIMEOUT_S",
    "MAX_LISTING_BYTES",
    "MAX_SCHEMA_BYTES",
    "MAX_TOOLS",
    "ListedTool",
    "ServerListing",
    "list_servers",
]

LIST_TIMEOUT_S = 20.0
"""Seconds the listing at project start may take for all servers together."""

MAX_TOOLS = 256
"""Most tools kept from one server; the rest are left out."""

MAX_SCHEMA_BYTES = 64 * 1024
"""Largest input schema (as JSON) of a tool that is kept; a tool with a larger one is left out."""

MAX_LISTING_BYTES = MAX_ANSWER_BYTES
"""Most bytes of the listing child's answer read; past it every server is an error."""

_MAX_DESCRIPTION = 1024


class ListedTool(TypedDict):
    """One tool a server listed, bounded."""

    name: str
    """Its name on the server."""
    description: str
    """Its description, at most 1024 characters."""
    input_schema: dict[str, object]
    """Its input schema (at most :data:`MAX_SCHEMA_BYTES` as JSON)."""


class ServerListing(TypedDict, total=False):
    """What the listing child says of one server: its tools or an error."""

    tools: list[ListedTool]
    """At most :data:`MAX_TOOLS` tools."""
    error: dict[str, object]
    """Why it has none: ``{code, message}`` and the error's details."""
    removed: list[str]
    """What the post-run check removed at the server's exit (relative to the root)."""


async def _list_one(
    entry: Mapping[str, Any], root: str, options: Mapping[str, Any]
) -> ServerListing:
    conn = Connection(entry, root, options)
    answer: ServerListing = {}
    try:
        answer = await _tools_of(conn)
    finally:
        await conn.close()
    if conn.removed:  # the post-run check at the server's exit removed what it planted
        answer["removed"] = [os.path.relpath(p, os.path.realpath(root)) for p in conn.removed]
    return answer


async def _tools_of(conn: Connection) -> ServerListing:
    try:
        await conn.open()
        result = await conn.session.list_tools()
        tools: list[ListedTool] = []
        for tool in result.tools[:MAX_TOOLS]:  # a server is a tool process: bound what it says
            schema = dict(tool.input_schema or {})
            if len(json.dumps(schema)) > MAX_SCHEMA_BYTES:
                continue
            description = (tool.description or "")[:_MAX_DESCRIPTION]
            tools.append({"name": tool.name, "description": description, "input_schema": schema})
        return {"tools": tools}
    except ToolError as e:
        return {"error": {"code": e.code, "message": e.message, **e.details}}
    except Exception as e:
        return {"error": {"code": "tool_error", "message": short_error(e)}}


async def _list_all(request: Mapping[str, Any]) -> dict[str, ServerListing | Failed]:
    root, options = request["root"], request["options"]
    return await gather_by_name(
        list(request["servers"]), lambda e: _list_one(e, root, options), LIST_TIMEOUT_S, "tool list"
    )


def list_servers(
    servers: list[Mapping[str, Any]], root: str, options: Mapping[str, Any]
) -> Mapping[str, Any]:
    """``{name: {tools: [...]} | {error: {...}}}`` for every server, from a child process."""
    request = {"servers": servers, "root": root, "options": dict(options)}
    names = [str(s["name"]) for s in servers]
    return child_answers(__name__, request, names, LIST_TIMEOUT_S + 10, "MCP tool listing")


if __name__ == "__main__":
    child_main(_list_all)
