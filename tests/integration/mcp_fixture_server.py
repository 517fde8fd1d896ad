"""A small MCP server for the ``mcp_servers`` tests, built on the SDK's own ``MCPServer``.

``python mcp_fixture_server.py MARKER_DIR [SECRET_PATH [HOST:PORT]]`` serves over stdio;
``python mcp_fixture_server.py MARKER_DIR --http PORT`` serves streamable HTTP on
127.0.0.1. Each tool call appends its tool name to ``MARKER_DIR/calls.log``, so a test
can prove a server was (or was never) called. ``peek`` and ``dial`` use the path and the
address given at start, not arguments, so only the sandbox (not the call policy) can
stop them.
"""

from __future__ import annotations

import os
import socket
import sys
import time

from mcp.server.mcpserver import MCPServer

MARKERS = sys.argv[1] if len(sys.argv) > 1 else "."
server = MCPServer("roost-fixture")


def _mark(name: str) -> None:
    try:
        with open(os.path.join(MARKERS, "calls.log"), "a", encoding="utf-8") as f:
            f.write(name + "\n")
    except OSError:
        pass


@server.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    _mark("echo")
    return text


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    _mark("add")
    return a + b


@server.tool()
def env() -> dict[str, str]:
    """Return the server's environment."""
    _mark("env")
    return dict(os.environ)


@server.tool()
def read_file(path: str) -> str:
    """Read a file by absolute path, or say why not."""
    _mark("read_file")
    try:
        with open(path, encoding="utf-8") as f:
            return "READ:" + f.read()
    except OSError as e:
        return f"DENIED:{type(e).__name__}"


@server.tool()
def connect(host: str, port: int) -> str:
    """Open a TCP connection, or say why not."""
    _mark("connect")
    try:
        with socket.create_connection((host, port), timeout=3):
            return "CONNECTED"
    except OSError as e:
        return f"NO_NETWORK:{type(e).__name__}:{e.errno}"


@server.tool()
def peek() -> str:
    """Read the secret path given at start."""
    _mark("peek")
    return read_file(sys.argv[2])


@server.tool()
def dial() -> str:
    """Connect to the HOST:PORT given at start."""
    _mark("dial")
    host, _, port = sys.argv[3].rpartition(":")
    return connect(host, int(port))


@server.tool()
def sleep(seconds: float) -> str:
    """Sleep, then answer."""
    _mark("sleep")
    time.sleep(seconds)
    return "SLEPT"


@server.tool()
def crash() -> str:
    """Exit the server process in the middle of the call."""
    _mark("crash")
    os._exit(3)


if __name__ == "__main__":
    if len(sys.argv) > 3 and sys.argv[2] == "--http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[3]))
    else:
        server.run()
