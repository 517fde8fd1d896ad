"""A client's requests to a conversation: validated, turned into events and effects.

The Project forwards a request as the gateway left it: validated, with its correlation id
(and ``send_event``'s idempotency key) minted there when the client gave none
(``runtime.wire.ops``). A request that reaches a conversation without them did not come
through the gateway: :meth:`Inbound.request` refuses it with an internal error instead of
inventing ids.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from events import catalog as ev
from events.envelope import NewEvent
from runtime.agent.effects import (
    Answer,
    AppendBatch,
    CancelCalls,
    Effect,
    RunDirectForConversation,
)
from runtime.agent.state import LoopState
from runtime.errors import BadRequestError, RoostError
from runtime.wire.dispatch import op_handlers
from runtime.wire.op_args import (
    CallArgs,
    CancelArgs,
    ConversationArgs,
    ProjectionArgs,
    RejectArgs,
    RunToolArgs,
    SendEventArgs,
)
from runtime.wire.ops import Call, event_type_of

__all__ = ["INBOUND_TYPES", "Inbound"]

INBOUND_TYPES = frozenset(
    {"user.message", "conversation.cancel", "conversation.resume", "tool.approved", "tool.rejected"}
)
"""Event types a client may send into a conversation."""


class Inbound(LoopState):
    """The steps a client's request starts (one group of the core's)."""

    def request(self, call: Call[Any], reply_to: Any) -> list[Effect]:
        """A client request the Project forwarded: its effects, or ``BadRequestError``.

        The ids come from the gateway (``runtime.wire.ops.with_ids``); a request without
        them is refused as an internal error, never given new ones here.
        """
        handler = _OPS.get(call.op)
        if handler is None:
            raise BadRequestError(
                f"operation {call.op!r} does not apply to a conversation", reason="unknown_op"
            )
        effects: list[Effect] = handler(self, call, reply_to)
        return effects

    def op_send_event(self, call: Call[SendEventArgs], reply_to: Any) -> list[Effect]:
        """``send_event``: the client's event, under the request's ids."""
        args = call.args
        event = {"type": args.event.type, "data": args.event.data}
        event["correlation_id"] = call.correlation()
        scoped = f"{self.project_id}/{self.conversation_id}/{call.idempotency()}"
        return self.inbound(event, reply_to, wait=args.wait, key=scoped)

    def _op_event(self, call: Call[Any], reply_to: Any, **data: Any) -> list[Effect]:
        """An op that is an inbound event of its own (its row's ``event_type``)."""
        event = {"type": event_type_of(call.op), "data": data, "correlation_id": call.correlation()}
        return self.inbound(event, reply_to)

    def op_cancel(self, call: Call[CancelArgs], reply_to: Any) -> list[Effect]:
        """``cancel``: ``conversation.cancel`` (with its reason, if any)."""
        reason = {"reason": call.args.reason} if call.args.reason else {}
        return self._op_event(call, reply_to, **reason)

    def op_resume(self, call: Call[ConversationArgs], reply_to: Any) -> list[Effect]:
        """``resume``: ``conversation.resume``."""
        return self._op_event(call, reply_to)

    def op_approve(self, call: Call[CallArgs], reply_to: Any) -> list[Effect]:
        """``approve``: ``tool.approved`` for the call."""
        return self._op_event(call, reply_to, call_id=call.args.call_id)

    def op_reject(self, call: Call[RejectArgs], reply_to: Any) -> list[Effect]:
        """``reject``: ``tool.rejected`` for the call (with its reason, if any)."""
        reason = {"reason": call.args.reason} if call.args.reason else {}
        return self._op_event(call, reply_to, call_id=call.args.call_id, **reason)

    def op_get_projection(self, call: Call[ProjectionArgs], reply_to: Any) -> list[Effect]:
        """``get_projection``: one of the conversation's projections, from its state."""
        key = call.args.key
        try:
            result = self.projection(key)
        except KeyError as e:
            raise BadRequestError(str(e), reason="unknown_projection", key=key) from e
        return [Answer(to=reply_to, result=result)]

    def op_stop_conversation(self, call: Call[ConversationArgs], reply_to: Any) -> list[Effect]:
        """``stop_conversation``: record ``conversation.stopped``, then answer."""
        stopped = self._new(
            ev.ConversationStopped(), correlation_id=call.correlation(), causation_id=None
        )
        result = {"conversation_id": self.conversation_id, "stopped": True}
        return [AppendBatch(events=[stopped]), Answer(to=reply_to, result=result)]

    def op_run_tool(self, call: Call[RunToolArgs], reply_to: Any) -> list[Effect]:
        """``run_tool`` naming this conversation: the runner records the call under it."""
        call.correlation()
        return [RunDirectForConversation(request=call.args.request, reply_to=reply_to)]

    def started(self, correlation_id: str | None, reply_to: Any) -> list[Effect]:
        """A new conversation records ``conversation.started``, then answers its starter.

        ``correlation_id`` is the ``start_conversation`` request's, minted by the gateway.
        """
        if not correlation_id:
            raise RoostError(
                f"conversation {self.conversation_id} was started without the correlation id "
                "the gateway mints for start_conversation",
                reason="missing_correlation_id",
            )
        event = self._new(
            ev.ConversationStarted(), correlation_id=correlation_id, causation_id=None
        )
        effects: list[Effect] = [AppendBatch(events=[event])]
        if reply_to is not None:
            effects.append(Answer(to=reply_to, result=self.conversation_id))
        return effects

    def direct_done(
        self, events: list[ev.Event], result: Any, correlation_id: str, reply_to: Any
    ) -> list[Effect]:
        """A ``run_tool`` naming this conversation ran: record its events, then answer."""
        batch = [self._new(p, correlation_id=correlation_id, causation_id=None) for p in events]
        return [AppendBatch(events=batch), Answer(to=reply_to, result=result)]

    def inbound(
        self,
        event: Mapping[str, Any],
        reply_to: Any,
        *,
        wait: bool = False,
        key: str | None = None,
    ) -> list[Effect]:
        """A client's event. Returns ``[AppendBatch(ack_to), ...]`` or raises ``BadRequestError``.

        ``event["correlation_id"]`` is required (the gateway minted it when the client gave
        none): one missing is an internal error.
        """
        kind = event.get("type")
        if kind not in INBOUND_TYPES:
            raise BadRequestError(
                f"event type {kind!r} cannot be sent into a conversation; "
                f"send one of {', '.join(sorted(INBOUND_TYPES))}",
                reason="not_inbound",
                type=kind,
            )
        if self.stopped:
            raise BadRequestError(
                f"conversation {self.conversation_id} is stopped", reason="conversation_stopped"
            )
        data = event.get("data") or {}
        if not isinstance(data, dict):
            raise BadRequestError("event data must be a JSON object", reason="invalid_data")
        try:
            payload = ev.validate_data(str(kind), data)
        except msgspec.ValidationError as e:
            raise BadRequestError(
                f"invalid data for {kind}: {e}", reason="invalid_data", type=kind
            ) from e
        correlation = event.get("correlation_id")
        if not isinstance(correlation, str) or not correlation:
            raise RoostError(
                f"a {kind} reached conversation {self.conversation_id} without the "
                "correlation id the gateway mints",
                reason="missing_correlation_id",
            )
        first = self._new(payload, correlation_id=correlation, causation_id=None)
        batch = [first]
        after: list[Effect] = []
        if kind == "user.message":
            if self.cancelled:
                message = (
                    "not run: the conversation was cancelled (conversation.cancel) and not "
                    f"resumed; `roost resume {self.project_id} {self.conversation_id}` reopens it"
                )
                batch.append(
                    self._new(
                        ev.LlmFailed(reason="conversation_cancelled", message=message),
                        correlation_id=correlation,
                        causation_id=first.event_id,
                    )
                )
            elif self._orchestration and self.turn is None and not self.inbox:
                batch.extend(self._start_turn(correlation, first.event_id, first.at, round_=1))
        elif kind == "conversation.cancel":
            batch, after = self._cancel(first, batch)
        elif kind in ("tool.approved", "tool.rejected"):
            batch = self._decide_by_user(kind, payload, first, batch)
        if wait and kind == "user.message":
            self.waiters.setdefault(correlation, []).append(reply_to)
        ack_to = None if wait and kind == "user.message" else reply_to
        return [AppendBatch(events=batch, ack_to=ack_to, key=key), *after]

    def _cancel(
        self, cancel: NewEvent, batch: list[NewEvent]
    ) -> tuple[list[NewEvent], list[Effect]]:
        self._drop_draft()
        corr = cancel.correlation_id
        for call in sorted(self.pending.values(), key=lambda c: c.call_id):
            batch.append(
                self._new(
                    ev.ToolCancelled(
                        call_id=call.call_id, name=call.name, reason="conversation_cancelled"
                    ),
                    correlation_id=corr,
                    causation_id=cancel.event_id,
                )
            )
        why = str(cancel.data.get("reason") or "user_cancelled")
        message = (
            f"cancelled by a conversation.cancel request (correlation {corr}, reason: {why}); "
            f"`roost resume {self.project_id} {self.conversation_id}` reopens the conversation"
        )
        for turn_corr in sorted(self.fold.open_turns):
            batch.append(
                self._new(
                    ev.LlmFailed(reason="conversation_cancelled", message=message),
                    correlation_id=turn_corr,
                    causation_id=cancel.event_id,
                )
            )
        dispatched = sorted(c for c in self.pending if c in self._dispatched)
        return batch, ([CancelCalls(call_ids=dispatched)] if dispatched else [])

    def _decide_by_user(
        self, kind: str, payload: ev.Event, first: NewEvent, batch: list[NewEvent]
    ) -> list[NewEvent]:
        call_id = str(first.data.get("call_id"))
        call = self.pending.get(call_id)
        if call is None or call.phase != "awaiting_approval":
            raise BadRequestError(
                f"call {call_id} is not awaiting approval in {self.conversation_id}",
                reason="not_awaiting_approval",
                call_id=call_id,
            )
        # Approvals belong to the turn that asked: keep its correlation.
        corrected = msgspec.structs.replace(first, correlation_id=call.correlation_id)
        batch[0] = corrected
        if kind == "tool.approved":
            decision = self._new(
                ev.PolicyAllowed(tool=call.name, reason="approved", source="user", call_id=call_id),
                correlation_id=call.correlation_id,
                causation_id=corrected.event_id,
            )
            batch.append(decision)
            batch.append(
                self._new(
                    ev.ToolStarted(call_id=call_id, name=call.name),
                    correlation_id=call.correlation_id,
                    causation_id=decision.event_id,
                )
            )
        else:
            reason = getattr(payload, "reason", None)
            batch.append(
                self._new(
                    ev.PolicyDenied(
                        tool=call.name, reason="approval_rejected", source="user", call_id=call_id
                    ),
                    correlation_id=call.correlation_id,
                    causation_id=corrected.event_id,
                )
            )
            batch.append(
                self._new(
                    ev.ToolFailed(
                        call_id=call_id,
                        name=call.name,
                        reason={"code": "approval_rejected", "message": reason or "rejected"},
                    ),
                    correlation_id=call.correlation_id,
                    causation_id=corrected.event_id,
                )
            )
        return batch


_OPS = op_handlers(Inbound, "conversation")
"""Each op that reaches a conversation, and the method serving it."""
