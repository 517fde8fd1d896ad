"""``roost mcp serve PROJECT [--conversation CONV] [--http HOST:PORT]`` (SPEC section 12).

Serves the project's tools and its timelines and incident reports as an MCP server
(``runtime.mcp_server``), over stdio by default: stdout carries only the protocol, and
everything for people goes to stderr. Before serving, the daemon must answer (exit 3,
``daemon_unreachable``), the project must run (exit 1, ``project_not_found``) and
``--conversation`` must exist (exit 1, ``conversation_not_found``); ``--http`` takes a loopback
``HOST:PORT`` (exit 2, ``usage``, for another shape; exit 1, ``address_not_loopback``, for
another host).
"""

from __future__ import annotations

import argparse
from typing import Any

from runtime.cli.commands import EXIT_OK
from runtime.cli.format import UsageError

__all__ = ["add_mcp_commands", "cmd_mcp_serve"]


def add_mcp_commands(group: Any, leaf: Any) -> None:
    """Add ``mcp serve`` under the ``mcp`` command group (``runtime.cli.app``)."""
    p: argparse.ArgumentParser = leaf(
        group,
        "serve",
        cmd_mcp_serve,
        "serve a project's tools, timelines and incident reports as an MCP server (stdio)",
        "roost mcp serve p1 --conversation c1",
    )
    p.add_argument("project", metavar="PROJECT")
    p.add_argument(
        "--conversation",
        metavar="CONV",
        help="record the calls in this conversation (default: a new mcp-... one on the first call)",
    )
    p.add_argument(
        "--http",
        metavar="HOST:PORT",
        help="serve streamable HTTP at http://HOST:PORT/mcp instead of stdio; loopback only "
        "(127.0.0.1, [::1], localhost)",
    )


def cmd_mcp_serve(ns: argparse.Namespace) -> int:
    """``roost mcp serve PROJECT [--conversation CONV] [--http HOST:PORT]``."""
    import anyio  # noqa: PLC0415 - the MCP SDK is loaded by this command only

    from runtime.client import Client  # noqa: PLC0415
    from runtime.mcp_server import (  # noqa: PLC0415
        RoostMCP,
        bind_loopback,
        parse_http_address,
        serve_http,
        serve_stdio,
    )
    from runtime.mcp_server.oneline import route_logging  # noqa: PLC0415
    from runtime.mcp_server.server import load_http  # noqa: PLC0415

    route_logging("mcp")

    address: tuple[str, int] | None = None
    if ns.http is not None:
        try:
            address = parse_http_address(ns.http)  # AddressNotLoopbackError: exit 1
        except ValueError as e:
            raise UsageError(f"argument --http: {e} (see `roost mcp serve --help`)") from e
    mcp = RoostMCP(Client.connect(ns.home), ns.project, ns.conversation)
    try:
        mcp.check()
        if address is None:
            anyio.run(serve_stdio, mcp)
        else:
            load_http()
            sock = bind_loopback(*address)
            try:
                anyio.run(serve_http, mcp, sock)
            finally:
                sock.close()
    finally:
        mcp.close()
    return EXIT_OK
