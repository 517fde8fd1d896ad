"""Roost as an MCP server: ``roost mcp serve`` (SPEC section 12), a client of the daemon.

General layout: ``translate`` (the plain core: tool descriptors → MCP tools, ``run_tool``
results → MCP tool results, the ``roost://`` resource URIs, the loopback rule for
``--http``), ``loopback`` (over HTTP, only the server's own user may connect) and ``server``
(the MCP SDK's low-level ``Server`` whose handlers call the daemon through
``runtime.client``; stdio and streamable HTTP). Nothing here decides or runs a
tool: every call is a ``run_tool`` request with ``source: mcp``, served by the daemon's one
tool-call pipeline.
"""

from runtime.mcp_server.server import RoostMCP, bind_loopback, serve_http, serve_stdio
from runtime.mcp_server.translate import (
    AddressNotLoopbackError,
    call_result,
    mcp_tool,
    parse_http_address,
)

__all__ = [
    "AddressNotLoopbackError",
    "RoostMCP",
    "bind_loopback",
    "call_result",
    "mcp_tool",
    "parse_http_address",
    "serve_http",
    "serve_stdio",
]
