"""``roost a2a serve PROJECT [--http HOST:PORT] [--description TEXT]`` (SPEC section 12).

Serves the project's agent over A2A (``runtime.a2a_server``): JSON-RPC at ``/``, the agent
card at ``/.well-known/agent-card.json``, on loopback only. Everything for people goes to
stderr; stdout stays empty. Before serving, the daemon must answer (exit 3,
``daemon_unreachable``) and the project must run (exit 1, ``project_not_found``);
``--http`` takes a loopback ``HOST:PORT`` (exit 2, ``usage``, for another shape; exit 1,
``address_not_loopback``, for another host).
"""

from __future__ import annotations

import argparse
from typing import Any

from runtime.cli.commands import EXIT_OK
from runtime.cli.format import UsageError

__all__ = ["DEFAULT_ADDRESS", "add_a2a_commands", "cmd_a2a_serve"]

DEFAULT_ADDRESS = "127.0.0.1:0"
"""Where ``roost a2a serve`` listens without ``--http``: any free loopback port."""


def add_a2a_commands(group: Any, leaf: Any) -> None:
    """Add ``a2a serve`` under the ``a2a`` command group (``runtime.cli.app``)."""
    p: argparse.ArgumentParser = leaf(
        group,
        "serve",
        cmd_a2a_serve,
        "serve a project's agent over A2A (agent card, tasks as conversation turns)",
        "roost a2a serve p1 --http 127.0.0.1:8421",
    )
    p.add_argument("project", metavar="PROJECT")
    p.add_argument(
        "--http",
        metavar="HOST:PORT",
        default=DEFAULT_ADDRESS,
        help="where to listen; loopback only (127.0.0.1, [::1], localhost); "
        "0 as the port picks a free one, announced on stderr",
    )
    p.add_argument(
        "--description",
        metavar="TEXT",
        help="the agent card's description (default: the first paragraph of the project's "
        "README.md, read by the daemon)",
    )


def cmd_a2a_serve(ns: argparse.Namespace) -> int:
    """``roost a2a serve PROJECT [--http HOST:PORT] [--description TEXT]``."""
    from runtime.a2a_server.serve import A2AServe  # noqa: PLC0415 - the A2A SDK loads here only
    from runtime.client import Client  # noqa: PLC0415
    from runtime.mcp_server import parse_http_address  # noqa: PLC0415

    try:
        address = parse_http_address(  # AddressNotLoopbackError: exit 1
            ns.http, "roost a2a serve", "talks to the project's agent"
        )
    except ValueError as e:
        raise UsageError(f"argument --http: {e} (see `roost a2a serve --help`)") from e
    server = A2AServe(Client.connect(ns.home), ns.project, ns.description)
    try:
        server.check()
        server.serve(*address)
    finally:
        server.close()
    return EXIT_OK
