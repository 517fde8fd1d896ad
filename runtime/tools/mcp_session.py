"""Connections to external MCP servers (``mcp_servers``), on the official ``mcp`` SDK.

**Confinement.** A stdio server is started through :func:`stdio_argv`: bubblewrap with the
project's command view (:func:`runtime.tools.command.command_view`: the system read-only,
the project root and a scratch home writable, nothing of ``$HOME`` or ``ROOST_HOME``),
its own network namespace unless ``network_egress_policy`` is ``allow``, and a cleared
environment holding only :func:`runtime.guard.command_controls.build_env`'s base plus the
entry's ``env`` keys ``tool_env_allowlist`` lets through. Without bubblewrap the server
is not started (``isolation_unavailable``). An HTTP server's URL is judged by the egress
policy (:func:`runtime.guard.network.judge_target`, then its addresses by
:func:`~runtime.guard.network.resolve_and_check`) before any connection.

**Threads and forks.** The SDK is async (anyio); tools run synchronously. A
:class:`ServerSession` lives in the process that runs tools (the ToolRunner, which forks
no actors): the event-loop thread of :mod:`runtime.tools.sdk_loop`, started at the first
call, holds every server's connection; a call is submitted to it with the call's
remaining time and abandoned (its task cancelled) on timeout or cancellation. The
project's tool listing, at project start, runs in a short-lived child process
(:mod:`runtime.tools.mcp_listing`) so the Project actor, which forks its children,
never starts a thread or a loop.

**Restarts.** Before each call the session is pinged; a server that does not answer (its
process exited, the connection broke) is recorded as ``mcp.server_exited`` and started
again (``mcp.server_restarted``) after a bounded backoff, at most :data:`MAX_RESTARTS`
times per process. A call in flight when its server dies fails with ``tool_error {kind:
mcp_server_exited}``.

Why this module is long: confinement, the loop thread and restarts act on one session
object (a restart re-runs the confinement; a call waits on the loop and triggers the
restart), so they are kept together rather than split across modules that share its state.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Mapping
from typing import Any

from events import catalog as ev
from runtime.errors import ToolError
from runtime.guard.command_controls import build_env
from runtime.guard.network import (
    NetworkPolicy,
    denial_error,
    judge_target,
    resolve_and_check,
)
from runtime.guard.sandbox import bwrap_argv, probe_layers, require_confinement
from runtime.option_table import RuntimeOptions
from runtime.tools.command import command_view
from runtime.tools.sdk_loop import event_loop, short_error, submit

__all__ = [
    "MAX_RESTARTS",
    "ServerSession",
    "check_url",
    "session_for",
    "stdio_argv",
]

MAX_RESTARTS = 5
"""Restarts of one server per process before its calls fail with ``mcp_server_unavailable``."""
_PING_S = 5.0
_BACKOFF_S = (0.1, 0.2, 0.5, 1.0, 2.0)


def stdio_argv(
    entry: Mapping[str, Any], root: str, options: Mapping[str, Any], home: str
) -> list[str]:
    """The confined argv of a stdio server: bubblewrap, a cleared env, then its command."""
    require_confinement(probe_layers())
    settings = RuntimeOptions.of(options)
    env = build_env(entry.get("env"), list(settings.tool_env_allowlist), home=home)
    real_root = os.path.realpath(root)
    allow_network = settings.network_egress_policy == "allow"
    prefix = bwrap_argv(allow_network, command_view(settings, real_root, home, real_root))
    assert prefix[-1] == "--"
    env_argv = ["--clearenv"]
    for key, value in sorted(env.items()):
        env_argv += ["--setenv", key, value]
    return [*prefix[:-1], *env_argv, "--", *entry["command"]]


def check_url(url: str, options: Mapping[str, Any]) -> None:
    """Refuse an HTTP server's URL the egress policy does not let through (``ToolError``)."""
    policy = NetworkPolicy.from_options(options)
    decision = judge_target(policy, url)
    if not decision.allowed:
        raise denial_error(decision)
    assert decision.host is not None and decision.port is not None
    resolve_and_check(policy, decision.host, decision.port, target=url)


_HOME_PREFIX = "roost-mcp-home-"


def _scratch_home() -> str:
    """A new scratch home named after this process; those of dead processes are removed.

    A process that runs tools can end without leaving its sessions (an actor stopped, a
    crash), so its servers' homes are swept by the next process that starts one.
    """
    tmp = tempfile.gettempdir()
    with contextlib.suppress(OSError):
        for name in os.listdir(tmp):
            owner = name[len(_HOME_PREFIX) :].partition("-")[0]
            if name.startswith(_HOME_PREFIX) and owner.isdigit() and not _running(int(owner)):
                shutil.rmtree(os.path.join(tmp, name), ignore_errors=True)
    return tempfile.mkdtemp(prefix=f"{_HOME_PREFIX}{os.getpid()}-")


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


class Connection:
    """One live connection, held open by a task on the loop until :meth:`close`."""

    def __init__(self, entry: Mapping[str, Any], root: str, options: Mapping[str, Any]):
        self.entry = dict(entry)
        self.root = root
        self.options = dict(options)
        self.session: Any = None
        self.closing: asyncio.Event | None = None
        self.task: asyncio.Task[None] | None = None

    async def open(self) -> None:
        """Start the server and initialize the session; raise what went wrong."""
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.closing = asyncio.Event()
        self.task = asyncio.create_task(self._hold(ready))
        await ready

    async def _hold(self, ready: asyncio.Future[None]) -> None:
        from mcp.client.session import ClientSession  # noqa: PLC0415

        home = _scratch_home()
        try:
            async with contextlib.AsyncExitStack() as stack:
                if "url" in self.entry:
                    from mcp.client.streamable_http import (  # noqa: PLC0415
                        streamable_http_client,
                    )

                    check_url(self.entry["url"], self.options)
                    streams = await stack.enter_async_context(
                        streamable_http_client(self.entry["url"])
                    )
                else:
                    from mcp.client.stdio import (  # noqa: PLC0415
                        StdioServerParameters,
                        stdio_client,
                    )

                    argv = stdio_argv(self.entry, self.root, self.options, home)
                    params = StdioServerParameters(
                        command=argv[0], args=argv[1:], cwd=os.path.realpath(self.root)
                    )
                    errlog = stack.enter_context(open(os.devnull, "w"))  # noqa: SIM115
                    streams = await stack.enter_async_context(stdio_client(params, errlog))
                read, write = streams[0], streams[1]
                session = await stack.enter_async_context(ClientSession(read, write))
                await session.initialize()
                self.session = session
                ready.set_result(None)
                assert self.closing is not None
                await self.closing.wait()
        except BaseException as e:
            if not ready.done():
                ready.set_exception(e if isinstance(e, Exception) else RuntimeError(str(e)))
            if not isinstance(e, Exception):
                raise
        finally:
            self.session = None
            shutil.rmtree(home, ignore_errors=True)

    async def close(self) -> None:
        """Leave the session and stop the server."""
        if self.closing is not None:
            self.closing.set()
        if self.task is not None:
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(self.task, 5.0)


class ServerSession:
    """One configured server in this process: started at first use, restarted when gone."""

    def __init__(self, entry: Mapping[str, Any], root: str, options: Mapping[str, Any]):
        self.entry = dict(entry)
        self.name = str(entry["name"])
        self.root = root
        self.options = dict(options)
        self.restarts = 0
        self.attempted = False
        self._conn: Connection | None = None
        self._lock = threading.Lock()

    @property
    def transport(self) -> str:
        """``http`` or ``stdio``."""
        return "http" if "url" in self.entry else "stdio"

    def _submit(self, coro: Any, timeout_s: float, cancelled: threading.Event) -> Any:
        return submit(coro, timeout_s, cancelled, f"MCP server {self.name}")

    def _alive(self, conn: Connection, cancelled: threading.Event) -> bool:
        if conn.session is None:
            return False
        try:
            self._submit(conn.session.send_ping(), _PING_S, cancelled)
        except ToolError as e:
            if e.code == "conversation_cancelled":
                raise
            return False
        except Exception:
            return False
        return True

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                asyncio.run_coroutine_threadsafe(conn.close(), event_loop()).result(6.0)

    def _ensure(
        self, signals: list[ev.Event], call_id: str, timeout_s: float, cancelled: threading.Event
    ) -> Connection:
        conn = self._conn
        if conn is not None and self._alive(conn, cancelled):
            return conn
        if conn is not None:
            signals.append(
                ev.McpServerExited(
                    server=self.name, reason="connection_closed", detail="", call_id=call_id
                )
            )
            self._drop()
        restart = self.attempted
        self.attempted = True
        if restart:
            if self.restarts >= MAX_RESTARTS:
                raise ToolError(
                    "tool_error",
                    f"MCP server {self.name} was restarted {MAX_RESTARTS} times already and "
                    "is not started again; restart the project",
                    kind="mcp_server_unavailable",
                    server=self.name,
                )
            time.sleep(min(_BACKOFF_S[min(self.restarts, len(_BACKOFF_S) - 1)], timeout_s / 4))
            self.restarts += 1
        conn = Connection(self.entry, self.root, self.options)
        try:
            self._submit(conn.open(), timeout_s, cancelled)
        except ToolError as e:
            if e.code in ("timeout", "conversation_cancelled"):
                with contextlib.suppress(Exception):
                    asyncio.run_coroutine_threadsafe(conn.close(), event_loop()).result(6.0)
            signals.append(
                ev.McpServerExited(
                    server=self.name, reason="start_failed", detail=e.message, call_id=call_id
                )
            )
            raise
        except Exception as e:
            signals.append(
                ev.McpServerExited(
                    server=self.name, reason="start_failed", detail=short_error(e), call_id=call_id
                )
            )
            raise ToolError(
                "tool_error",
                f"MCP server {self.name} could not be started: {short_error(e)}",
                kind="mcp_server_unavailable",
                server=self.name,
            ) from e
        self._conn = conn
        if restart:
            signals.append(
                ev.McpServerRestarted(server=self.name, attempt=self.restarts, call_id=call_id)
            )
        else:
            signals.append(
                ev.McpServerStarted(server=self.name, transport=self.transport, call_id=call_id)
            )
        return conn

    def call(
        self,
        tool: str,
        args: dict[str, Any],
        *,
        signals: list[ev.Event],
        call_id: str,
        timeout_s: float,
        cancelled: threading.Event,
    ) -> Any:
        """Call ``tool`` on the server; return the SDK's ``CallToolResult``."""
        with self._lock:  # one call at a time per server: restarts stay simple and ordered
            started = time.monotonic()
            conn = self._ensure(signals, call_id, timeout_s, cancelled)
            remaining = max(0.1, timeout_s - (time.monotonic() - started))
            session = conn.session
            try:
                return self._submit(
                    session.call_tool(tool, args, read_timeout_seconds=remaining),
                    remaining,
                    cancelled,
                )
            except ToolError:
                raise
            except Exception as e:
                if conn.session is not None and self._alive(conn, cancelled):
                    raise ToolError(
                        "tool_error",
                        f"MCP server {self.name} refused the call to {tool}: {short_error(e)}",
                        kind="mcp_error",
                        server=self.name,
                    ) from e
                signals.append(
                    ev.McpServerExited(
                        server=self.name,
                        reason="connection_closed",
                        detail=short_error(e),
                        call_id=call_id,
                    )
                )
                self._drop()
                raise ToolError(
                    "tool_error",
                    f"MCP server {self.name} exited during the call to {tool}; it is "
                    "restarted at the next call",
                    kind="mcp_server_exited",
                    server=self.name,
                ) from e


_SESSIONS: dict[tuple[str, str], ServerSession] = {}
_SESSIONS_LOCK = threading.Lock()


def session_for(entry: Mapping[str, Any], root: str, options: Mapping[str, Any]) -> ServerSession:
    """The session of this process for server ``entry`` of the project at ``root``."""
    key = (os.path.realpath(root), json.dumps(dict(entry), sort_keys=True))
    with _SESSIONS_LOCK:
        found = _SESSIONS.get(key)
        if found is None:
            found = _SESSIONS[key] = ServerSession(entry, root, options)
        return found
