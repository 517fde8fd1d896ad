"""The daemon log's activity lines: what the projects do, one structured line per step.

``roost logs -f`` shows the daemon's own life (start, stop, connections, failed requests);
this adds what happens in the projects. An :class:`ActivityFollower` thread reads the
events committed after the daemon started, as the telemetry exporter does, and
:class:`ActivityLog` (plain: no clock, no I/O) turns each one worth a line into
``(level, event, fields)``: a project started or stopped, its assets and MCP servers
loaded or failed, a conversation started or stopped, a turn started and ended (outcome,
``duration_ms``), a tool call ended (outcome, code, ``duration_ms``) or was denied, an
actor crashed, restarted or escalated, a security signal. Every line carries the event's
``seq``, ``project_id`` and, when it has them, ``conversation_id`` and ``correlation_id``,
so a line leads to the timeline (``roost timeline``) and the incident report.

The lines come from committed events, so they say what the journal holds, a poll
(0.2 s) after it was committed; a failed request is logged by the gateway.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, TypedDict

from events import catalog as ev
from events.catalog import PAYLOAD_TYPES, TERMINAL_TOOL_TYPES, decode_data
from events.envelope import Envelope
from events.incidents import epoch_ms
from events.projections import TURN_END_TYPES
from runtime.logging import get_logger
from runtime.telemetry.committed import CommittedFollower, ReadAfter

__all__ = [
    "LINE_TYPES",
    "MAX_OPEN",
    "ActivityFollower",
    "ActivityLog",
    "Line",
    "LineEvents",
    "LineFields",
]


class LineFields(TypedDict, total=False):
    """An activity line's fields: the event's ids, then what its kind tells."""

    seq: int
    project_id: str
    conversation_id: str
    correlation_id: str
    tool: str
    call_id: str | None
    outcome: str
    duration_ms: int
    code: str | None
    error: str | None
    reason: str
    root: str
    counts: dict[str, int]
    what: str | None
    key: str | None
    actor: str
    restart_count: int
    phase: str
    refused: int
    server: str
    start_ms: int
    signal: str
    router: str
    budget: str
    limit: int
    used: int
    type: str


Line = tuple[str, str, LineFields]
"""A log line to write: its level, its event name, its fields."""

MAX_OPEN: Final = 1000
"""Turns and tool calls remembered for their duration; beyond it the oldest is forgotten."""


log = get_logger("roost.activity")


def _bounded_put(table: dict[str, int | None], key: str, value: int | None) -> None:
    table.pop(key, None)
    if len(table) >= MAX_OPEN:
        table.pop(next(iter(table)))
    table[key] = value


def _elapsed(start: int | None, event: Envelope) -> int | None:
    end = epoch_ms(event.at)
    return end - start if start is not None and end is not None else None


class ActivityLog:
    """Folds committed events into activity lines (the start times it needs, bounded)."""

    def __init__(self) -> None:
        self._turns: dict[str, int | None] = {}
        self._calls: dict[str, int | None] = {}

    def lines(self, event: Envelope) -> list[Line]:
        """The lines ``event`` is worth (none for most deltas, decisions and signals)."""
        ids: LineFields = {"seq": event.seq, "project_id": event.project_id}
        if event.conversation_id is not None:
            ids["conversation_id"] = event.conversation_id
        if event.type not in _PROJECT_TYPES:
            ids["correlation_id"] = event.correlation_id
        payload = decode_data(event.type, event.data)
        return _STEPS.get(event.type, ActivityLog._other)(self, event, payload, ids)

    def _turn_started(
        self, event: Envelope, payload: ev.Event | None, ids: LineFields
    ) -> list[Line]:
        _bounded_put(self._turns, self._turn_key(event), epoch_ms(event.at))
        return [("info", "turn_started", ids)]

    def _call_started(
        self, event: Envelope, payload: ev.Event | None, ids: LineFields
    ) -> list[Line]:
        call_id = event.data.get("call_id")
        if isinstance(call_id, str):
            _bounded_put(self._calls, call_id, epoch_ms(event.at))
        return []

    def _timed_out(self, event: Envelope, payload: ev.Event | None, ids: LineFields) -> list[Line]:
        return [("warning", "tool_timeout", {**ids, "call_id": _payload_call(payload)})]

    def _other(self, event: Envelope, payload: ev.Event | None, ids: LineFields) -> list[Line]:
        return _described(event.type, payload, ids)

    @staticmethod
    def _turn_key(event: Envelope) -> str:
        return f"{event.project_id}/{event.conversation_id}/{event.correlation_id}"

    def _ended(self, event: Envelope, payload: ev.Event | None, ids: LineFields) -> list[Line]:
        fields: LineFields
        extra: LineFields
        match payload:
            case ev.ToolCompleted(name=name, call_id=call_id, duration_ms=ms):
                self._calls.pop(call_id, None)
                fields = {"tool": name, "call_id": call_id, "outcome": "completed"}
                return [("info", "tool_call_ended", {**ids, **fields, "duration_ms": ms})]
            case ev.ToolFailed(name=name, call_id=call_id, reason=reason, duration_ms=ms):
                self._calls.pop(call_id, None)
                fields = {"tool": name, "call_id": call_id, "outcome": "failed", "duration_ms": ms}
                fields["code"] = reason.get("code")
                fields["error"] = reason.get("message")
                return [("warning", "tool_call_ended", {**ids, **fields})]
            case ev.ToolCancelled(name=name, call_id=call_id, reason=reason):
                start = self._calls.pop(call_id, None)
                fields = {"tool": name, "call_id": call_id, "outcome": "cancelled", "code": reason}
                return [("info", "tool_call_ended", {**ids, **fields, **_ms(start, event)})]
        start = self._turns.pop(self._turn_key(event), None)
        fields = {"outcome": event.type, **_ms(start, event)}
        match payload:
            case ev.LlmFailed(reason=reason, message=message):
                extra = {"code": reason, "error": message}
                return [("warning", "turn_ended", {**ids, **fields, **extra})]
            case ev.BudgetExceeded(budget=budget, limit=limit, used=used):
                extra = {"budget": budget, "limit": limit, "used": used}
                return [("warning", "turn_ended", {**ids, **fields, **extra})]
        return [("info", "turn_ended", {**ids, **fields})]


_STEPS: Final[
    dict[str, Callable[[ActivityLog, Envelope, ev.Event | None, LineFields], list[Line]]]
] = {
    "user.message": ActivityLog._turn_started,
    "tool.started": ActivityLog._call_started,
    "tool.timeout": ActivityLog._timed_out,
    **dict.fromkeys(TERMINAL_TOOL_TYPES | TURN_END_TYPES, ActivityLog._ended),
}
"""The events whose lines need the start times the log keeps, or no payload of their own;
any other: ``_described``."""


def _ms(start: int | None, event: Envelope) -> LineFields:
    elapsed = _elapsed(start, event)
    return {} if elapsed is None else {"duration_ms": elapsed}


_PROJECT_TYPES: Final = frozenset(
    {"project.started", "project.stopped", "project.assets_loaded", "project.assets_reloaded"}
)


def _described(kind: str, payload: ev.Event | None, ids: LineFields) -> list[Line]:
    """The lines of the events that need no memory of earlier ones."""
    fields: LineFields
    match payload:
        case ev.ProjectStarted(root=root):
            return [("info", "project_started", {**ids, "root": root})]
        case ev.ProjectStopped(reason=reason):
            level = "info" if reason == "requested" else "warning"
            return [(level, "project_stopped", {**ids, "reason": reason})]
        case (
            ev.ProjectAssetsLoaded(counts=counts, errors=errors)
            | ev.ProjectAssetsReloaded(counts=counts, errors=errors)
        ):
            lines: list[Line] = [("info", "project_assets_loaded", {**ids, "counts": counts})]
            lines.extend(
                (
                    "warning",
                    "project_load_failed",
                    {
                        **ids,
                        "what": error.get("type"),
                        "key": error.get("key"),
                        "error": error.get("reason"),
                    },
                )
                for error in errors
            )
            return lines
        case ev.ConversationStarted():
            return [("info", "conversation_started", ids)]
        case ev.ConversationStopped(reason=reason):
            return [("info", "conversation_stopped", {**ids, "reason": reason})]
        case ev.ConversationCancel(reason=reason):
            return [("info", "conversation_cancelled", {**ids, "reason": reason})]
        case ev.ToolApprovalRequested(call_id=call_id):
            return [("info", "tool_call_awaiting_approval", {**ids, "call_id": call_id})]
        case ev.PolicyDenied(tool=tool, call_id=call_id, reason=reason):
            fields = {"tool": tool, "call_id": call_id, "reason": reason}
            return [("warning", "tool_call_denied", {**ids, **fields})]
        case ev.ActorCrashed(actor=actor, reason=reason, restart_count=count):
            fields = {"actor": actor, "reason": reason, "restart_count": count}
            return [("error", "actor_crashed", {**ids, **fields})]
        case ev.ActorEscalated(actor=actor, reason=reason, restart_count=count):
            fields = {"actor": actor, "reason": reason, "restart_count": count}
            return [("error", "actor_escalated", {**ids, **fields})]
        case ev.ActorRestarted(actor=actor, reason=reason, restart_count=count):
            fields = {"actor": actor, "reason": reason, "restart_count": count}
            return [("warning", "actor_restarted", {**ids, **fields})]
        case ev.ActorMailboxOverflow(actor=actor, phase=phase, refused=refused):
            fields = {"actor": actor, "phase": phase, "refused": refused}
            return [("warning", "actor_mailbox_overflow", {**ids, **fields})]
        case (
            ev.McpServerStarted(server=server, start_ms=start_ms)
            | ev.McpServerRestarted(server=server, start_ms=start_ms)
        ):
            fields = {"server": server, "start_ms": start_ms}
            return [("info", "mcp_server_started", {**ids, **fields})]
        case ev.McpServerExited(server=server, reason=reason, detail=detail):
            fields = {"server": server, "reason": reason, "error": detail}
            return [("warning", "mcp_server_exited", {**ids, **fields})]
        case ev.AlertFailed(event=signal, router=router, reason=reason):
            fields = {"signal": signal, "router": router, "error": reason}
            return [("warning", "alert_failed", {**ids, **fields})]
    if kind.startswith("security."):
        return [("warning", "security_signal", {**ids, "type": kind})]
    return []


_DESCRIBED_TYPES: Final = frozenset(
    {
        *_PROJECT_TYPES,
        "conversation.started",
        "conversation.stopped",
        "conversation.cancel",
        "tool.approval_requested",
        "policy.denied",
        "actor.crashed",
        "actor.escalated",
        "actor.restarted",
        "actor.mailbox_overflow",
        "mcp.server_started",
        "mcp.server_restarted",
        "mcp.server_exited",
        "alert.failed",
    }
)
"""The types whose payloads :func:`_described` matches (a test reads them off its cases)."""

LINE_TYPES: Final = frozenset(
    kind
    for kind in PAYLOAD_TYPES
    if kind in _STEPS or kind in _DESCRIBED_TYPES or kind.startswith("security.")
)
"""The types that may be worth a line; the follower reads no other (a turn's deltas,
messages, requests and decisions, most of what is committed, are not even decoded)."""


_LINE_TYPE_LIST: Final = sorted(LINE_TYPES)


def _payload_call(payload: ev.Event | None) -> str | None:
    """The call id a signal names, if any."""
    call_id = getattr(payload, "call_id", None)
    return call_id if isinstance(call_id, str) else None


class ActivityFollower:
    """A thread that writes the activity lines of every event committed after a position."""

    def __init__(self, read_after: ReadAfter, after_seq: int) -> None:
        self._fold = ActivityLog()
        self._log = log.bind()
        """The logger as configured now (the daemon configures it before it follows): the
        lazy module logger would bind itself again at every line."""
        self._follower = CommittedFollower(
            read_after,
            after_seq,
            self._write,
            name="roost-activity",
            log=log,
            read_failed="activity_read_failed",
        )

    def start(self) -> ActivityFollower:
        """Start following; return self."""
        self._follower.start()
        return self

    def stop(self) -> None:
        """Write the lines of what is committed already, then end the thread."""
        self._follower.stop()

    def _write(self, event: Envelope) -> None:
        try:
            for level, name, fields in self._fold.lines(event):
                getattr(self._log, level)(name, **fields)
        except Exception as e:  # one odd event never stops the others' lines
            log.warning("activity_line_failed", seq=event.seq, error=f"{e!r}")


class LineEvents:
    """The follower's read: the events of :data:`LINE_TYPES` after a position, a page a call.

    The follower's cursor is the last event it observed; this remembers how far the last
    read looked (up to the head it saw), so the events of other types after that event are
    not looked at again at every poll.
    """

    def __init__(self, journal: Any, page: int = 500) -> None:
        """``journal``: a :class:`runtime.journal.store.Journal`."""
        self.journal = journal
        self.page = page
        self.through = 0
        """The position every event up to which was read (the lines' types, or skipped)."""

    def __call__(self, after_seq: int) -> list[Envelope]:
        """The next page of line events after ``after_seq`` (or after what was read)."""
        start = max(after_seq, self.through)
        head = self.journal.max_seq()
        events: list[Envelope] = self.journal.read_all(
            after_seq=start, limit=self.page, types=_LINE_TYPE_LIST
        )
        # fewer than a page: every event to the head read first was looked at
        self.through = events[-1].seq if len(events) == self.page else max(start, head)
        return events
