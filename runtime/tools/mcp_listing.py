"""The tool listing of ``mcp_servers`` at project start, in a short-lived child process.

:func:`list_servers` runs ``python -m runtime.tools.mcp_listing`` with the servers, the
root and the options as JSON on stdin; the child starts each server (confined as for
calls, :class:`runtime.tools.mcp_session.Connection`), lists its tools, stops it, and
prints ``{name: {tools: [...]} | {error: {...}}}`` (with ``removed``: what the check took
away). The process that builds the registry
(the Project actor, which forks its children) so never starts a thread or an event loop.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Mapping
from typing import Any

from runtime.errors import ToolError
from runtime.tools.mcp_connection import Connection, short_error

__all__ = ["LIST_TIMEOUT_S", "list_servers"]

LIST_TIMEOUT_S = 20.0
"""Seconds the listing at project start may take for all servers together."""


async def _list_one(
    entry: Mapping[str, Any], root: str, options: Mapping[str, Any]
) -> dict[str, Any]:
    conn = Connection(entry, root, options)
    answer: dict[str, Any] = {}
    try:
        answer = await _tools_of(conn)
    finally:
        await conn.close()
    if conn.removed:  # the post-run check at the server's exit removed what it planted
        answer["removed"] = [os.path.relpath(p, os.path.realpath(root)) for p in conn.removed]
    return answer


async def _tools_of(conn: Connection) -> dict[str, Any]:
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


async def _list_all(request: Mapping[str, Any]) -> dict[str, Any]:
    servers = list(request["servers"])
    results = await asyncio.gather(
        *(
            asyncio.wait_for(_list_one(e, request["root"], request["options"]), LIST_TIMEOUT_S)
            for e in servers
        ),
        return_exceptions=True,
    )
    out: dict[str, Any] = {}
    for entry, result in zip(servers, results, strict=True):
        if isinstance(result, BaseException):
            message = (
                f"no tool list within {LIST_TIMEOUT_S:g} s"
                if isinstance(result, TimeoutError)
                else short_error(result)
            )
            out[str(entry["name"])] = {"error": {"code": "tool_error", "message": message}}
        else:
            out[str(entry["name"])] = result
    return out


def list_servers(
    servers: list[Mapping[str, Any]], root: str, options: Mapping[str, Any]
) -> dict[str, Any]:
    """``{name: {tools: [...]} | {error: {...}}}`` for every server, from a child process."""
    request = {"servers": servers, "root": root, "options": dict(options)}
    try:
        done = subprocess.run(
            [sys.executable, "-m", "runtime.tools.mcp_listing"],
            input=json.dumps(request),
            capture_output=True,
            text=True,
            timeout=LIST_TIMEOUT_S + 10,
            check=False,
        )
        answer: dict[str, Any] = json.loads(done.stdout)
    except (OSError, ValueError, subprocess.TimeoutExpired) as e:
        error = {"code": "tool_error", "message": f"the MCP tool listing failed: {short_error(e)}"}
        return {str(s["name"]): {"error": error} for s in servers}
    return answer


def _main() -> None:
    request = json.loads(sys.stdin.read())
    answer = asyncio.run(_list_all(request))
    sys.stdout.write(json.dumps(answer))


if __name__ == "__main__":
    _main()
