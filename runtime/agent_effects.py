"""What the agent loop asks its actor shell to do: the effects of one step."""

from __future__ import annotations

from typing import Any

import msgspec

from events.envelope import NewEvent
from runtime.llm.base import ModelRequest

__all__ = [
    "Append",
    "AskPolicy",
    "CallModel",
    "CallSpec",
    "CancelCalls",
    "Dispatch",
    "Effect",
    "Reply",
]


class CallSpec(msgspec.Struct, frozen=True, kw_only=True):
    """A tool call as the Policy and the ToolRunner see it."""

    call_id: str
    """The call."""
    name: str
    """Tool name."""
    args: dict[str, Any]
    """Arguments."""
    run_mode: str = "sync"
    """``sync`` or ``async``."""
    conversation_id: str | None = None
    """The conversation, when there is one."""
    correlation_id: str = ""
    """The turn's correlation."""
    causation_id: str | None = None
    """The event that led to this step."""


class Append(msgspec.Struct, frozen=True, kw_only=True):
    """Commit these events; then (if set) acknowledge the first to ``ack_to``."""

    events: list[NewEvent]
    """The batch, in order."""
    ack_to: Any = None
    """A client waiting for the commit of the first event."""
    key: str | None = None
    """Idempotency key (a client's retry of the same request); random when unset."""


class Reply(msgspec.Struct, frozen=True, kw_only=True):
    """Send ``payload`` to a waiting client."""

    to: Any
    """The client's address."""
    payload: Any
    """The reply (JSON-able)."""


class CallModel(msgspec.Struct, frozen=True, kw_only=True):
    """Run one model round."""

    request: ModelRequest
    """What to send."""
    round: int
    """The round it answers."""


class AskPolicy(msgspec.Struct, frozen=True, kw_only=True):
    """Ask the Policy to decide a call."""

    call: CallSpec
    """The call."""


class Dispatch(msgspec.Struct, frozen=True, kw_only=True):
    """Send an allowed, started call to the ToolRunner."""

    call: CallSpec
    """The call."""


class CancelCalls(msgspec.Struct, frozen=True, kw_only=True):
    """Tell the ToolRunner to stop these calls (their results are ignored)."""

    call_ids: list[str]
    """The calls."""


Effect = Append | Reply | CallModel | AskPolicy | Dispatch | CancelCalls
"""Any effect."""
