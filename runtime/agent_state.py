"""The mutable state the agent loop folds from a conversation's events."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["Call", "CallStatus", "TurnState"]

CallStatus = Literal["requested", "awaiting_approval", "allowed", "denied", "started"]


@dataclass
class Call:
    """A tool call between ``tool.requested`` and its terminal event."""

    call_id: str
    name: str
    args: dict[str, Any]
    run_mode: str
    status: CallStatus
    correlation_id: str
    last_event_id: str


@dataclass
class TurnState:
    """The turn in progress: one inbound message and its model rounds."""

    correlation_id: str
    user_event_id: str | None
    started_at: str
    directives: dict[str, Any] | None = None
    round: int = 0
    round_event_id: str | None = None
    last_event_id: str | None = None
    model_done: bool = False
    tool_call_count: int = 0
    usage: dict[str, int] = field(default_factory=dict)
