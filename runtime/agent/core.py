"""The agent loop's step function: a conversation as a pure state machine.

:class:`ConversationCore` holds a conversation's committed events and the state folded from
them. It takes inputs (an inbound event, a journal acknowledgement, a model reply, a policy
decision, a tool result) and returns :mod:`effects <runtime.agent.effects>` for the actor
shell to carry out: append these events, call the model, ask the policy, dispatch a call,
reply to a client. Nothing here sends a message, touches a socket or reads a clock other
than the injected one, so the whole loop is unit-tested without an actor system.

The status and the pending calls are not folded here: the core keeps an
:class:`events.conversation_fold.ConversationFold` (``fold``), the same fold the
projections replay from the journal, and reads its calls, turns and flags from it; so its
``diagnostics`` and ``pending_tool_calls`` cannot differ from a replay's.

The rule that keeps it crash-safe: state changes only when the journal acknowledges the
events (:meth:`ConversationCore.committed`). An ``Append`` effect is always the first of
the effects returned, and the shell runs the others only after the acknowledgement. A
restarted conversation folds its events again and :meth:`ConversationCore.recover` picks
the turn up where the journal says it stood.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

import msgspec

from events import catalog as ev
from events.catalog import SIGNAL_TYPES, TERMINAL_TOOL_TYPES
from events.conversation_fold import TURN_END_TYPES, ConversationFold, PendingCall
from events.envelope import (
    Envelope,
    NewEvent,
    format_at,
    new_call_id,
    new_correlation_id,
    new_event,
)
from events.projections import LlmContextFold, get_projection
from runtime.agent.effects import (
    Append,
    AskPolicy,
    CallModel,
    CancelCalls,
    Dispatch,
    Effect,
    Reply,
)
from runtime.agent.state import TurnState
from runtime.errors import BadRequestError
from runtime.llm.base import ModelReply, ModelRequest
from runtime.policy.options import RuntimeOptions
from runtime.tools.base import CallSpec

__all__ = ["INBOUND_TYPES", "ConversationCore"]

INBOUND_TYPES = frozenset(
    {"user.message", "conversation.cancel", "conversation.resume", "tool.approved", "tool.rejected"}
)
"""Event types a client may send into a conversation."""

Clock = Callable[[], datetime]

_REMEMBERED_CANCELS = 1024
"""Cancelled running calls whose late signals are still awaited (the oldest are dropped)."""


def _as_data(message: dict[str, Any], wrapped: dict[str, tuple[str, str]]) -> dict[str, Any]:
    """Hand a tool result to the model inside a per-call nonce-delimited data block.

    ``wrapped`` keeps each call's block (call id → (content, block)), so a result keeps
    its nonce in every later request: the prompt's prefix stays the same from round to
    round (provider prompt caches) and the history is not wrapped again each time.
    """
    content = message.get("content")
    if message.get("role") != "tool" or not isinstance(content, str):
        return message
    call_id = str(message.get("tool_call_id", ""))
    hit = wrapped.get(call_id)
    if hit is None or hit[0] != content:
        from runtime.execution.results import wrap_for_model  # noqa: PLC0415 - runtime-only helper

        hit = (content, wrap_for_model(call_id, content))
        wrapped[call_id] = hit
    return {**message, "content": hit[1]}


class ConversationCore:
    """One conversation's agent loop, folded from its events."""

    def __init__(
        self,
        *,
        project_id: str,
        conversation_id: str,
        options: Mapping[str, Any],
        clock: Clock,
        tools: list[dict[str, Any]] | None = None,
        provider: str = "deterministic",
        model: str | None = None,
    ) -> None:
        self.project_id = project_id
        self.conversation_id = conversation_id
        self.options = dict(options)
        self.settings = RuntimeOptions.of(self.options)
        """The options, typed (defaults filled in)."""
        self.clock = clock
        self.tools = tools or []
        self.provider = provider
        self.model = model
        self.events: list[Envelope] = []
        self._context = LlmContextFold()
        self._context_stale = False
        self._wrapped: dict[str, tuple[str, str]] = {}
        self.fold = ConversationFold(orchestration=self._orchestration)
        """Status, open turns and pending calls: the projections' own fold."""
        self.turn: TurnState | None = None
        self.tokens_used = 0
        self.waiters: dict[str, list[Any]] = {}
        self._asked: set[str] = set()
        self._dispatched: set[str] = set()
        self._cancelled_running: dict[str, tuple[str, str]] = {}
        self._model_round: tuple[str, int] | None = None
        self._draft: list[NewEvent] = []
        self._draft_calls: dict[str, CallSpec] = {}
        self._draft_verdicts: dict[str, list[ev.Event]] = {}

    # --- the fold ---------------------------------------------------------------------

    @property
    def _orchestration(self) -> bool:
        return self.settings.orchestration

    @property
    def pending(self) -> dict[str, PendingCall]:
        """The pending calls by ``call_id`` (the fold's)."""
        return self.fold.calls

    @property
    def inbox(self) -> list[Envelope]:
        """The ``user.message`` of each open turn, oldest first (the fold's)."""
        return list(self.fold.open_turns.values())

    @property
    def cancelled(self) -> bool:
        """Between a ``conversation.cancel`` and a ``conversation.resume``."""
        return self.fold.cancelled

    @property
    def stopped(self) -> bool:
        """After ``conversation.stopped``."""
        return self.fold.stopped

    # --- folding ----------------------------------------------------------------------

    def load(self, events: list[Envelope]) -> None:
        """Fold already-committed events (rehydration); produces no effects."""
        for envelope in events:
            self._apply(envelope)

    def _apply(self, e: Envelope) -> None:
        self.events.append(e)
        # A call cancelled while it ran: its runner still answers later (with signals).
        cancelled = e.data.get("call_id") if e.type == "tool.cancelled" else None
        closing = self.fold.calls.get(cancelled) if isinstance(cancelled, str) else None
        if e.conversation_id == self.conversation_id:
            if e.seq > self._context.last_seq:
                self._context.apply(e)
            else:  # out of order: rebuild the context from the events when next needed
                self._context_stale = True
            if e.seq > self.fold.last_seq:
                self.fold.apply(e)
            else:  # out of order: the fold is rebuilt now, the loop reads it at once
                self.fold = ConversationFold.of(
                    self.events, self.conversation_id, orchestration=self._orchestration
                )
        t, d = e.type, e.data
        if t == "llm.started":
            user = self._user_message(e.correlation_id)
            if self.turn is None or self.turn.correlation_id != e.correlation_id:
                self.turn = TurnState(
                    correlation_id=e.correlation_id,
                    user_event_id=user.event_id if user else None,
                    started_at=user.at if user else e.at,
                    directives=(user.data.get("llm") if user else None),
                )
            self.turn.round = int(d.get("round", self.turn.round + 1))
            self.turn.round_event_id = e.event_id
            self.turn.model_done = False
        elif t == "assistant.message":
            usage = d.get("usage") or {}
            self.tokens_used += int(usage.get("total_tokens", 0))
            if self.turn is not None:
                self.turn.model_done = True
                self.turn.last_event_id = e.event_id
                for key, value in usage.items():
                    self.turn.usage[key] = self.turn.usage.get(key, 0) + int(value)
        elif t == "tool.requested":
            if self.turn is not None:
                self.turn.tool_call_count += 1
        elif t in TERMINAL_TOOL_TYPES:
            call_id = d.get("call_id")
            if closing is not None and call_id in self._dispatched:
                self._await_late_signals(closing, e.event_id)
            self._dispatched.discard(call_id)
            self._asked.discard(call_id)
            if self.turn is not None and e.correlation_id == self.turn.correlation_id:
                self.turn.last_event_id = e.event_id
        elif (
            t in TURN_END_TYPES
            and self.turn is not None
            and self.turn.correlation_id == e.correlation_id
        ):
            self.turn = None
            self._model_round = None

    def _await_late_signals(self, call: PendingCall, cancelled_event_id: str) -> None:
        """Keep where the signals of a cancelled call still running go when it returns."""
        self._cancelled_running[call.call_id] = (call.correlation_id, cancelled_event_id)
        while len(self._cancelled_running) > _REMEMBERED_CANCELS:
            del self._cancelled_running[next(iter(self._cancelled_running))]

    def _user_message(self, correlation_id: str) -> Envelope | None:
        for message in self.inbox:
            if message.correlation_id == correlation_id:
                return message
        return None

    # --- event construction -------------------------------------------------------------

    def _new(self, payload: ev.Event, *, correlation_id: str, causation_id: str | None) -> NewEvent:
        return new_event(
            payload,
            project_id=self.project_id,
            conversation_id=self.conversation_id,
            at=format_at(self.clock()),
            correlation_id=correlation_id,
            causation_id=causation_id,
        )

    # --- inputs -------------------------------------------------------------------------

    def inbound(
        self,
        event: Mapping[str, Any],
        reply_to: Any,
        *,
        wait: bool = False,
        key: str | None = None,
    ) -> list[Effect]:
        """A client's event. Returns ``[Append, Reply(ack), ...]`` or raises ``BadRequestError``."""
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
        correlation = event.get("correlation_id") or new_correlation_id()
        if not isinstance(correlation, str) or not correlation or len(correlation) > 128:
            raise BadRequestError(
                "correlation_id must be a non-empty string of at most 128 characters",
                reason="invalid_correlation_id",
            )
        first = self._new(payload, correlation_id=correlation, causation_id=None)
        batch = [first]
        after: list[Effect] = []
        if kind == "user.message":
            if self.cancelled:
                batch.append(
                    self._new(
                        ev.LlmFailed(reason="conversation_cancelled"),
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
        return [Append(events=batch, ack_to=ack_to, key=key), *after]

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
        for turn_corr in sorted(self.fold.open_turns):
            batch.append(
                self._new(
                    ev.LlmFailed(reason="conversation_cancelled"),
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

    def _start_turn(
        self, correlation: str, cause: str, started_at: str, *, round_: int
    ) -> list[NewEvent]:
        """Events that open model round ``round_``, or end the turn on a budget."""
        budget = self._budget_exceeded(started_at, round_)
        if budget is not None:
            return [self._new(budget, correlation_id=correlation, causation_id=cause)]
        return [
            self._new(
                ev.LlmStarted(provider=self.provider, model=self.model, round=round_),
                correlation_id=correlation,
                causation_id=cause,
            )
        ]

    def _budget_exceeded(self, started_at: str, round_: int) -> ev.BudgetExceeded | None:
        max_rounds = self.settings.max_rounds
        if round_ > max_rounds:
            return ev.BudgetExceeded(budget="max_rounds", limit=max_rounds, used=round_ - 1)
        token_budget = self.settings.token_budget
        if self.tokens_used >= token_budget:
            return ev.BudgetExceeded(
                budget="token_budget", limit=token_budget, used=self.tokens_used
            )
        limit_ms = self.settings.duration_budget_ms
        started = datetime.fromisoformat(started_at.replace("Z", "+00:00"))
        used_ms = int((self.clock() - started).total_seconds() * 1000)
        if round_ > 1 and used_ms > limit_ms:
            return ev.BudgetExceeded(budget="duration_budget_ms", limit=limit_ms, used=used_ms)
        return None

    def committed(self, envelopes: list[Envelope]) -> list[Effect]:
        """The journal committed ``envelopes``: fold them, then decide what comes next."""
        last = self.events[-1].seq if self.events else 0
        for envelope in envelopes:
            if envelope.seq > last:  # a retried batch comes back with known events
                self._apply(envelope)
        return self.advance()

    def advance(self) -> list[Effect]:
        """Effects that follow from the current state (none when waiting on someone)."""
        effects: list[Effect] = []
        effects.extend(self._resolve_waiters())
        if self.cancelled or self.stopped:
            return effects
        turn = self.turn
        if turn is None:
            if self.inbox and self._orchestration:
                nxt = self.inbox[0]
                return [
                    Append(
                        events=self._start_turn(nxt.correlation_id, nxt.event_id, nxt.at, round_=1)
                    ),
                    *effects,
                ]
            return effects
        if not turn.model_done:
            key = (turn.correlation_id, turn.round)
            if self._model_round != key:
                self._model_round = key
                effects.append(CallModel(request=self._model_request(turn), round=turn.round))
            return effects
        to_start: list[NewEvent] = []
        for call in sorted(self.pending.values(), key=lambda c: c.call_id):
            if call.phase == "requested" and call.call_id not in self._asked:
                self._asked.add(call.call_id)
                effects.append(AskPolicy(call=self._spec(call)))
            elif call.phase == "allowed":
                to_start.append(
                    self._new(
                        ev.ToolStarted(call_id=call.call_id, name=call.name),
                        correlation_id=call.correlation_id,
                        causation_id=call.last_event_id,
                    )
                )
            elif call.phase == "started" and call.call_id not in self._dispatched:
                self._dispatched.add(call.call_id)
                effects.append(Dispatch(call=self._spec(call)))
        if to_start:
            return [Append(events=to_start), *effects]
        if self.pending:
            return effects
        cause = turn.last_event_id or turn.round_event_id
        return [
            Append(
                events=self._start_turn(
                    turn.correlation_id, cause or "", turn.started_at, round_=turn.round + 1
                )
            ),
            *effects,
        ]

    def _resolve_waiters(self) -> list[Effect]:
        effects: list[Effect] = []
        for correlation in sorted(self.waiters):
            outcome = self._turn_outcome(correlation)
            if outcome is not None:
                for reply_to in self.waiters.pop(correlation):
                    effects.append(Reply(to=reply_to, payload=outcome))
        return effects

    def _turn_outcome(self, correlation: str) -> dict[str, Any] | None:
        """The ``wait`` reply once the turn is over, or None while it runs."""
        user = next(
            (
                e
                for e in self.events
                if e.type == "user.message" and e.correlation_id == correlation
            ),
            None,
        )
        if user is None:
            return None
        ack = {"seq": user.seq, "event_id": user.event_id, "correlation_id": correlation}
        if correlation not in self.fold.open_turns:
            last = next(
                (
                    e
                    for e in reversed(self.events)
                    if e.correlation_id == correlation and e.type in TURN_END_TYPES
                ),
                None,
            )
            if last is None:  # no turn opened (orchestration off): nothing ends it
                return None
            return {**ack, "outcome": last.type, "outcome_data": last.data}
        turn = self.turn
        if (
            turn is not None
            and turn.correlation_id == correlation
            and self.fold.status() == "awaiting_approval"
        ):
            return {
                **ack,
                "outcome": "awaiting_approval",
                "outcome_data": {"call_ids": sorted(self.pending)},
            }
        return None

    def model_replied(self, round_: int, reply: ModelReply) -> list[Effect]:
        """The model answered round ``round_``: record its deltas, calls and message."""
        turn = self.turn
        if turn is None or turn.round != round_ or turn.model_done:
            return []
        corr = turn.correlation_id
        cause = turn.round_event_id
        batch: list[NewEvent] = []
        for chunk in reply.deltas:
            batch.append(
                self._new(ev.AssistantDelta(content=chunk), correlation_id=corr, causation_id=cause)
            )
        for request in reply.tool_calls:
            mode = request.run_mode if request.run_mode in ("sync", "async") else "sync"
            batch.append(
                self._new(
                    ev.ToolRequested(
                        call_id=new_call_id(), name=request.name, args=request.args, run_mode=mode
                    ),
                    correlation_id=corr,
                    causation_id=cause,
                )
            )
        message = self._new(
            ev.AssistantMessage(content=reply.text, round=round_, usage=dict(reply.usage)),
            correlation_id=corr,
            causation_id=cause,
        )
        batch.append(message)
        if not reply.tool_calls:
            usage = dict(turn.usage)
            for key, value in reply.usage.items():
                usage[key] = usage.get(key, 0) + int(value)
            batch.append(
                self._new(
                    ev.LlmCompleted(
                        finish_reason=reply.finish_reason,
                        tool_call_count=turn.tool_call_count,
                        usage=usage,
                    ),
                    correlation_id=corr,
                    causation_id=message.event_id,
                )
            )
            return [Append(events=batch)]
        # The calls are decided before anything of this round is committed: the round's
        # reply, its calls and their decisions then go to the journal in one batch (one
        # commit instead of two). Nothing is lost by a crash meanwhile: the round had not
        # been recorded, so a restarted conversation simply asks the model again.
        self._draft = batch
        self._draft_calls = {
            e.data["call_id"]: self._spec_of(e) for e in batch if e.type == "tool.requested"
        }
        self._draft_verdicts = {}
        return [AskPolicy(call=spec) for spec in self._draft_calls.values()]

    def _spec_of(self, requested: NewEvent) -> CallSpec:
        d = requested.data
        return CallSpec(
            call_id=d["call_id"],
            name=d["name"],
            args=d.get("args", {}),
            run_mode=d.get("run_mode", "sync"),
            conversation_id=self.conversation_id,
            correlation_id=requested.correlation_id,
            causation_id=requested.event_id,
        )

    def _decide_draft(self, call_id: str, events: list[ev.Event]) -> list[Effect]:
        """Record one verdict for the drafted round; commit the round once all are in."""
        if self.turn is None or self.cancelled:
            self._drop_draft()
            return []
        self._draft_verdicts[call_id] = events
        if len(self._draft_verdicts) < len(self._draft_calls):
            return []
        batch = list(self._draft)
        all_closed = True
        for requested in [e for e in self._draft if e.type == "tool.requested"]:
            spec = self._draft_calls[requested.data["call_id"]]
            decided = self._record_verdict(
                spec, self._draft_verdicts[spec.call_id], requested.event_id
            )
            batch.extend(decided)
            all_closed = all_closed and any(e.type in TERMINAL_TOOL_TYPES for e in decided)
        turn = self.turn
        if all_closed and turn is not None and not self.cancelled:
            batch.extend(
                self._start_turn(
                    turn.correlation_id, batch[-1].event_id, turn.started_at, round_=turn.round + 1
                )
            )
        self._drop_draft()
        return [Append(events=batch)]

    def _drop_draft(self) -> None:
        self._draft, self._draft_calls, self._draft_verdicts = [], {}, {}

    def policy_restarted(self) -> list[Effect]:
        """The Policy actor was restarted: ask again for every verdict still missing."""
        missing = [c for i, c in self._draft_calls.items() if i not in self._draft_verdicts]
        committed = [
            self._spec(c)
            for c in sorted(self.pending.values(), key=lambda c: c.call_id)
            if c.phase == "requested"
        ]
        return [AskPolicy(call=spec) for spec in [*missing, *committed]]

    def _record_verdict(
        self, call: CallSpec, events: list[ev.Event], cause: str | None
    ) -> list[NewEvent]:
        """The events recording a verdict, chained by causation from ``cause``.

        An allowed call also gets its ``tool.started``.
        """
        out: list[NewEvent] = []
        for payload in events:
            new = self._new(payload, correlation_id=call.correlation_id, causation_id=cause)
            out.append(new)
            if isinstance(payload, ev.PolicyAllowed | ev.PolicyDenied):
                cause = new.event_id
        if any(isinstance(p, ev.PolicyAllowed) for p in events):
            out.append(
                self._new(
                    ev.ToolStarted(call_id=call.call_id, name=call.name),
                    correlation_id=call.correlation_id,
                    causation_id=cause,
                )
            )
        return out

    def model_failed(self, round_: int, reason: str, message: str = "") -> list[Effect]:
        """The model call of round ``round_`` failed: the turn ends with ``llm.failed``.

        ``reason`` is the stable code (``ModelError.reason``), ``message`` the provider's
        own words (``HTTP 404 from ...: model 'x' does not exist``).
        """
        turn = self.turn
        if turn is None or turn.round != round_ or turn.model_done:
            return []
        return [
            Append(
                events=[
                    self._new(
                        ev.LlmFailed(reason=reason, message=message),
                        correlation_id=turn.correlation_id,
                        causation_id=turn.round_event_id,
                    )
                ]
            )
        ]

    def policy_decided(self, call_id: str, events: list[ev.Event]) -> list[Effect]:
        """The policy's verdict on a call, as the events to record (decision, failure...)."""
        if call_id in self._draft_calls:
            return self._decide_draft(call_id, events)
        call = self.pending.get(call_id)
        if call is None or call.phase != "requested":
            return []
        batch = self._record_verdict(self._spec(call), events, call.last_event_id)
        return [Append(events=self._then_next_round(batch))] if batch else []

    def tool_finished(self, call_id: str, events: list[ev.Event]) -> list[Effect]:
        """A call's terminal event and its signals.

        Ignored when the call is no longer pending (cancelled, or already failed as crashed):
        late results are suppressed. A call cancelled while it ran still has its signals
        recorded (``tool.child_processes_terminated {reason: cancel}`` says what the cancel
        killed), with the call's correlation, caused by its ``tool.cancelled``.
        """
        call = self.pending.get(call_id)
        if call is None:
            return self._late_signals(call_id, events)
        if call.phase != "started":
            return []
        batch = [
            self._new(p, correlation_id=call.correlation_id, causation_id=call.last_event_id)
            for p in events
        ]
        return [Append(events=self._then_next_round(batch))] if batch else []

    def _late_signals(self, call_id: str, events: list[ev.Event]) -> list[Effect]:
        """The signals of a call cancelled while it ran; its own terminal event is dropped."""
        where = self._cancelled_running.pop(call_id, None)
        if where is None:
            return []
        correlation, cause = where
        batch = [
            self._new(p, correlation_id=correlation, causation_id=cause)
            for p in events
            if p.__struct_config__.tag in SIGNAL_TYPES
        ]
        return [Append(events=batch)] if batch else []

    def runner_lost(self, reason: str) -> list[Effect]:
        """The ToolRunner died: every dispatched call ends with ``tool_crashed``."""
        batch = [
            self._new(
                ev.ToolFailed(
                    call_id=call.call_id,
                    name=call.name,
                    reason={"code": "tool_crashed", "message": reason},
                ),
                correlation_id=call.correlation_id,
                causation_id=call.last_event_id,
            )
            for call in sorted(self.pending.values(), key=lambda c: c.call_id)
            if call.phase == "started"
        ]
        return [Append(events=self._then_next_round(batch))] if batch else []

    def _then_next_round(self, batch: list[NewEvent]) -> list[NewEvent]:
        """Add the next round's start to a batch that closes the turn's last call.

        This saves one journal round trip per round (``advance`` would add the same events).
        """
        turn = self.turn
        if turn is None or not turn.model_done or self.cancelled:
            return batch
        closed = {e.data.get("call_id") for e in batch if e.type in TERMINAL_TOOL_TYPES}
        if not closed or any(c not in closed for c in self.pending):
            return batch
        return batch + self._start_turn(
            turn.correlation_id, batch[-1].event_id, turn.started_at, round_=turn.round + 1
        )

    def recover(self, reason: str = "conversation restarted") -> list[Effect]:
        """Pick the turn up after a restart.

        Calls that were running are failed as crashed (their results cannot reach this new
        actor), then the loop advances from the journal's state.
        """
        effects = self.runner_lost(reason)
        started = sorted(c.call_id for c in self.pending.values() if c.phase == "started")
        if started:
            effects.append(CancelCalls(call_ids=started))
        return effects if effects else self.advance()

    # --- helpers ------------------------------------------------------------------------

    def _spec(self, call: PendingCall) -> CallSpec:
        return CallSpec(
            call_id=call.call_id,
            name=call.name,
            args=call.args,
            run_mode=call.run_mode,
            conversation_id=self.conversation_id,
            correlation_id=call.correlation_id,
            causation_id=call.last_event_id,
        )

    def _model_request(self, turn: TurnState) -> ModelRequest:
        if self._context_stale:
            self._context = LlmContextFold.of(self.events, self.conversation_id)
            self._context_stale = False
        settings = self.settings
        timeout_s = settings.llm_timeout_ms / 1000
        return ModelRequest(
            messages=[_as_data(m, self._wrapped) for m in self._context.messages()],
            tools=self.tools,
            round=turn.round,
            directives=turn.directives if turn.round == 1 else None,
            model=settings.llm_model,
            system_prompt=settings.llm_system_prompt,
            temperature=settings.llm_temperature,
            max_tokens=settings.llm_max_tokens,
            timeout_s=timeout_s,
        )

    def status(self) -> str:
        """``idle``, ``running``, ``awaiting_approval`` or ``cancelled`` (the fold's)."""
        return self.fold.status()

    def projection(self, key: str) -> Any:
        """The live projection ``key`` (``events.projections.PROJECTION_KEYS``).

        ``diagnostics`` and ``pending_tool_calls`` come straight from the fold the loop runs
        on; the others from the committed events. Raises ``KeyError`` for an unknown key.
        """
        if key == "diagnostics":
            return self.fold.diagnostics()
        if key == "pending_tool_calls":
            return self.fold.pending_calls()
        return get_projection(self.events, self.conversation_id, key)
