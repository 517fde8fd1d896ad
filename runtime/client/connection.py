"""The Python client: every daemon operation as a method, over the daemon's Unix socket.

::

    from runtime.client.connection import Client
    with Client.connect(home=None) as c:
        pid = c.start_project("/path/to/repo", project_id="p1")
        cid = c.start_conversation(pid, conversation_id="c1")
        ack = c.send_message(pid, cid, "list skills", wait=True)
        for event in c.subscribe(pid, cid, after_seq=0):
            ...

A request the daemon cannot serve raises the :class:`runtime.errors.RequestError` subclass
of its wire code, with ``.code`` and ``.details``. A dead or absent daemon raises
``DaemonUnreachableError``. One request is in flight per client at a time (a lock guards
the connection); a dropped connection is reopened by the next call, and so is one the
daemon closed while it was idle (``idle_timeout_s``): a call first looks whether its
connection was hung up, and reconnects before sending if so.
"""

from __future__ import annotations

import os
import select
import socket
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from runtime.client.subscription import EventStream, exchange, open_socket
from runtime.errors import (
    BadRequestError,
    DaemonUnreachableError,
    RequestError,
    RequestTimeoutError,
    error_from_wire,
)
from runtime.guard.home.roost_home import resolve_home, socket_path
from runtime.wire.client_codec import encode_request
from runtime.wire.client_ops import new_idempotency_key, normalize_event, op_timeout_s
from runtime.wire.framing import DEFAULT_MAX_FRAME_BYTES, HEADER_SIZE, FrameTooLargeError

if TYPE_CHECKING:  # types only: the shapes of the answers, not loaded by a client
    from events.view_types import IncidentReport, ProjectEvents, TimelinePage
    from runtime.client.replies import (
        DaemonStatus,
        DeletedProject,
        Pong,
        ProjectDescription,
        ProjectDiagnostics,
        ProjectSummary,
        ProtocolCheck,
        ShutdownAck,
        VerifyReport,
    )

__all__ = ["REPLY_MARGIN_S", "Client", "EventStream", "normalize_event"]

REPLY_MARGIN_S = 10.0
"""Seconds the client waits for a reply beyond the daemon's own deadline for the op."""


def _hung_up(sock: socket.socket) -> bool:
    """Whether an idle connection has something to read (not fit for the next request).

    The daemon closed it (``idle_timeout_s``), or a stray frame arrived.
    """
    poller = select.poll()
    try:
        poller.register(sock, select.POLLIN | select.POLLRDHUP)
        return bool(poller.poll(0))
    except (OSError, ValueError):
        return True


class Client:
    """A connection to the daemon of one ``ROOST_HOME``; make it with :meth:`connect`."""

    def __init__(
        self,
        socket_path: str,
        *,
        home: str,
        timeout_s: float = 5.0,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
    ) -> None:
        self.socket_path = socket_path
        """The daemon's socket."""
        self.home = home
        """The daemon's ``ROOST_HOME``."""
        self.timeout_s = timeout_s
        """Seconds to wait for the socket to accept a connection."""
        self.max_frame_bytes = max_frame_bytes
        """Largest frame sent or accepted."""
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._next_id = 1

    @classmethod
    def connect(
        cls,
        home: str | None = None,
        *,
        timeout_s: float = 5.0,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
    ) -> Client:
        """Connect to the daemon of ``home`` (default ``$ROOST_HOME``, then the default).

        Raises ``DaemonUnreachableError`` when nothing answers on its socket.
        """
        client = cls(
            socket_path(home),
            home=resolve_home(home),
            timeout_s=timeout_s,
            max_frame_bytes=max_frame_bytes,
        )
        with client._lock:
            client._open()
        return client

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection (a later call would open a new one)."""
        with self._lock:
            self._drop()

    # --- transport ------------------------------------------------------------------

    def _open(self) -> socket.socket:
        if self._sock is not None and _hung_up(self._sock):
            self._drop()
        if self._sock is None:
            self._sock = open_socket(self.socket_path, self.home, self.timeout_s)
            self._next_id = 1
        return self._sock

    def _drop(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def call(self, op: str, args: Mapping[str, object] | None = None) -> Any:
        """Send one request and return its result; raise its error.

        The reply is awaited for the op's daemon-side time limit plus
        :data:`REPLY_MARGIN_S`; past that, ``RequestTimeoutError`` (and the connection is
        dropped, since a late reply would answer the next request).
        """
        args = args or {}
        with self._lock:
            sock = self._open()
            request_id = self._next_id
            self._next_id += 1
            frame = encode_request(request_id, op, args)
            if len(frame) - HEADER_SIZE > self.max_frame_bytes:
                raise FrameTooLargeError(len(frame) - HEADER_SIZE, self.max_frame_bytes)
            timeout = op_timeout_s(op, args) + REPLY_MARGIN_S
            try:
                reply = exchange(sock, frame, timeout_s=timeout, max_bytes=self.max_frame_bytes)
            except RequestError:
                self._drop()
                raise
            except TimeoutError as e:
                self._drop()
                raise RequestTimeoutError(
                    f"no reply to {op} within {timeout:g} s", op=op, timeout_s=timeout
                ) from e
            except OSError as e:
                self._drop()
                raise DaemonUnreachableError(
                    f"lost the connection to the daemon during {op}: {e}",
                    socket=self.socket_path,
                ) from e
            if reply.kind == "error":
                if reply.id != request_id:
                    self._drop()
                raise error_from_wire(reply.value)
            if reply.id != request_id or reply.kind != "result":
                self._drop()
                raise BadRequestError(
                    f"unexpected {reply.kind} frame with id {reply.id} in reply to request "
                    f"{request_id} ({op})"
                )
            return reply.value

    # --- the daemon -----------------------------------------------------------------

    def ping(self) -> Pong:
        """Return ``{pong: true, pid}``."""
        result: Pong = self.call("ping")
        return result

    def status(self) -> DaemonStatus:
        """Return ``{pid, home, uptime_s, projects, version, ...}``."""
        result: DaemonStatus = self.call("status")
        return result

    def shutdown(self) -> ShutdownAck:
        """Ask the daemon to stop; returns ``{stopping: true, pid}`` before it exits."""
        result: ShutdownAck = self.call("shutdown")
        return result

    # --- projects -------------------------------------------------------------------

    def start_project(
        self, root: str, project_id: str | None = None, options: Mapping[str, object] | None = None
    ) -> str:
        """Start a project on ``root`` (made absolute here); return its id."""
        args = {
            "root": os.path.abspath(os.path.expanduser(root)),
            "project_id": project_id,
            "options": options or {},
        }
        return str(self.call("start_project", args))

    def stop_project(self, project_id: str) -> Any:
        """Stop a project."""
        return self.call("stop_project", {"project_id": project_id})

    def delete_project(self, project_id: str, *, deleted_by: str = "") -> DeletedProject:
        """Delete a stopped project's whole history; ``project_running`` while it runs.

        Returns ``{project_id, deleted_events, deletion_seq, deleted_at, deleted_by}``.
        """
        args = {"project_id": project_id, "deleted_by": deleted_by}
        result: DeletedProject = self.call("delete_project", args)
        return result

    def list_projects(self, *, all: bool = False) -> list[ProjectSummary]:
        """Return ``[{project_id, root, conversation_count, started_at}]``.

        With ``all``, every project the journal knows, each with its ``state``
        (``running``, ``stopped``, ``failed``), ``stopped_at`` and ``reason``.
        """
        result: list[ProjectSummary] = self.call("list_projects", {"all": True} if all else {})
        return result

    def project_events(
        self, project_id: str, limit: int = 100, *, problems_only: bool = False
    ) -> ProjectEvents:
        """Return the project's own history: its project-level events, the last ``limit``.

        ``{project_id, limit, total_entries, entries, unresolved_problems}``; each entry has
        a ``problem`` kind or null (``problems_only``: only those with one).
        """
        args = {"project_id": project_id, "limit": limit, "problems_only": problems_only}
        result: ProjectEvents = self.call("project_events", args)
        return result

    def diagnostics(self, project_id: str) -> ProjectDiagnostics:
        """Return the project's diagnostics (SPEC section 2)."""
        result: ProjectDiagnostics = self.call("diagnostics", {"project_id": project_id})
        return result

    def list_tools(self, project_id: str, source: str | None = None) -> list[dict[str, Any]]:
        """Return the tools the policy lets this project use.

        With ``source`` (``model``, ``run_tool``, ``mcp``): only those the policy does not
        refuse every call of from that caller (``roost mcp serve`` asks for ``mcp``).
        """
        args = {"project_id": project_id, "source": source}  # None: the daemon's default
        result: list[dict[str, Any]] = self.call("list_tools", args)
        return result

    def describe_project(self, project_id: str) -> ProjectDescription:
        """``{project_id, description, source}``: the first paragraph of the README, or nulls."""
        result: ProjectDescription = self.call("describe_project", {"project_id": project_id})
        return result

    def check_protocol(
        self,
        project_id: str,
        protocol: str,
        operation: str,
        correlation_id: str | None = None,
    ) -> ProtocolCheck:
        """Whether ``protocol`` (``mcp``, ``a2a``) may serve the project: ``{protocol, allowed}``.

        When the project's ``protocol_allowlist`` lacks it, the daemon journals
        ``security.protocol_denied {protocol, operation}`` before answering.
        """
        args = {
            "project_id": project_id,
            "protocol": protocol,
            "operation": operation,
            "correlation_id": correlation_id,
        }
        result: ProtocolCheck = self.call("check_protocol", args)
        return result

    def run_tool(self, project_id: str, request: Mapping[str, object]) -> dict[str, Any]:
        """Run ``{name, args, meta: {conversation_id?, correlation_id?, source?}}``.

        Returns its result; ``meta.source`` is ``run_tool`` (the default) or ``mcp``. A
        failed tool is a result with ``status: "error"``, not an exception.
        """
        result: dict[str, Any] = self.call(
            "run_tool", {"project_id": project_id, "request": request}
        )
        return result

    def verify(self, project_id: str) -> VerifyReport:
        """Replay and check the project: ``{ok, checked_events, chain_ok, mismatches}``.

        Plus its seals: ``anchor_ok``, ``anchor_problems`` (``[{kind, ...}]``) and ``seal``
        (``{anchor, checkpoints, sealed_through, sealed_seq, sealed_at, unsealed_events}``);
        ``ok`` is false when either part fails. See ``docs/security.md``.
        """
        result: VerifyReport = self.call("verify", {"project_id": project_id})
        return result

    # --- conversations --------------------------------------------------------------

    def start_conversation(self, project_id: str, conversation_id: str | None = None) -> str:
        """Start a conversation; return its id."""
        args = {"project_id": project_id, "conversation_id": conversation_id}
        return str(self.call("start_conversation", args))

    def stop_conversation(self, project_id: str, conversation_id: str) -> Any:
        """Stop a conversation."""
        args = {"project_id": project_id, "conversation_id": conversation_id}
        return self.call("stop_conversation", args)

    def send_event(
        self,
        project_id: str,
        conversation_id: str,
        event: dict[str, Any],
        *,
        wait: bool = False,
        wait_timeout_s: float = 60.0,
        idempotency_key: str | None = None,
    ) -> dict[str, Any]:
        """Append an inbound event; return the ack ``{seq, event_id, correlation_id}``.

        With ``wait``, return when the turn is over (or raise ``timeout``). The event is
        normalized by :func:`normalize_event`. A lost connection is retried once, on a
        new connection, with the same idempotency key, so the event is never doubled.
        """
        args = {
            "project_id": project_id,
            "conversation_id": conversation_id,
            "event": normalize_event(event),
            "wait": wait,
            "wait_timeout_s": wait_timeout_s,
            # The client's own key (the same on its retry); the gateway mints none then.
            "idempotency_key": idempotency_key or new_idempotency_key(),
        }
        try:
            result: dict[str, Any] = self.call("send_event", args)
        except DaemonUnreachableError:
            result = self.call("send_event", args)
        return result

    def send_message(
        self,
        project_id: str,
        conversation_id: str,
        text: str,
        correlation_id: str | None = None,
        *,
        wait: bool = False,
        wait_timeout_s: float = 60.0,
        llm: Mapping[str, object] | None = None,
    ) -> dict[str, Any]:
        """Send ``user.message`` with ``data.content = text`` (and ``data.llm`` directives)."""
        data: dict[str, object] = {"content": text}
        if llm is not None:
            data["llm"] = llm
        event = {"type": "user.message", "data": data, "correlation_id": correlation_id}
        return self.send_event(
            project_id, conversation_id, event, wait=wait, wait_timeout_s=wait_timeout_s
        )

    def cancel(
        self,
        project_id: str,
        conversation_id: str,
        correlation_id: str | None = None,
        reason: str | None = None,
    ) -> Any:
        """Cancel the conversation's pending calls and turn."""
        args = {
            "project_id": project_id,
            "conversation_id": conversation_id,
            "correlation_id": correlation_id,
            "reason": reason,
        }
        return self.call("cancel", args)

    def resume(self, project_id: str, conversation_id: str) -> Any:
        """Reopen a cancelled conversation."""
        return self.call("resume", {"project_id": project_id, "conversation_id": conversation_id})

    def approve(self, project_id: str, conversation_id: str, call_id: str) -> Any:
        """Approve a call awaiting approval."""
        args = {"project_id": project_id, "conversation_id": conversation_id, "call_id": call_id}
        return self.call("approve", args)

    def reject(
        self, project_id: str, conversation_id: str, call_id: str, reason: str | None = None
    ) -> Any:
        """Reject a call awaiting approval."""
        args = {
            "project_id": project_id,
            "conversation_id": conversation_id,
            "call_id": call_id,
            "reason": reason,
        }
        return self.call("reject", args)

    # --- queries --------------------------------------------------------------------

    def get_projection(self, project_id: str, conversation_id: str, key: str) -> Any:
        """Return one projection of the conversation.

        ``key`` is ``timeline``, ``pending_tool_calls``, ``llm_context`` or ``diagnostics``.
        """
        args = {"project_id": project_id, "conversation_id": conversation_id, "key": key}
        return self.call("get_projection", args)

    def incident_timeline(
        self,
        project_id: str,
        conversation_id: str,
        limit: int = 100,
        correlation_id: str | None = None,
        *,
        after_seq: int | None = None,
        before_seq: int | None = None,
    ) -> TimelinePage:
        """Return the conversation's incident timeline: one page of it.

        ``{project_id, conversation_id, correlation_id, limit, total_entries, entries,
        after_seq, before_seq}``: the last ``limit`` entries (before ``before_seq``), or with
        ``after_seq`` the first ``limit`` after it; ``total_entries`` counts them all.
        """
        args = {  # a null cursor is the daemon's default: no bound on that side
            "project_id": project_id,
            "conversation_id": conversation_id,
            "limit": limit,
            "correlation_id": correlation_id,
            "after_seq": after_seq,
            "before_seq": before_seq,
        }
        result: TimelinePage = self.call("incident_timeline", args)
        return result

    def incident_report(
        self,
        project_id: str,
        conversation_id: str,
        correlation_id: str | None = None,
        format: str = "json",
    ) -> IncidentReport | str:
        """Return the incident report: a dict (``format="json"``), Markdown (``md``) or HTML."""
        args = {
            "project_id": project_id,
            "conversation_id": conversation_id,
            "correlation_id": correlation_id,
            "format": format,
        }
        result: IncidentReport | str = self.call("incident_report", args)
        return result

    def subscribe(
        self, project_id: str, conversation_id: str | None = None, after_seq: int = 0
    ) -> EventStream:
        """Stream committed events with ``seq > after_seq``, live, on a connection of its own.

        The stream resumes from the last seq seen when its connection drops (a few tries);
        ``close()`` it (or use ``with``) to stop.
        """
        stream = EventStream(
            self.socket_path,
            home=self.home,
            args={"project_id": project_id, "conversation_id": conversation_id},
            after_seq=after_seq,
            connect_timeout_s=self.timeout_s,
            max_frame_bytes=self.max_frame_bytes,
        )
        stream.open()
        return stream
