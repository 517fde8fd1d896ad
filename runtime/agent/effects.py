"""What the agent loop asks its actor shell to do: the effects of one step."""

from __future__ import annotations

from typing import Any

import msgspec

from events.envelope import NewEvent
from runtime.llm.base import ModelRequest
from runtime.tools.base import CallSpec

__all__ = [
    "Append",
    "AskPolicy",
    "CallModel",
    "CancelCalls",
    "Dispatch",
    "Effect",
    "Reply",
]


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
