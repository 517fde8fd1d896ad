"""The steps of ``roost a2a serve``: check the project, bind, announce, serve until a signal.

Before anything listens the daemon must answer (``daemon_unreachable``) and the project
must run (``project_not_found``); a project whose ``protocol_allowlist`` lacks ``a2a`` is
served, but every request is refused (``protocol_denied``, journaled) and stderr says so.
Once the server accepts connections, one line on stderr announces the URL; stdout stays
empty; what the SDKs log goes to stderr as one line each (``runtime.mcp_server.oneline``).
"""

from __future__ import annotations

import socket
import sys

import anyio

from runtime.a2a_server.agent import RoostAgent
from runtime.a2a_server.server import a2a_app, card_of
from runtime.client import Client, ClientPool
from runtime.mcp_server.oneline import route_logging
from runtime.mcp_server.server import bind_loopback, load_http, serve_asgi

__all__ = ["A2AServe", "say"]


def say(text: str) -> None:
    """One line for people on stderr."""
    print(f"roost: a2a: {text}", file=sys.stderr, flush=True)


class A2AServe:
    """``roost a2a serve PROJECT``: one project's agent on one loopback address."""

    def __init__(self, client: Client, project_id: str, description: str | None = None) -> None:
        self.daemon = ClientPool(client)
        """The daemon's connections."""
        self.agent = RoostAgent(self.daemon, project_id)
        """The agent served."""
        self.description = description
        """The card's description (``--description``)."""

    def close(self) -> None:
        """Close the daemon connections."""
        self.daemon.close()

    def check(self) -> None:
        """Fail when the project does not run (``ProjectNotFoundError``); warn without a2a."""
        diagnostics = self.daemon.borrowed(lambda c: c.diagnostics(self.agent.project_id))
        allowlist = (diagnostics.get("options") or {}).get("protocol_allowlist")
        if not isinstance(allowlist, list) or "a2a" not in allowlist:
            say(
                f"project {self.agent.project_id} does not allow a2a (protocol_allowlist "
                f"{allowlist}): every request will be refused with protocol_denied"
            )

    def serve(self, host: str, port: int) -> None:
        """Bind ``host:port`` (loopback, checked before) and serve until SIGINT/SIGTERM."""
        route_logging("a2a")
        load_http()
        sock = bind_loopback(host, port)
        try:
            anyio.run(self._serve, sock)
        finally:
            sock.close()

    async def _serve(self, sock: socket.socket) -> None:
        host, port = sock.getsockname()[:2]
        shown = f"[{host}]" if ":" in host else host
        url = f"http://{shown}:{port}/"
        card = await card_of(self.agent, url, self.description)
        app = a2a_app(self.agent, card, url, self.description)
        card_url = f"{url}.well-known/agent-card.json"
        await serve_asgi(
            app,
            sock,
            lambda: say(
                f"serving project {self.agent.project_id} on {url} (agent card: {card_url})"
            ),
        )
