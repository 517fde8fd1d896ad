"""A client's requests to a conversation: validated, turned into events and effects.

The Project forwards a request as the gateway left it: validated, with its correlation id
(and ``send_event``'s idempotency key) minted there when the client gave none
(``runtime.wire.ops``). A request that reaches a conversation without them did not come
through the gateway: :meth:`Inbound.request` refuses it with an internal error instead of
inventing ids.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import msgspec

from events import catalog as ev
from events.conversation_fold import PendingCall
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

_FollowUp = tuple[list[NewEvent], list[Effect]]
"""An inbound event's batch (the event first) and the effects after its commit."""


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
        """``stop_conversation``: record ``conversation.stopped``, then answer.

        What runs stops with it, as on a cancel: its pending calls are cancelled (a running
        command is killed, and what the kill ended is still recorded) and its open turns
        fail with ``conversation_stopped``, so a client waiting on one gets its answer.
        """
        corr = call.correlation()
        stopped = self._new(ev.ConversationStopped(), correlation_id=corr, causation_id=None)
        message = (
            f"stopped by a stop_conversation request (correlation {corr}); "
            f"`roost conversation start {self.project_id} --id {self.conversation_id}` "
            "starts it again"
        )
        batch, after = self._end_open_work(stopped, "conversation_stopped", message)
        result = {"conversation_id": self.conversation_id, "stopped": True}
        return [AppendBatch(events=batch), *after, Answer(to=reply_to, result=result)]

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
        batch, after = _FOLLOW_UPS[str(kind)](self, payload, first)
        if wait and kind == "user.message":
            self.waiters.setdefault(correlation, []).append(reply_to)
        ack_to = None if wait and kind == "user.message" else reply_to
        return [AppendBatch(events=batch, ack_to=ack_to, key=key), *after]

    def _on_user_message(self, payload: ev.Event, first: NewEvent) -> _FollowUp:
        """A ``user.message`` opens a turn (when none runs), or fails on a cancelled one."""
        correlation = first.correlation_id
        if self.cancelled:
            message = (
                "not run: the conversation was cancelled (conversation.cancel) and not "
                f"resumed; `roost resume {self.project_id} {self.conversation_id}` reopens it"
            )
            failed = self._new(
                ev.LlmFailed(reason="conversation_cancelled", message=message),
                correlation_id=correlation,
                causation_id=first.event_id,
            )
            return [first, failed], []
        if self._orchestration and self.turn is None and not self.inbox:
            return [first, *self._start_turn(correlation, first.event_id, first.at, round_=1)], []
        return [first], []

    def _on_resume(self, payload: ev.Event, first: NewEvent) -> _FollowUp:
        """A ``conversation.resume`` is recorded alone (``advance`` goes on from it)."""
        return [first], []

    def _on_cancel(self, payload: ev.Event, cancel: NewEvent) -> _FollowUp:
        """A ``conversation.cancel`` cancels the pending calls and fails the open turns."""
        why = str(cancel.data.get("reason") or "user_cancelled")
        message = (
            f"cancelled by a conversation.cancel request (correlation {cancel.correlation_id}, "
            f"reason: {why}); `roost resume {self.project_id} {self.conversation_id}` reopens "
            "the conversation"
        )
        return self._end_open_work(cancel, "conversation_cancelled", message)

    def _end_open_work(self, cause: NewEvent, reason: str, message: str) -> _FollowUp:
        """What a cancel or a stop (``cause``) records, and the running calls it cancels.

        ``cause`` first, then each pending call's ``tool.cancelled`` and each open turn's
        ``llm.failed``, with ``reason`` (and ``message``).
        """
        self._drop_draft()
        batch = [cause]
        for call in sorted(self.pending.values(), key=lambda c: c.call_id):
            batch.append(
                self._new(
                    ev.ToolCancelled(call_id=call.call_id, name=call.name, reason=reason),
                    correlation_id=cause.correlation_id,
                    causation_id=cause.event_id,
                )
            )
        for turn_corr in sorted(self.fold.open_turns):
            batch.append(
                self._new(
                    ev.LlmFailed(reason=reason, message=message),
                    correlation_id=turn_corr,
                    causation_id=cause.event_id,
                )
            )
        dispatched = sorted(c for c in self.pending if c in self._dispatched)
        return batch, ([CancelCalls(call_ids=dispatched)] if dispatched else [])

    def _awaiting(self, first: NewEvent) -> tuple[PendingCall, NewEvent]:
        """The call a user's decision is about, and the decision under that call's turn."""
        call_id = str(first.data.get("call_id"))
        call = self.pending.get(call_id)
        if call is None or call.phase != "awaiting_approval":
            raise BadRequestError(
                f"call {call_id} is not awaiting approval in {self.conversation_id}",
                reason="not_awaiting_approval",
                call_id=call_id,
            )
        # Approvals belong to the turn that asked: keep its correlation.
        return call, msgspec.structs.replace(first, correlation_id=call.correlation_id)

    def _on_approved(self, payload: ev.Event, first: NewEvent) -> _FollowUp:
        """A ``tool.approved``: the user's ``policy.allowed``, then the call starts."""
        call, approved = self._awaiting(first)
        decision = self._new(
            ev.PolicyAllowed(
                tool=call.name, reason="approved", source="user", call_id=call.call_id
            ),
            correlation_id=call.correlation_id,
            causation_id=approved.event_id,
        )
        started = self._new(
            ev.ToolStarted(call_id=call.call_id, name=call.name),
            correlation_id=call.correlation_id,
            causation_id=decision.event_id,
        )
        return [approved, decision, started], []

    def _on_rejected(self, payload: ev.Event, first: NewEvent) -> _FollowUp:
        """A ``tool.rejected``: the user's ``policy.denied``, then the call fails."""
        call, rejected = self._awaiting(first)
        reason = getattr(payload, "reason", None)
        denied = self._new(
            ev.PolicyDenied(
                tool=call.name, reason="approval_rejected", source="user", call_id=call.call_id
            ),
            correlation_id=call.correlation_id,
            causation_id=rejected.event_id,
        )
        failed = self._new(
            ev.ToolFailed(
                call_id=call.call_id,
                name=call.name,
                reason={"code": "approval_rejected", "message": reason or "rejected"},
            ),
            correlation_id=call.correlation_id,
            causation_id=rejected.event_id,
        )
        return [rejected, denied, failed], []


_OPS = op_handlers(Inbound, "conversation")
"""Each op that reaches a conversation, and the method serving it."""

_FOLLOW_UPS: dict[str, Callable[[Inbound, ev.Event, NewEvent], _FollowUp]] = {
    "user.message": Inbound._on_user_message,
    "conversation.cancel": Inbound._on_cancel,
    "conversation.resume": Inbound._on_resume,
    "tool.approved": Inbound._on_approved,
    "tool.rejected": Inbound._on_rejected,
}
"""Each event type a client may send into a conversation, and what its recording brings."""

INBOUND_TYPES = frozenset(_FOLLOW_UPS)
"""Event types a client may send into a conversation (the keys of one table, so a type
that is accepted always has its follow-up)."""
