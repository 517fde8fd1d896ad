"""Each op's argument Struct: what a client may send, field by field.

:data:`runtime.wire.ops.OP_TABLE` names the Struct of each op; ``validate_args`` checks a
request's arguments against it (unknown keys refused); a :class:`Call` carries them down,
as that Struct, with the ids the gateway gave the request. Declarations only.
"""

from __future__ import annotations

from typing import Annotated, Any, Generic, Literal, TypeVar

import msgspec

from runtime.errors import RoostError
from runtime.wire.names import PROJECTION_KEYS

__all__ = [
    "PROJECTION_KEYS",
    "A",
    "Args",
    "Call",
    "CallArgs",
    "CancelArgs",
    "ConversationArgs",
    "DeleteProjectArgs",
    "InboundEvent",
    "InjectFaultArgs",
    "ListProjectsArgs",
    "ListToolsArgs",
    "NoArgs",
    "ProjectArgs",
    "ProjectEventsArgs",
    "ProjectionArgs",
    "ProtocolArgs",
    "RejectArgs",
    "ReportArgs",
    "RunToolArgs",
    "SendEventArgs",
    "StartConversationArgs",
    "StartProjectArgs",
    "SubscribeArgs",
    "TimelineArgs",
    "ToolMeta",
    "ToolRequest",
]


NonNegative = Annotated[float, msgspec.Meta(ge=0)]
Seq = Annotated[int, msgspec.Meta(ge=0)]


class Args(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Base of every op's arguments; unknown keys are refused."""


class NoArgs(Args, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """An op without arguments (``ping``, ``status``, ``shutdown``, ``list_projects``)."""


class ProjectArgs(Args, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """An op on one project."""

    project_id: str
    """The project."""


class ConversationArgs(Args, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """An op on one conversation."""

    project_id: str
    """The project."""
    conversation_id: str
    """The conversation."""


class StartProjectArgs(Args, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``start_project``: start (or restore) a project on a directory."""

    root: str
    """Absolute path of the project's root directory."""
    project_id: str | None = None
    """The id to use; the daemon picks one when null."""
    options: dict[str, Any] = {}
    """Runtime options (SPEC section 5), validated by the project."""


class ToolMeta(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Where a ``run_tool`` call belongs."""

    conversation_id: str | None = None
    """The conversation whose timeline receives the call's events, if any."""
    correlation_id: str | None = None
    """The correlation to record; generated when null."""
    source: Literal["run_tool", "mcp"] = "run_tool"
    """Who makes the call, recorded in ``tool.requested``: a client (``run_tool``) or an MCP
    client through ``roost mcp serve`` (``mcp``); both are unattended (``ask`` is refused)."""


class ToolRequest(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The tool call of ``run_tool``."""

    name: str
    """Tool name, e.g. ``fs.read``."""
    args: dict[str, Any] = {}
    """The tool's arguments."""
    meta: ToolMeta = msgspec.field(default_factory=ToolMeta)
    """Conversation and correlation of the call."""


class RunToolArgs(ProjectArgs, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``run_tool``: run one tool call outside the model loop."""

    request: ToolRequest
    """The call."""


class DeleteProjectArgs(ProjectArgs, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``delete_project``: delete a stopped project's whole history."""

    deleted_by: str = ""
    """Who asks (``user@host``), kept in the deletion record."""


class ListProjectsArgs(Args, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``list_projects``."""

    all: bool = False
    """Also the projects that do not run (stopped, failed), read from the journal."""


class ProjectEventsArgs(ProjectArgs, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``project_events``: the project's own history (its project-level events)."""

    limit: Annotated[int, msgspec.Meta(ge=1, le=500)] = 100
    """The last this many entries."""
    problems_only: bool = False
    """Only the entries that record a problem (a failed load, a crash, ...)."""


class ListToolsArgs(ProjectArgs, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``list_tools``."""

    source: Literal["model", "run_tool", "mcp"] | None = None
    """Null: the tools ``allow_tools``/``deny_tools`` let through. A source: only those of
    them the policy does not refuse every call of from that source (``offered_tools``)."""


class ProtocolArgs(ProjectArgs, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``check_protocol``: whether a protocol entry point may serve the project."""

    protocol: Literal["mcp", "a2a"]
    """The protocol, as ``protocol_allowlist`` names it."""
    operation: Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
    """What was attempted (e.g. ``POST /``), recorded in ``security.protocol_denied``."""
    correlation_id: str | None = None
    """The correlation of the event recorded when it is refused; generated when null."""


class InjectFaultArgs(ProjectArgs, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``inject_fault`` (only when the daemon runs with ``ROOST_FAULT_INJECTION=1``)."""

    target: str
    """The hosted child to crash: ``toolrunner``, ``policy`` or ``conversation:<id>``."""


class StartConversationArgs(ProjectArgs, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``start_conversation``."""

    conversation_id: str | None = None
    """The id to use; the daemon picks one when null."""


class InboundEvent(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """An inbound event as ``send_event`` carries it."""

    type: str
    """Dotted event type, e.g. ``user.message``."""
    data: dict[str, Any] = {}
    """The type's payload."""
    correlation_id: str | None = None
    """The correlation; generated (``corr-`` + 20 hex) when null."""


class SendEventArgs(ConversationArgs, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``send_event``: append an inbound event, optionally waiting for its turn to end."""

    event: InboundEvent
    """The event."""
    wait: bool = False
    """Return when the turn the event started is over, not at commit."""
    wait_timeout_s: NonNegative = 60.0
    """With ``wait``: seconds before the request fails with ``timeout``."""
    idempotency_key: str | None = None
    """A retried request with the same key is not appended twice."""


class CancelArgs(ConversationArgs, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``cancel``: cancel the conversation's pending work."""

    correlation_id: str | None = None
    """The correlation of the cancel event; generated when null."""
    reason: str | None = None
    """Why, for the timeline."""


class CallArgs(ConversationArgs, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``approve``: approve a call awaiting approval."""

    call_id: str
    """The call."""


class RejectArgs(ConversationArgs, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``reject``: reject a call awaiting approval."""

    call_id: str
    """The call."""
    reason: str | None = None
    """Why, recorded in ``tool.rejected``."""


class ProjectionArgs(ConversationArgs, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``get_projection``."""

    key: Literal["timeline", "pending_tool_calls", "llm_context", "diagnostics"]
    """Which projection."""


class TimelineArgs(ConversationArgs, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``incident_timeline``."""

    limit: Any = 100
    """Entries to keep (the last ones); capped at 500, anything invalid means 100."""
    correlation_id: str | None = None
    """Only entries of this correlation."""
    after_seq: Seq | None = None
    """A page forward: the first ``limit`` entries whose ``seq`` is greater than this."""
    before_seq: Seq | None = None
    """Only entries whose ``seq`` is less than this (the last ``limit`` of them, unless
    ``after_seq`` is given too); must be greater than ``after_seq``."""


class ReportArgs(ConversationArgs, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``incident_report``."""

    correlation_id: str | None = None
    """Only this correlation's story."""
    format: Literal["json", "md", "html"] = "json"
    """``json`` gives an object, ``md`` a Markdown string, ``html`` a self-contained page."""


class SubscribeArgs(ProjectArgs, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``subscribe``: stream committed events after a cursor."""

    conversation_id: str | None = None
    """Only this conversation's events (signals included); the whole project when null."""
    after_seq: Seq = 0
    """Stream events whose ``seq`` is greater than this."""


A = TypeVar("A", bound=Args)
"""An op's arguments Struct."""


class Call(msgspec.Struct, Generic[A], frozen=True, kw_only=True):
    """One request on its way down: its op, its arguments Struct, the ids the gateway gave it.

    The gateway makes it (``runtime.wire.ops.with_ids``); every level below only reads it.
    """

    op: str
    """The operation."""
    args: A
    """Its arguments, validated (every default filled in)."""
    correlation_id: str | None = None
    """The correlation of what it records (``correlated`` ops): the client's or minted."""
    idempotency_key: str | None = None
    """Its idempotency key (``send_event``): the client's or minted."""

    def correlation(self) -> str:
        """The correlation id the gateway gave it (``internal_error`` when none)."""
        return _minted(self.op, self.correlation_id, "correlation_id")

    def idempotency(self) -> str:
        """The idempotency key the gateway gave it (``internal_error`` when none)."""
        return _minted(self.op, self.idempotency_key, "idempotency_key")


def _minted(op: str, value: str | None, what: str) -> str:
    if not value:
        raise RoostError(
            f"{op} reached the runtime without its {what}: the gateway mints it, so this "
            "request did not come through the gateway",
            reason=f"missing_{what}",
            op=op,
        )
    return value
