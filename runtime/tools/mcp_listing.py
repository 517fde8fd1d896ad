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
from runtime.guard.safe_read import read_pipe
from runtime.tools.mcp_connection import Connection, short_error

__all__ = ["LIST_TIMEOUT_S", "MAX_LISTING_BYTES", "MAX_SCHEMA_BYTES", "MAX_TOOLS", "list_servers"]

LIST_TIMEOUT_S = 20.0
"""Seconds the listing at project start may take for all servers together."""

MAX_TOOLS = 256
"""Most tools kept from one server; the rest are left out."""

MAX_SCHEMA_BYTES = 64 * 1024
"""Largest input schema (as JSON) of a tool that is kept; a tool with a larger one is left out."""

MAX_LISTING_BYTES = 16 * 1024 * 1024
"""Most bytes of the listing child's answer read; past it every server is an error."""

_MAX_DESCRIPTION = 1024


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
        tools = []
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
        # -P and cwd "/": the daemon's working directory may be a project root (`roost
        # daemon start --foreground` run there), and `python -m` would import a planted
        # `runtime/` package from it, outside every sandbox.
        proc = subprocess.Popen(
            [sys.executable, "-P", "-m", "runtime.tools.mcp_listing"],
            cwd="/",
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        assert proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.write(json.dumps(request).encode())
            proc.stdin.close()
            data, problem = read_pipe(proc.stdout.fileno(), MAX_LISTING_BYTES, LIST_TIMEOUT_S + 10)
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            proc.stdout.close()
        if problem is not None:
            raise ValueError(
                f"no complete answer ({'over 16 MiB' if problem == 'too_large' else 'timeout'})"
            )
        answer: dict[str, Any] = json.loads(data)
    except (OSError, ValueError) as e:
        error = {"code": "tool_error", "message": f"the MCP tool listing failed: {short_error(e)}"}
        return {str(s["name"]): {"error": error} for s in servers}
    return answer


def _main() -> None:
    request = json.loads(sys.stdin.read())
    answer = asyncio.run(_list_all(request))
    sys.stdout.write(json.dumps(answer))


if __name__ == "__main__":
    _main()
