"""An in-memory Backend with every op, to test the transport, client and CLI for real.

``ROOST_BACKEND=tests.runtime.fake_backend:create`` makes a real daemon process serve
requests from this. Shapes are plausible, not faithful; errors use the real codes. Its
dispatch is built from the op table as the real backend's is
(``runtime.wire.ops.op_handlers``, with no fallback to actors): an op the table gains fails
this module's import until the fake serves it too, so the two cannot drift apart.

Hooks for tests: a ``send_event`` whose ``data`` has ``"hang": true`` and ``wait`` never
finishes its turn (so ``wait`` ends with ``timeout``); ``run_tool`` of ``fake.crash``
raises a plain exception (``internal_error``); a project root holding a file named
``.fake-verify-mismatch`` fails ``verify``; ``fake.big`` returns ``args.size`` bytes;
``ROOST_FAKE_CLOSE_HANG=1`` makes ``close()`` hang (a daemon that will not stop).
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import msgspec

from events.envelope import GENESIS_HASH, format_at, new_correlation_id, new_event_id
from runtime.daemon.config import DaemonConfig
from runtime.errors import (
    AlreadyStartedError,
    BadRequestError,
    ConversationAlreadyStartedError,
    ConversationNotFoundError,
    InvalidRootPathError,
    InvalidRuntimeOptError,
    ProjectNotFoundError,
    ProjectRunningError,
    RequestTimeoutError,
)
from runtime.wire.dispatch import op_handlers
from runtime.wire.op_args import (
    CallArgs,
    CancelArgs,
    ConversationArgs,
    DeleteProjectArgs,
    InjectFaultArgs,
    ProjectArgs,
    ProjectEventsArgs,
    ProtocolArgs,
    RejectArgs,
    SubscribeArgs,
)
from runtime.wire.ops import Call, event_type_of

KNOWN_OPTIONS = {"tool_timeout_ms": 30000, "max_rounds": 25, "approval_mode": "never"}

TOOLS = [
    {
        "name": "fs.list",
        "description": "List files under a directory of the project.",
        "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
        "read_only": True,
        "writes": False,
        "network_capable": False,
        "runs_commands": False,
    },
    {
        "name": "fs.read",
        "description": "Read a file of the project.",
        "input_schema": {
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
        },
        "read_only": True,
        "writes": False,
        "network_capable": False,
        "runs_commands": False,
    },
]


@dataclass
class Project:
    """A fake project."""

    project_id: str
    root: str
    options: dict[str, Any]
    started_at: str
    conversations: dict[str, str] = field(default_factory=dict)
    versions: dict[str | None, int] = field(default_factory=dict)
    last_hash: str = GENESIS_HASH


class FakeBackend:
    """Projects, conversations and one event list, behind a condition variable."""

    def __init__(self, config: DaemonConfig | None = None) -> None:
        self.config = config
        self.projects: dict[str, Project] = {}
        self.events: list[dict[str, Any]] = []
        self.acks: dict[str, dict[str, Any]] = {}
        self.cond = threading.Condition()
        self.closed = False
        self._ids = 0
        self._ops = op_handlers(self, "daemon")  # a subclass's own op methods included

    # --- helpers --------------------------------------------------------------------

    def _project(self, project_id: str) -> Project:
        project = self.projects.get(project_id)
        if project is None:
            raise ProjectNotFoundError(f"no project {project_id!r}", project_id=project_id)
        return project

    def _conversation(self, project_id: str, conversation_id: str) -> Project:
        project = self._project(project_id)
        if conversation_id not in project.conversations:
            raise ConversationNotFoundError(
                f"no conversation {conversation_id!r} in project {project_id!r}",
                project_id=project_id,
                conversation_id=conversation_id,
            )
        return project

    def _append(
        self,
        project: Project,
        conversation_id: str | None,
        type_: str,
        data: dict[str, Any],
        correlation_id: str | None = None,
    ) -> dict[str, Any]:
        version = project.versions.get(conversation_id, 0) + 1
        project.versions[conversation_id] = version
        event = {
            "seq": len(self.events) + 1,
            "stream_version": version,
            "event_id": new_event_id(),
            "type": type_,
            "at": format_at(datetime.now(UTC)),
            "project_id": project.project_id,
            "conversation_id": conversation_id,
            "correlation_id": correlation_id or new_correlation_id(),
            "causation_id": None,
            "data": data,
            "prev_hash": project.last_hash,
        }
        digest = hashlib.sha256(msgspec.json.encode(event, order="sorted")).hexdigest()
        event["hash"] = digest
        project.last_hash = digest
        self.events.append(event)
        self.cond.notify_all()
        return event

    def _next_id(self, prefix: str) -> str:
        self._ids += 1
        return f"{prefix}-{self._ids}"

    def _conv_events(self, project_id: str, conversation_id: str) -> list[dict[str, Any]]:
        return [
            e
            for e in self.events
            if e["project_id"] == project_id and e["conversation_id"] == conversation_id
        ]

    # --- Backend --------------------------------------------------------------------

    def handle(self, call: Call[Any], *, deadline: float) -> Any:
        """Serve one op with its ``op_<name>`` method (``_OPS``, built from the op table)."""
        with self.cond:
            return self._ops[call.op](call, deadline)

    def status(self, *, deadline: float) -> dict[str, Any]:
        """The backend's part of ``status``."""
        with self.cond:
            return {"projects": len(self.projects), "backend": "fake"}

    def subscribe(self, args: SubscribeArgs, stop: threading.Event) -> Iterator[dict[str, Any]]:
        """Yield the project's events after ``after_seq``; end when the project stops."""
        project_id, conversation_id, cursor = args.project_id, args.conversation_id, args.after_seq
        with self.cond:
            self._project(project_id)
        while not stop.is_set() and not self.closed:
            with self.cond:
                batch = self.events[cursor:]
                if not batch:
                    self.cond.wait(0.05)
                    continue
            for event in batch:
                cursor = event["seq"]
                if event["project_id"] != project_id:
                    continue
                if conversation_id is not None and event["conversation_id"] != conversation_id:
                    continue
                yield event
                if event["type"] == "project.stopped":
                    return

    def close(self) -> None:
        """Wake every subscriber and refuse further work."""
        if os.environ.get("ROOST_FAKE_CLOSE_HANG") == "1":
            threading.Event().wait()
        with self.cond:
            self.closed = True
            self.cond.notify_all()

    # --- ops ------------------------------------------------------------------------

    def op_start_project(self, call: Call[Any], deadline: float) -> str:
        args = call.args
        root = args.root
        if not os.path.isdir(root):
            raise InvalidRootPathError(f"project root {root!r} is not a directory", root=root)
        for key in args.options:
            if key not in KNOWN_OPTIONS:
                raise InvalidRuntimeOptError(
                    f"unknown option {key!r}", key=key, reason="unknown_option"
                )
        project_id = args.project_id or self._next_id("proj")
        if project_id in self.projects:
            raise AlreadyStartedError(
                f"project {project_id!r} is already running", project_id=project_id
            )
        options = {**KNOWN_OPTIONS, **args.options}
        project = Project(project_id, root, options, format_at(datetime.now(UTC)))
        self.projects[project_id] = project
        self._append(project, None, "project.started", {"root": root, "options": options})
        return project_id

    def op_stop_project(self, call: Call[Any], deadline: float) -> dict[str, Any]:
        args = call.args
        project = self._project(args.project_id)
        self._append(project, None, "project.stopped", {})
        del self.projects[project.project_id]
        return {"project_id": project.project_id, "stopped": True}

    def op_list_projects(self, call: Call[Any], deadline: float) -> list[dict[str, Any]]:
        return [
            {
                "project_id": p.project_id,
                "root": p.root,
                "conversation_count": len(p.conversations),
                "started_at": p.started_at,
            }
            for p in sorted(self.projects.values(), key=lambda p: p.project_id)
        ]

    def op_diagnostics(self, call: Call[Any], deadline: float) -> dict[str, Any]:
        args = call.args
        p = self._project(args.project_id)
        return {
            "project_id": p.project_id,
            "root": p.root,
            "options": p.options,
            "health": {"status": "ok"},
            "sandbox_layers": {"openat2": True},
            "recent_decisions": [],
            "signal_counts": {},
            "conversations": sorted(p.conversations),
        }

    def op_list_tools(self, call: Call[Any], deadline: float) -> list[dict[str, Any]]:
        args = call.args
        self._project(args.project_id)
        return TOOLS

    def op_run_tool(self, call: Call[Any], deadline: float) -> dict[str, Any]:
        args = call.args
        p = self._project(args.project_id)
        request = args.request
        meta = request.meta
        if meta.conversation_id is not None:
            self._conversation(p.project_id, meta.conversation_id)
        name = request.name
        if name == "fake.crash":
            raise RuntimeError("the fake tool crashed")
        base = {
            "tool": name,
            "call_id": self._next_id("call"),
            "conversation_id": meta.conversation_id,
            "correlation_id": call.correlation(),
            "duration_ms": 1,
        }
        if name == "fake.big":
            return {**base, "status": "ok", "kind": "sync", "result": "x" * request.args["size"]}
        if name not in {t["name"] for t in TOOLS}:
            reason = {"code": "unknown_tool", "message": f"no tool {name!r}"}
            return {**base, "status": "error", "reason": reason}
        result = {**base, "status": "ok", "kind": "sync", "result": {"args": request.args}}
        if meta.conversation_id is not None:
            self._append(p, meta.conversation_id, "tool.completed", result, base["correlation_id"])
        return result

    def op_start_conversation(self, call: Call[Any], deadline: float) -> str:
        args = call.args
        p = self._project(args.project_id)
        conversation_id = args.conversation_id or self._next_id("conv")
        if conversation_id in p.conversations:
            raise ConversationAlreadyStartedError(
                f"conversation {conversation_id!r} already exists",
                project_id=p.project_id,
                conversation_id=conversation_id,
            )
        p.conversations[conversation_id] = "idle"
        self._append(p, conversation_id, "conversation.started", {})
        return conversation_id

    def op_stop_conversation(self, call: Call[Any], deadline: float) -> dict[str, Any]:
        args = call.args
        p = self._conversation(args.project_id, args.conversation_id)
        self._append(p, args.conversation_id, "conversation.stopped", {})
        del p.conversations[args.conversation_id]
        return {"conversation_id": args.conversation_id, "stopped": True}

    def op_send_event(self, call: Call[Any], deadline: float) -> dict[str, Any]:
        args = call.args
        p = self._conversation(args.project_id, args.conversation_id)
        key = args.idempotency_key
        if key is not None and key in self.acks:
            return self.acks[key]
        inbound = args.event
        event = self._append(
            p, args.conversation_id, inbound.type, inbound.data, call.correlation()
        )
        ack: dict[str, Any] = {
            "seq": event["seq"],
            "event_id": event["event_id"],
            "correlation_id": event["correlation_id"],
        }
        if key is not None:
            self.acks[key] = ack
        if not args.wait:
            return ack
        if inbound.data.get("hang"):
            limit = time.monotonic() + args.wait_timeout_s
            while time.monotonic() < limit:
                self.cond.wait(limit - time.monotonic())
            raise RequestTimeoutError(
                f"the turn did not end within {args.wait_timeout_s} s",
                timeout_s=args.wait_timeout_s,
            )
        content = inbound.data.get("content", "")
        corr = event["correlation_id"]
        self._append(
            p,
            args.conversation_id,
            "assistant.message",
            {"content": f"Acknowledged: {content}"},
            corr,
        )
        done = self._append(
            p,
            args.conversation_id,
            "llm.completed",
            {"finish_reason": "stop", "tool_call_count": 0, "usage": {}},
            corr,
        )
        return {**ack, "outcome": "completed", "final_seq": done["seq"]}

    def _ack(self, call: Call[Any], data: dict[str, Any]) -> dict[str, Any]:
        """Record the op's own inbound event (its row's ``event_type``); answer its ack."""
        args = call.args
        p = self._conversation(args.project_id, args.conversation_id)
        type_ = event_type_of(call.op)
        assert type_ is not None
        event = self._append(p, args.conversation_id, type_, data, call.correlation())
        return {k: event[k] for k in ("seq", "event_id", "correlation_id")}

    def op_cancel(self, call: Call[CancelArgs], deadline: float) -> dict[str, Any]:
        return self._ack(call, {"reason": call.args.reason or "user"})

    def op_resume(self, call: Call[ConversationArgs], deadline: float) -> dict[str, Any]:
        return self._ack(call, {})

    def op_approve(self, call: Call[CallArgs], deadline: float) -> dict[str, Any]:
        return self._ack(call, {"call_id": call.args.call_id, "reason": None})

    def op_reject(self, call: Call[RejectArgs], deadline: float) -> dict[str, Any]:
        return self._ack(call, {"call_id": call.args.call_id, "reason": call.args.reason})

    def op_get_projection(self, call: Call[Any], deadline: float) -> Any:
        args = call.args
        self._conversation(args.project_id, args.conversation_id)
        events = self._conv_events(args.project_id, args.conversation_id)
        key = args.key
        if key == "timeline":
            return events
        if key == "pending_tool_calls":
            return []
        if key == "llm_context":
            return [
                {"role": "user", "content": e["data"].get("content", "")}
                for e in events
                if e["type"] == "user.message"
            ]
        return {
            "event_count": len(events),
            "pending_tool_call_count": 0,
            "last_event_type": events[-1]["type"] if events else None,
            "status": "idle",
        }

    def op_incident_timeline(self, call: Call[Any], deadline: float) -> dict[str, Any]:
        args = call.args
        self._conversation(args.project_id, args.conversation_id)
        limit = args.limit
        if not isinstance(limit, int) or isinstance(limit, bool) or limit <= 0:
            limit = 100
        limit = min(limit, 500)
        corr = args.correlation_id
        events = [
            e
            for e in self._conv_events(args.project_id, args.conversation_id)
            if corr is None or e["correlation_id"] == corr
        ]
        entries = [
            {
                "seq": e["seq"],
                "event_id": e["event_id"],
                "at": e["at"],
                "source": "conversation",
                "type": e["type"],
                "correlation_id": e["correlation_id"],
                "causation_id": e["causation_id"],
                "data": e["data"],
            }
            for e in events[-limit:]
        ]
        return {
            "project_id": args.project_id,
            "conversation_id": args.conversation_id,
            "correlation_id": corr,
            "limit": limit,
            "total_entries": len(events),
            "entries": entries,
        }

    def op_incident_report(self, call: Call[Any], deadline: float) -> Any:
        args = call.args
        self._conversation(args.project_id, args.conversation_id)
        events = self._conv_events(args.project_id, args.conversation_id)
        asked = [e["data"].get("content") for e in events if e["type"] == "user.message"]
        report = {
            "project_id": args.project_id,
            "conversation_id": args.conversation_id,
            "correlation_id": args.correlation_id,
            "asked": asked,
            "event_count": len(events),
            "first_error": None,
        }
        if args.format == "md":
            lines = [f"# Incident report: {args.conversation_id}", ""]
            lines += [f"- asked: {text}" for text in asked]
            return "\n".join(lines) + "\n"
        return report

    def op_delete_project(self, call: Call[DeleteProjectArgs], deadline: float) -> Any:
        project_id = call.args.project_id
        if project_id in self.projects:
            raise ProjectRunningError(
                f"project {project_id} is running; stop it first",
                project_id=project_id,
                reason="running",
            )
        kept = [e for e in self.events if e["project_id"] != project_id]
        if len(kept) == len(self.events):
            raise ProjectNotFoundError(f"no project {project_id!r}", project_id=project_id)
        deleted, self.events[:] = len(self.events) - len(kept), kept
        return {"project_id": project_id, "deleted_events": deleted}

    def op_describe_project(self, call: Call[ProjectArgs], deadline: float) -> Any:
        p = self._project(call.args.project_id)
        return {"project_id": p.project_id, "root": p.root, "options": p.options}

    def op_check_protocol(self, call: Call[ProtocolArgs], deadline: float) -> Any:
        p = self._project(call.args.project_id)
        allowed = call.args.protocol in p.options.get("protocol_allowlist", [])
        return {"protocol": call.args.protocol, "allowed": allowed}

    def op_inject_fault(self, call: Call[InjectFaultArgs], deadline: float) -> Any:
        self._project(call.args.project_id)
        raise BadRequestError(
            "inject_fault is refused: the fake backend has no hosted children",
            reason="fault_injection_disabled",
        )

    def op_project_events(self, call: Call[ProjectEventsArgs], deadline: float) -> Any:
        p = self._project(call.args.project_id)
        own = [e for e in self.events if e["project_id"] == p.project_id]
        own = [e for e in own if e["conversation_id"] is None]
        entries = [{"seq": e["seq"], "at": e["at"], "type": e["type"]} for e in own]
        return {
            "project_id": p.project_id,
            "limit": call.args.limit,
            "total_entries": len(entries),
            "entries": entries[-call.args.limit :],
        }

    def op_verify(self, call: Call[Any], deadline: float) -> dict[str, Any]:
        args = call.args
        p = self._project(args.project_id)
        count = sum(1 for e in self.events if e["project_id"] == p.project_id)
        if os.path.exists(os.path.join(p.root, ".fake-verify-mismatch")):
            mismatch = {"kind": "projection", "conversation_id": "c1", "projection": "timeline"}
            return {
                "ok": False,
                "checked_events": count,
                "chain_ok": True,
                "mismatches": [mismatch],
            }
        return {"ok": True, "checked_events": count, "chain_ok": True, "mismatches": []}


_OPS = op_handlers(FakeBackend, "daemon")
"""Every op that reaches a backend, and the fake's method for it: importing this module
fails when the op table has an op the fake does not serve, or the fake one the table lacks."""


def create(config: DaemonConfig) -> FakeBackend:
    """The factory named by ``ROOST_BACKEND=tests.runtime.fake_backend:create``."""
    return FakeBackend(config)
