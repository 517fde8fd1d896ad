"""The tool listing of ``mcp_servers`` at project start, in a short-lived child process.

:func:`list_servers` runs ``python -m runtime.tools.mcp_listing`` with the servers, the
root and the options as JSON on stdin; the child starts each server (confined as for
calls, :class:`runtime.tools.mcp_session.Connection`), lists its tools, stops it, and
prints ``{name: {tools: [...]} | {error: {...}}}``. The process that builds the registry
(the Project actor, which forks its children) so never starts a thread or an event loop.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from runtime.errors import ToolError
from runtime.tools.mcp_session import Connection
from runtime.tools.sdk_loop import child_answers, child_main, gather_by_name, short_error

__all__ = ["LIST_TIMEOUT_S", "list_servers"]

LIST_TIMEOUT_S = 20.0
"""Seconds the listing at project start may take for all servers together."""


async def _list_one(
    entry: Mapping[str, Any], root: str, options: Mapping[str, Any]
) -> dict[str, Any]:
    conn = Connection(entry, root, options)
    try:
        await conn.open()
        result = await conn.session.list_tools()
        tools = [
            {
                "name": tool.name,
                "description": tool.description or "",
                "input_schema": dict(tool.input_schema or {}),
            }
            for tool in result.tools
        ]
        return {"tools": tools}
    except ToolError as e:
        return {"error": {"code": e.code, "message": e.message, **e.details}}
    except Exception as e:
        return {"error": {"code": "tool_error", "message": short_error(e)}}
    finally:
        await conn.close()


async def _list_all(request: Mapping[str, Any]) -> dict[str, Any]:
    root, options = request["root"], request["options"]
    return await gather_by_name(
        list(request["servers"]), lambda e: _list_one(e, root, options), LIST_TIMEOUT_S, "tool list"
    )


def list_servers(
    servers: list[Mapping[str, Any]], root: str, options: Mapping[str, Any]
) -> dict[str, Any]:
    """``{name: {tools: [...]} | {error: {...}}}`` for every server, from a child process."""
    request = {"servers": servers, "root": root, "options": dict(options)}
    names = [str(s["name"]) for s in servers]
    return child_answers(__name__, request, names, LIST_TIMEOUT_S + 10, "MCP tool listing")


if __name__ == "__main__":
    child_main(_list_all)
