"""What the agent loop asks its actor shell to do: the effects of one step.

:class:`Answer` is also the lifecycle cores' (``runtime.lifecycle.effects`` re-exports it):
one effect, "answer this waiting client", for every core. What the shell then sends is
the actor message ``actors.messages.Reply`` (``ok``, ``result``, ``error``), the one
message that answers a request; the effect names who gets it.
"""

from __future__ import annotations

from typing import Any

import msgspec

from events.envelope import NewEvent
from runtime.errors import WireError
from runtime.llm.base import ModelRequest
from runtime.tools.base import CallSpec
from runtime.wire.op_args import ToolRequest

__all__ = [
    "Answer",
    "AppendBatch",
    "AskPolicy",
    "CallModel",
    "CancelCalls",
    "Dispatch",
    "Effect",
    "RunDirectForConversation",
]


class AppendBatch(msgspec.Struct, frozen=True, kw_only=True):
    """Commit these events; then (if set) acknowledge the first to ``ack_to``."""

    events: list[NewEvent]
    """The batch, in order."""
    ack_to: Any = None
    """A client waiting for the commit of the first event."""
    key: str | None = None
    """Idempotency key of a client's ``send_event`` (minted by the gateway when the client
    gave none), so a retry is not appended twice; unset for the loop's own batches, which
    the shell gives a batch key of their own (for its resend to a restarted journal)."""


class Answer(msgspec.Struct, frozen=True, kw_only=True):
    """Answer a waiting client (the shell sends it an ``actors.messages.Reply``)."""

    to: Any
    """The client's address."""
    ok: bool = True
    """True on success."""
    result: Any = None
    """The result when ok (JSON-able)."""
    error: WireError | None = None
    """The wire error ``{code, message, details}`` when not ok."""


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


class RunDirectForConversation(msgspec.Struct, frozen=True, kw_only=True):
    """Have the ToolRunner run a client's ``run_tool`` whose events this conversation records.

    The shell sends the runner the actor message ``actors.messages.RunDirect``; the runner
    answers with the events and the result; the conversation appends them, then
    answers ``reply_to`` (:meth:`runtime.agent.core.ConversationCore.direct_done`).
    """

    request: ToolRequest
    """``{name, args, meta: {conversation_id, correlation_id}}``, as the gateway left it."""
    reply_to: Any
    """The client."""


Effect = (
    AppendBatch | Answer | CallModel | AskPolicy | Dispatch | CancelCalls | RunDirectForConversation
)
"""Any effect."""
