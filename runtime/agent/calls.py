"""Tool-call bookkeeping: verdicts, results, late signals, a lost runner.

A model round that asks for calls is drafted (not yet committed) until the policy has
decided every call; the round, its calls and their verdicts then go to the journal in one
batch. Committed calls get their verdicts and results here too; the batch that closes a
turn's last call also opens the next model round (``_then_next_round``).
"""

from __future__ import annotations

from events import catalog as ev
from events.catalog import SIGNAL_TYPES, TERMINAL_TOOL_TYPES
from events.envelope import NewEvent
from runtime.agent.effects import (
    AppendBatch,
    AskPolicy,
    Effect,
)
from runtime.agent.state import LoopState
from runtime.tools.base import CallSpec

__all__ = ["ToolCalls"]


class ToolCalls(LoopState):
    """The steps that follow a call through policy and runner (one group of the core's)."""

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
        return [AppendBatch(events=batch)]

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

    def policy_decided(self, call_id: str, events: list[ev.Event]) -> list[Effect]:
        """The policy's verdict on a call, as the events to record (decision, failure...)."""
        if call_id in self._draft_calls:
            return self._decide_draft(call_id, events)
        call = self.pending.get(call_id)
        if call is None or call.phase != "requested":
            return []
        batch = self._record_verdict(self._spec(call), events, call.last_event_id)
        return [AppendBatch(events=self._then_next_round(batch))] if batch else []

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
        return [AppendBatch(events=self._then_next_round(batch))] if batch else []

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
        return [AppendBatch(events=batch)] if batch else []

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
        return [AppendBatch(events=self._then_next_round(batch))] if batch else []

    def _then_next_round(self, batch: list[NewEvent]) -> list[NewEvent]:
        """Add the next round's start to a batch that closes the turn's last call.

        This saves one journal round trip per round (``advance`` would add the same events).
        """
        turn = self.turn
        closed = {e.data.get("call_id") for e in batch if e.type in TERMINAL_TOOL_TYPES}
        still_open = not closed or any(c not in closed for c in self.pending)
        if turn is None or not turn.model_done or self.cancelled or still_open:
            return batch
        return batch + self._start_turn(
            turn.correlation_id, batch[-1].event_id, turn.started_at, round_=turn.round + 1
        )
