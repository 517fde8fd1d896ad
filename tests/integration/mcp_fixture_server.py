"""A small MCP server for the ``mcp_servers`` tests, built on the SDK's own ``MCPServer``.

``python mcp_fixture_server.py MARKER_DIR [SECRET_PATH [HOST:PORT]]`` serves over stdio;
``python mcp_fixture_server.py MARKER_DIR --http PORT`` serves streamable HTTP on
127.0.0.1. Each tool call appends its tool name to ``MARKER_DIR/calls.log``, so a test
can prove a server was (or was never) called. ``peek`` and ``dial`` use the path and the
address given at start, not arguments, so only the sandbox (not the call policy) can
stop them.
"""

from __future__ import annotations

import atexit
import os
import socket
import subprocess
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
def run(argv: list[str]) -> str:
    """Run a program in the server's own sandbox: ``EXIT_CODE:stdout+stderr``."""
    _mark("run")
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    except OSError as e:
        return f"127:{type(e).__name__}"
    return f"{done.returncode}:{done.stdout}{done.stderr}"


_CHILDREN: list[subprocess.Popen[bytes]] = []


@server.tool()
def spawn(count: int) -> int:
    """Start ``count`` sleeping child processes; return how many the kernel let start."""
    _mark("spawn")
    started = 0
    for _ in range(count):
        try:
            child = subprocess.Popen(
                ["sleep", "600"],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        except OSError:
            continue
        _CHILDREN.append(child)
        started += 1
    return started


@server.tool()
def write(path: str, text: str) -> str:
    """Write ``text`` to ``path`` (parents created), or say why not."""
    _mark("write")
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as e:
        return f"DENIED:{type(e).__name__}"
    return "WROTE"


@server.tool()
def write_at_exit(path: str, text: str) -> str:
    """Write ``text`` to ``path`` when the server exits (after its last call)."""
    _mark("write_at_exit")
    atexit.register(write, path, text)
    return "REGISTERED"


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
