"""One conversation's status and pending tool calls, folded one event at a time.

This is the only fold of them. The live conversation (``runtime.agent.ConversationCore``)
keeps a :class:`ConversationFold`, feeds it each committed event of the conversation and
drives its loop from it (the calls to ask the policy about, to start, to cancel; the turns
to run); the projections (``diagnostics``, ``pending_tool_calls``, ``conversation_status``,
the incident report's status) build one from the journal. A live view and a replay of the
same events therefore cannot disagree.

The rules (``docs/projections.md``):

- A call is pending from its first ``tool.requested`` until a terminal event
  (``tool.completed``, ``tool.failed``, ``tool.cancelled``) of its ``call_id``; a closed
  call stays closed (a repeated or late ``tool.requested`` does not reopen it; the latest
  ``CLOSED_KEPT`` closed calls are remembered, so the fold does not grow with history). Its
  ``phase`` follows the decision events: ``requested``, ``awaiting_approval``
  (``tool.approval_requested``), ``allowed`` (``policy.allowed``, ``tool.approved``),
  ``denied`` (``policy.denied``, ``tool.rejected``), ``started`` (``tool.started``). Its
  SPEC ``status`` is ``awaiting_approval`` in that phase and ``running`` in every other.
- A turn opens with a ``user.message`` while the model loop runs (``orchestration``) and
  the conversation is not cancelled, and closes with ``llm.completed``, ``llm.failed`` or
  ``budget.exceeded`` of its correlation; a ``conversation.cancel`` or
  ``conversation.stopped`` closes every open turn. With ``orchestration`` off no model
  loop runs, so a ``user.message`` opens no turn: the conversation stays ``idle``.
- ``status``: ``cancelled`` from ``conversation.cancel`` until ``conversation.resume``;
  else ``awaiting_approval`` when calls are pending and all await approval; else
  ``running`` when a call is pending or a turn is open; else ``idle``.

Events must come in ``seq`` order (:meth:`ConversationFold.of` sorts them).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final, Literal

import msgspec

from events.catalog import (
    PAYLOAD_TYPES,
    PolicyAllowed,
    PolicyDenied,
    ToolApprovalRequested,
    ToolApproved,
    ToolCancelled,
    ToolCompleted,
    ToolFailed,
    ToolRejected,
    ToolRequested,
    ToolStarted,
    decode_data,
    type_names,
)
from events.envelope import Envelope
from events.view_types import Diagnostics, PendingToolCall

__all__ = [
    "CONVERSATION_STATUSES",
    "TURN_END_TYPES",
    "CallPhase",
    "ConversationFold",
    "PendingCall",
]

TURN_END_TYPES: Final[frozenset[str]] = frozenset(
    name for name, cls in PAYLOAD_TYPES.items() if "turn" in cls.facts.closes
)
"""Event types that end the turn opened by the ``user.message`` of the same correlation
(those whose facts close the ``turn`` stage: ``llm.completed``, ``llm.failed``,
``budget.exceeded``)."""

CONVERSATION_STATUSES: Final[tuple[str, ...]] = (
    "idle",
    "running",
    "awaiting_approval",
    "cancelled",
)
"""Every value :meth:`ConversationFold.status` returns (SPEC section 8)."""

CallPhase = Literal["requested", "awaiting_approval", "allowed", "denied", "started"]
"""Where a pending call stands between its request and its terminal event."""

_PHASES: Final[dict[type, CallPhase]] = {
    ToolApprovalRequested: "awaiting_approval",
    PolicyAllowed: "allowed",
    ToolApproved: "allowed",
    PolicyDenied: "denied",
    ToolRejected: "denied",
    ToolStarted: "started",
}

_CALL_EVENTS: Final = type_names(ToolRequested, ToolCompleted, ToolFailed, ToolCancelled, *_PHASES)
"""The events :meth:`ConversationFold._apply_call` reads (every other one is skipped)."""


@dataclass
class PendingCall:
    """A tool call between its ``tool.requested`` and its terminal event."""

    call_id: str
    """The call."""
    name: Any
    """The tool's name, as requested."""
    args: Any
    """The arguments, as requested."""
    run_mode: Any
    """``sync`` or ``async``, as requested (``sync`` when absent)."""
    phase: CallPhase
    """Where the call stands (see the module doc)."""
    correlation_id: str
    """The correlation of its ``tool.requested`` (the turn that asked for it)."""
    requested_seq: int
    """The ``seq`` of its ``tool.requested``."""
    last_event_id: str
    """The id of the last event that changed it (the cause of the next one)."""

    @property
    def status(self) -> Literal["awaiting_approval", "running"]:
        """The SPEC status: ``awaiting_approval`` or ``running``."""
        return "awaiting_approval" if self.phase == "awaiting_approval" else "running"

    def view(self) -> PendingToolCall:
        """``{call_id, name, args, run_mode, status, requested_seq}`` (the args copied)."""
        return {
            "call_id": self.call_id,
            "name": self.name,
            "args": msgspec.to_builtins(self.args),
            "run_mode": self.run_mode,
            "status": self.status,
            "requested_seq": self.requested_seq,
        }


CLOSED_KEPT: Final = 256
"""Closed calls remembered (so a late ``tool.requested`` does not reopen one), the latest."""


class ConversationFold:
    """The status and pending calls of one conversation, fed its events in ``seq`` order.

    ``orchestration`` says whether the model loop runs (the project's option; replays take
    it from the last ``project.started``).
    """

    def __init__(self, *, orchestration: bool = True) -> None:
        self.orchestration = orchestration
        """Whether a ``user.message`` opens a turn."""
        self.cancelled = False
        """Between a ``conversation.cancel`` and a ``conversation.resume``."""
        self.stopped = False
        """After ``conversation.stopped``."""
        self.open_turns: dict[str, Envelope] = {}
        """Open turns in the order they opened: correlation → its ``user.message``."""
        self.calls: dict[str, PendingCall] = {}
        """Pending calls by ``call_id``, in the order they were requested."""
        self._closed: dict[str, None] = {}
        """The latest ``CLOSED_KEPT`` closed calls, oldest first (a late request is ignored)."""
        self.event_count = 0
        """Events applied."""
        self.last_event_type: str | None = None
        """The type of the last event applied."""
        self.last_seq = 0
        """The ``seq`` of the last event applied."""

    @classmethod
    def of(
        cls, events: Iterable[Envelope], conversation_id: str, *, orchestration: bool = True
    ) -> ConversationFold:
        """The fold of a conversation's events (in any order; they are sorted by ``seq``)."""
        fold = cls(orchestration=orchestration)
        mine = [e for e in events if e.conversation_id == conversation_id]
        for event in sorted(mine, key=lambda e: (e.seq, e.event_id)):
            fold.apply(event)
        return fold

    def apply(self, event: Envelope) -> None:
        """Fold one event (after every event applied before it)."""
        self.event_count += 1
        self.last_event_type = event.type
        self.last_seq = event.seq
        kind = event.type
        if kind in _CALL_EVENTS:
            self._apply_call(event)
        if kind == "user.message":
            if self.orchestration and not self.cancelled:
                self.open_turns.setdefault(event.correlation_id, event)
        elif kind in TURN_END_TYPES:
            self.open_turns.pop(event.correlation_id, None)
        elif kind == "conversation.cancel":
            self.cancelled = True
            self.open_turns.clear()
        elif kind == "conversation.resume":
            self.cancelled = False
        elif kind == "conversation.stopped":
            self.stopped = True
            self.open_turns.clear()
        elif kind == "conversation.started":  # a stopped conversation started again
            self.stopped = False

    def _apply_call(self, event: Envelope) -> None:
        match decode_data(event.type, event.data):
            case ToolRequested(call_id=call_id, name=name, args=args, run_mode=run_mode):
                if call_id not in self.calls and call_id not in self._closed:
                    self.calls[call_id] = PendingCall(
                        call_id=call_id,
                        name=name,
                        args=args,
                        run_mode=run_mode,
                        phase="requested",
                        correlation_id=event.correlation_id,
                        requested_seq=event.seq,
                        last_event_id=event.event_id,
                    )
            case (
                ToolCompleted(call_id=call_id)
                | ToolFailed(call_id=call_id)
                | ToolCancelled(call_id=call_id)
            ):
                self.calls.pop(call_id, None)
                closed = self._closed
                closed.pop(call_id, None)
                closed[call_id] = None
                if len(closed) > CLOSED_KEPT:
                    del closed[next(iter(closed))]
            case (
                ToolApprovalRequested(call_id=str() as call_id)
                | PolicyAllowed(call_id=str() as call_id)
                | ToolApproved(call_id=str() as call_id)
                | PolicyDenied(call_id=str() as call_id)
                | ToolRejected(call_id=str() as call_id)
                | ToolStarted(call_id=str() as call_id)
            ) as decision if call_id in self.calls:
                call = self.calls[call_id]
                call.phase = _PHASES[type(decision)]
                call.last_event_id = event.event_id

    def status(self) -> str:
        """``idle``, ``running``, ``awaiting_approval`` or ``cancelled`` (see the module doc)."""
        if self.cancelled:
            return "cancelled"
        calls = self.calls.values()
        if calls and all(call.phase == "awaiting_approval" for call in calls):
            return "awaiting_approval"
        if self.calls or self.open_turns:
            return "running"
        return "idle"

    def pending_calls(self) -> list[PendingToolCall]:
        """The pending calls as SPEC shapes, sorted by ``requested_seq`` then ``call_id``."""
        calls = sorted(self.calls.values(), key=lambda c: (c.requested_seq, c.call_id))
        return [call.view() for call in calls]

    def diagnostics(self) -> Diagnostics:
        """``{event_count, pending_tool_call_count, last_event_type, status}``."""
        return {
            "event_count": self.event_count,
            "pending_tool_call_count": len(self.calls),
            "last_event_type": self.last_event_type,
            "status": self.status(),
        }
