"""The MCP server of ``roost mcp serve``: the SDK's low-level ``Server`` over the daemon client.

:class:`RoostMCP` serves one project through :class:`runtime.client.Client` connections
(a pool: one per request in flight). Its handlers translate MCP requests into daemon ops
(the blocking client runs on worker threads):

- ``tools/list`` → ``list_tools`` with ``source: mcp`` (the tools the policy does not refuse
  every MCP call of), each as an MCP tool (:func:`~runtime.mcp_server.translate.mcp_tool`)
  under its MCP-safe name (:func:`~runtime.mcp_server.names.name_map`: ``fs_read``);
- ``tools/call`` → ``run_tool`` of the Roost name (the safe name mapped back; a Roost name
  such as ``fs.read`` is taken as it is) with ``meta: {conversation_id, source: mcp}``: the
  daemon's one tool-call pipeline decides, runs, caps, scans, redacts and journals it;
- ``resources/list`` → ``diagnostics`` (the conversations); ``resources/read`` →
  ``incident_timeline`` / ``incident_report`` (what ``roost timeline`` / ``roost incident``
  show).

Calls are made in the conversation given (``--conversation``), else in a conversation
``mcp-`` + 12 hex digits this server starts on its first call and keeps while it runs.
:func:`serve_stdio` and :func:`serve_http` run it; logs go to stderr only.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import secrets
import signal
import socket
import sys
import threading
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

from runtime.client import Client, ClientPool
from runtime.errors import ConversationNotFoundError, RoostError
from runtime.mcp_server.loopback import SameUserOnly
from runtime.mcp_server.names import name_map
from runtime.mcp_server.translate import (
    CONVERSATIONS_MIME,
    INCIDENT_MIME,
    TIMELINE_LIMIT,
    TIMELINE_MIME,
    ResourceKind,
    call_result,
    failure_result,
    mcp_tool,
    parse_uri,
    resource_templates,
    resources,
)

__all__ = [
    "SOURCE",
    "RoostMCP",
    "bind_loopback",
    "load_http",
    "say",
    "serve_asgi",
    "serve_http",
    "serve_stdio",
]

SOURCE = "mcp"
"""The ``source`` of every call this server makes (recorded in ``tool.requested``)."""

_T = TypeVar("_T")


def _version() -> str:
    try:
        return importlib.metadata.version("roost")
    except importlib.metadata.PackageNotFoundError:
        return "0"


def say(text: str) -> None:
    """One line for people on stderr (stdout belongs to the protocol)."""
    print(f"roost: mcp: {text}", file=sys.stderr, flush=True)


class RoostMCP:
    """One project of the daemon behind ``client``, served as an MCP server.

    A :class:`Client` carries one request at a time, so concurrent MCP requests (parallel
    tool calls, several HTTP sessions) each borrow a connection from a pool that starts
    with ``client`` and grows with the requests in flight; :meth:`close` closes them all.
    """

    def __init__(self, client: Client, project_id: str, conversation_id: str | None = None) -> None:
        self.client = client
        """The first daemon connection (the pool's model: same home, same limits)."""
        self.project_id = project_id
        """The project served."""
        self.conversation_id = conversation_id
        """Where calls are recorded; chosen on the first call when not given."""
        self._lock = anyio.Lock()
        self._pool = ClientPool(client)
        self._roost_names: dict[str, str] = {}
        """The last listing's names: MCP-safe name → Roost name, and each Roost name."""

    def close(self) -> None:
        """Close every connection the pool opened."""
        self._pool.close()

    # --- before serving ---------------------------------------------------------------

    def check(self) -> None:
        """Fail early when the project does not run or ``--conversation`` does not exist.

        Raises ``ProjectNotFoundError`` or ``ConversationNotFoundError``.
        """
        diagnostics = self._borrowed(lambda c: c.diagnostics(self.project_id))
        conversation = self.conversation_id
        if conversation is not None and conversation not in (
            diagnostics.get("conversations") or []
        ):
            raise ConversationNotFoundError(
                f"project {self.project_id} has no conversation {conversation}; start it with "
                f"`roost conversation start {self.project_id} --id {conversation}`, or leave "
                "out --conversation",
                project_id=self.project_id,
                conversation_id=conversation,
            )

    def server(self) -> Server[Any]:
        """The MCP server: tools and resources of the project."""
        return Server(
            "roost",
            version=_version(),
            title=f"Roost project {self.project_id}",
            instructions=(
                f"The tools of the Roost project {self.project_id}. Each call is decided by "
                "the project's policy (calls that need approval are refused), run in its "
                "sandbox, redacted and journaled with source mcp."
            ),
            on_list_tools=self.list_tools,
            on_call_tool=self.call_tool,
            on_list_resources=self.list_resources,
            on_list_resource_templates=self.list_resource_templates,
            on_read_resource=self.read_resource,
        )

    # --- the daemon, from async code ----------------------------------------------------

    def _borrowed(self, request: Callable[[Client], _T]) -> _T:
        """Run ``request`` on an idle connection (a new one when none is idle)."""
        return self._pool.borrowed(request)

    async def _ask(self, request: Callable[[Client], _T]) -> _T:
        """``request(client)`` on a worker thread, with a borrowed connection."""
        return await self._pool.ask(request)

    async def conversation(self) -> str:
        """The conversation calls go to; started on the first call when none was given."""
        async with self._lock:
            if self.conversation_id is None:
                wanted = "mcp-" + secrets.token_hex(6)
                self.conversation_id = await self._ask(
                    lambda c: c.start_conversation(self.project_id, wanted)
                )
                say(f"calls of this session are recorded in conversation {self.conversation_id}")
            return self.conversation_id

    # --- handlers -----------------------------------------------------------------------

    async def list_tools(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        """``tools/list``: the tools the policy does not refuse every MCP call of."""
        try:
            listed = await self._listed()
        except RoostError as e:
            raise _protocol_error(e) from e
        safe = name_map(str(d["name"]) for d in listed)
        return types.ListToolsResult(tools=[mcp_tool(d, safe[str(d["name"])]) for d in listed])

    async def _listed(self) -> list[dict[str, Any]]:
        """``list_tools`` with ``source: mcp``; remembers the names for :meth:`roost_name`."""
        listed = await self._ask(lambda c: c.list_tools(self.project_id, SOURCE))
        safe = name_map(str(d["name"]) for d in listed)
        self._roost_names = {**{n: n for n in safe}, **{s: n for n, s in safe.items()}}
        return listed

    async def roost_name(self, name: str) -> str:
        """The Roost name of a called ``name``: a listed safe name's, else ``name`` itself.

        A name not in the last listing (a client that calls without listing, a tool added
        since) lists the tools again once; a name still unknown goes to the daemon as it
        is, which answers ``unknown_tool``.
        """
        if name not in self._roost_names:
            await self._listed()
        return self._roost_names.get(name, name)

    async def call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        """``tools/call``: one ``run_tool`` with ``source: mcp``; a refusal is ``isError``."""
        try:
            conversation = await self.conversation()
            request = {
                "name": await self.roost_name(params.name),
                "args": dict(params.arguments or {}),
                "meta": {"conversation_id": conversation, "source": SOURCE},
            }
            result = await self._ask(lambda c: c.run_tool(self.project_id, request))
        except RoostError as e:  # the daemon could not take the call at all
            return failure_result(params.name, e)
        return call_result(result)

    async def list_resources(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        """``resources/list``: the conversations, their timelines and incident reports."""
        return types.ListResourcesResult(
            resources=resources(self.project_id, await self._conversations())
        )

    async def list_resource_templates(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        """``resources/templates/list``: timeline and incident of any conversation."""
        return types.ListResourceTemplatesResult(
            resource_templates=resource_templates(self.project_id)
        )

    async def read_resource(
        self, ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        """``resources/read`` of a ``roost://PROJECT/conversations...`` URI."""
        uri = str(params.uri)
        try:
            kind, conversation = parse_uri(uri, self.project_id)
            text, mime = await _RESOURCE_READERS[kind](self, str(conversation))
        except RoostError as e:
            raise _protocol_error(e) from e
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=uri, mime_type=mime, text=text)]
        )

    async def _conversations_text(self, conversation: str) -> tuple[str, str]:
        return json.dumps(await self._conversations()), CONVERSATIONS_MIME

    async def _timeline_text(self, conversation: str) -> tuple[str, str]:
        timeline = await self._ask(
            lambda c: c.incident_timeline(self.project_id, conversation, limit=TIMELINE_LIMIT)
        )
        return json.dumps(timeline, ensure_ascii=False), TIMELINE_MIME

    async def _incident_text(self, conversation: str) -> tuple[str, str]:
        report = await self._ask(
            lambda c: c.incident_report(self.project_id, conversation, format="md")
        )
        return str(report), INCIDENT_MIME

    async def _conversations(self) -> list[str]:
        try:
            diagnostics = await self._ask(lambda c: c.diagnostics(self.project_id))
        except RoostError as e:
            raise _protocol_error(e) from e
        return [str(c) for c in diagnostics.get("conversations") or []]


_RESOURCE_READERS: dict[ResourceKind, Callable[[RoostMCP, str], Awaitable[tuple[str, str]]]] = {
    "conversations": RoostMCP._conversations_text,
    "timeline": RoostMCP._timeline_text,
    "incident": RoostMCP._incident_text,
}
"""How each kind of resource (:func:`parse_uri`) is read: its text and type."""


def _protocol_error(error: RoostError) -> MCPError:
    """An MCP error response for a request the daemon refused (``CODE: message``)."""
    return MCPError(
        code=types.INVALID_PARAMS,
        message=f"{error.code}: {error.message}",
        data={"code": error.code, **error.details},
    )


# --- transports ---------------------------------------------------------------------------


async def serve_stdio(mcp: RoostMCP) -> None:
    """Serve MCP on stdin/stdout until the client closes stdin."""
    from mcp.server.stdio import stdio_server  # noqa: PLC0415 - the transport in use only

    server = mcp.server()
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def bind_loopback(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (``host`` checked to be loopback before)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


async def serve_http(mcp: RoostMCP, sock: socket.socket) -> None:
    """Serve MCP's streamable HTTP transport at ``/mcp`` on the bound loopback ``sock``.

    Only the user the server runs as may call it (:class:`SameUserOnly`: another user's
    connection is answered ``403``), and Host and Origin headers are checked against the
    loopback names (the SDK's DNS rebinding protection). Returns on SIGINT/SIGTERM, once
    the open requests are done.
    """
    from mcp.server.transport_security import TransportSecuritySettings  # noqa: PLC0415

    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    names = ["127.0.0.1", "localhost", "[::1]", shown]
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[f"{name}:*" for name in names] + [f"{shown}:{port}"],
        allowed_origins=[f"http://{name}:*" for name in names],
    )
    app = SameUserOnly(mcp.server().streamable_http_app(host=host, transport_security=security))
    await serve_asgi(
        app, sock, lambda: say(f"serving project {mcp.project_id} on http://{shown}:{port}/mcp")
    )


def load_http() -> None:
    """Import what serving HTTP needs (uvicorn), so that it is done before the socket is bound."""
    import uvicorn  # noqa: PLC0415 - only with --http
    import uvicorn.lifespan.on  # noqa: PLC0415
    import uvicorn.protocols.http.auto  # noqa: F401, PLC0415


async def serve_asgi(
    app: Any, sock: socket.socket, ready: Callable[[], None] | None = None
) -> None:
    """Serve the ASGI ``app`` with uvicorn on the bound ``sock`` until SIGINT/SIGTERM.

    ``ready`` runs (the announcement) once the app has started and the server accepts
    connections on ``sock``, so a client that connects when it reads it is answered at
    once. Returns (exit 0) once the open requests are done, without raising the signal
    again; uvicorn logs only warnings (to stderr, one line each:
    ``runtime.mcp_server.oneline``). ``roost a2a serve`` serves the same way.
    """
    import uvicorn  # noqa: PLC0415 - only with --http

    config = uvicorn.Config(app, log_config=None, access_log=False, log_level="warning")

    class Stoppable(uvicorn.Server):
        """Stops on SIGINT/SIGTERM and returns (exit 0), without raising the signal again."""

        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets=sockets)
            if self.started and ready is not None:
                ready()

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            if threading.current_thread() is not threading.main_thread():
                yield
                return
            wanted = (signal.SIGINT, signal.SIGTERM)
            before = {sig: signal.signal(sig, self.handle_exit) for sig in wanted}
            try:
                yield
            finally:
                for sig, handler in before.items():
                    signal.signal(sig, handler)

    await Stoppable(config).serve(sockets=[sock])
