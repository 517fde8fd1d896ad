"""Sessions with external MCP servers (``mcp_servers``) in the process that runs tools.

A server's connection and confinement are :mod:`runtime.tools.mcp_client.connection`'s; this
module keeps one :class:`ServerSession` per configured server and drives its calls.

**Threads and forks.** The SDK is async (anyio); tools run synchronously. A
:class:`ServerSession` lives in the process that runs tools (the ToolRunner, which forks
no actors): the event-loop thread of :mod:`runtime.tools.sdk_loop`, started at the first MCP
call, holds every server's connection; a call is submitted to it with the call's
remaining time and abandoned (its task cancelled) on timeout or cancellation. The
project's tool listing, at project start, runs in a short-lived child process
(:mod:`runtime.tools.mcp_client.listing`) so the Project actor, which forks its children,
never starts a thread or a loop.

**A call, like a command.** Between calls a stdio server's whole tree is frozen (its
freezer cgroup). Before a call, what the server's view hides and protects is compared
with what a command's view would hide now; when it changed (a ``.env`` created since it
started, a ``.roost`` that appeared), the server is stopped and started again with a
fresh view (``mcp.server_exited {reason: view_changed}``, then ``mcp.server_started``).
Then it is thawed, called, frozen again, and the launcher's post-run check runs: what the
call left in ``.git`` or ``.roost`` is removed and recorded as
``security.sandbox_violation``, as for a command.

**Restarts.** Before each call the session is pinged; a server that does not answer (its
process exited, the connection broke) is recorded as ``mcp.server_exited`` and started
again (``mcp.server_restarted``) after a bounded backoff, at most :data:`MAX_RESTARTS`
times per process. A call in flight when its server dies fails with ``tool_error {kind:
mcp_server_exited}``. :func:`close_sessions` stops every server of the process (the
ToolRunner calls it when it exits).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import threading
import time
from collections.abc import Mapping
from typing import Any

from events import catalog as ev
from runtime.errors import ToolError
from runtime.guard.review.report import change_events
from runtime.guard.sandbox import cgroups
from runtime.logging import get_logger
from runtime.tools.mcp_client.connection import Connection
from runtime.tools.sdk_loop import event_loop, short_error, submit

__all__ = ["COLD_START_S", "MAX_RESTARTS", "ServerSession", "close_sessions", "session_for"]

log = get_logger("runtime.tools.mcp")

MAX_RESTARTS = 5
"""Restarts of one server per process before its calls fail with ``mcp_server_unavailable``."""
COLD_START_S = 30.0
"""Seconds a stdio server may take to start, not charged to the call's timeout."""
_PING_S = 5.0
_BACKOFF_S = (0.1, 0.2, 0.5, 1.0, 2.0)


class ServerSession:
    """One configured server in this process: started at first use, restarted when gone."""

    def __init__(
        self,
        entry: Mapping[str, Any],
        root: str,
        options: Mapping[str, Any],
        *,
        project_id: str = "",
    ):
        self.entry = dict(entry)
        self.project_id = project_id
        self.name = str(entry["name"])
        self.root = root
        self.options = dict(options)
        self.restarts = 0
        self.attempted = False
        self._conn: Connection | None = None
        self._lock = threading.Lock()
        self._real_root = os.path.realpath(root)
        self._tool = f"mcp.{self.name}"
        self._start_s = 0.0

    @property
    def transport(self) -> str:
        """``http`` or ``stdio``."""
        return "http" if "url" in self.entry else "stdio"

    def _submit(self, coro: Any, timeout_s: float, cancelled: threading.Event) -> Any:
        return submit(coro, timeout_s, cancelled, f"MCP server {self.name}")

    def _alive(self, conn: Connection, cancelled: threading.Event) -> bool:
        if conn.session is None or (conn.server is not None and not conn.server.alive()):
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

    def _review_signals(self, reports: list[Any], call_id: str | None) -> list[ev.Event]:
        """``tool.changes`` and quarantine signals of the server's post-run checks."""
        out: list[ev.Event] = []
        for report in reports:
            out += change_events(report, tool=self._tool, call_id=call_id or "mcp-server")
        return out

    def _drop(self, signals: list[ev.Event], call_id: str | None = None) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                asyncio.run_coroutine_threadsafe(conn.close(), event_loop()).result(10.0)
            signals += self._review_signals(conn.changes, call_id)

    def _refresh_view(self, signals: list[ev.Event], call_id: str) -> None:
        """Stop a frozen server whose view no longer hides what a command's would hide now."""
        conn = self._conn
        server = conn.server if conn is not None else None
        if server is None or not server.alive() or not server.view_is_stale():
            return
        signals.append(
            ev.McpServerExited(
                server=self.name,
                reason="view_changed",
                detail="sensitive or protected files changed since the server started",
                call_id=call_id,
            )
        )
        self._drop(signals, call_id)
        self.attempted = False  # a fresh start, not a restart after a failure

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
            self._drop(signals, call_id)
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
        conn = Connection(self.entry, self.root, self.options, project_id=self.project_id)
        opening = time.monotonic()
        try:
            self._submit(conn.open(), timeout_s + COLD_START_S, cancelled)
        except ToolError as e:
            if e.code in ("timeout", "conversation_cancelled"):
                with contextlib.suppress(Exception):
                    asyncio.run_coroutine_threadsafe(conn.close(), event_loop()).result(10.0)
                signals += self._review_signals(conn.changes, call_id)
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
        spent = time.monotonic() - opening
        self._start_s += spent
        start_ms = round(spent * 1000)
        if restart:
            signals.append(
                ev.McpServerRestarted(
                    server=self.name, attempt=self.restarts, call_id=call_id, start_ms=start_ms
                )
            )
        else:
            signals.append(
                ev.McpServerStarted(
                    server=self.name, transport=self.transport, call_id=call_id, start_ms=start_ms
                )
            )
        return conn

    def call(
        self,
        tool: str,
        args: Mapping[str, Any],
        *,
        signals: list[ev.Event],
        call_id: str,
        timeout_s: float,
        cancelled: threading.Event,
    ) -> Any:
        """Call ``tool`` on the server; return the SDK's ``CallToolResult``."""
        with self._lock:  # one call at a time per server: restarts stay simple and ordered
            self._tool = f"mcp.{self.name}.{tool}"
            started = time.monotonic()
            self._start_s = 0.0
            self._refresh_view(signals, call_id)
            if self._conn is not None and self._conn.server is not None:
                self._conn.server.begin_call()
            try:
                conn = self._ensure(signals, call_id, timeout_s, cancelled)
                # a cold start is not charged to the call (the runner allows COLD_START_S for it)
                remaining = max(0.1, timeout_s - (time.monotonic() - started - self._start_s))
                session = conn.session
                try:
                    return self._submit(
                        session.call_tool(tool, dict(args), read_timeout_seconds=remaining),
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
                    self._drop(signals, call_id)
                    raise ToolError(
                        "tool_error",
                        f"MCP server {self.name} exited during the call to {tool}; it is "
                        "restarted at the next call",
                        kind="mcp_server_exited",
                        server=self.name,
                    ) from e
            finally:
                self._end_call(signals, call_id)

    def _end_call(self, signals: list[ev.Event], call_id: str) -> None:
        """Freeze the server again and run the post-run check (what the call left)."""
        conn = self._conn
        if conn is None or conn.server is None:
            return
        if not conn.server.alive():  # it died after answering: stop it, check what it left
            self._drop(signals, call_id)
            return
        report = conn.server.end_call()
        signals += self._review_signals([] if report is None else [report], call_id)

    def close(self) -> list[str]:
        """Stop the server (its whole tree) and run the post-run check; what it removed.

        Waits a few seconds for a call in flight, then stops the server under it.
        """
        locked = self._lock.acquire(timeout=5.0)
        try:
            conn = self._conn
            self._drop([])  # no call to record its review's signals with
            return [] if conn is None else list(conn.removed)
        finally:
            if locked:
                self._lock.release()


_SESSIONS: dict[tuple[str, str], ServerSession] = {}
_SESSIONS_LOCK = threading.Lock()


def session_for(
    entry: Mapping[str, Any], root: str, options: Mapping[str, Any], *, project_id: str = ""
) -> ServerSession:
    """The process's session for server ``entry`` of project ``project_id`` at ``root``."""
    key = (os.path.realpath(root), json.dumps(dict(entry), sort_keys=True))
    with _SESSIONS_LOCK:
        if not _SESSIONS:
            cgroups.sweep_stale()  # servers a killed runner left frozen die now
        found = _SESSIONS.get(key)
        if found is None:
            found = _SESSIONS[key] = ServerSession(entry, root, options, project_id=project_id)
        return found


def close_sessions() -> None:
    """Stop every server of this process (the ToolRunner, when it exits)."""
    with _SESSIONS_LOCK:
        sessions = list(_SESSIONS.values())
        _SESSIONS.clear()
    for session in sessions:
        try:
            removed = session.close()
        except Exception as e:
            log.warning("mcp_server_stop_failed", server=session.name, error=short_error(e))
            continue
        if removed:  # planted at its exit: removed by the same check as after a call
            log.warning("mcp_server_exit_removed", server=session.name, removed=removed)
