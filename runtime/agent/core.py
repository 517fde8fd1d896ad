"""The agent loop's step function: a conversation as a pure state machine.

:class:`ConversationCore` holds the state folded from a conversation's committed events
(not the events: ``runtime.agent.state``). It takes inputs (an inbound event, a journal
acknowledgement, a model reply, a policy decision, a tool result) and returns
:mod:`effects <runtime.agent.effects>` for the actor shell to carry out: append these
events, call the model, ask the policy, dispatch a call, reply to a client. Nothing here
sends a message, touches a socket or reads a clock other than the injected one, so the
whole loop is unit-tested without an actor system.

The status and the pending calls are not folded here: the core keeps an
:class:`events.conversation_fold.ConversationFold` (``fold``), the same fold the
projections replay from the journal, and reads its calls, turns and flags from it; so its
``diagnostics`` and ``pending_tool_calls`` cannot differ from a replay's.

The rule that keeps it crash-safe: state changes only when the journal acknowledges the
events (:meth:`ConversationCore.committed`). An ``AppendBatch`` effect is always the first of
the effects returned, and the shell runs the others only after the acknowledgement. A
restarted conversation folds its events again (from a snapshot, :mod:`runtime.agent.
snapshot`, and the events after it, when the journal has one) and
:meth:`ConversationCore.recover` picks the turn up where the journal says it stood.
"""

from __future__ import annotations

from typing import Any, TypedDict

from events import catalog as ev
from events.envelope import Envelope, NewEvent
from runtime.agent.calls import ToolCalls
from runtime.agent.effects import (
    Answer,
    AppendBatch,
    AskPolicy,
    CallModel,
    CancelCalls,
    Dispatch,
    Effect,
)
from runtime.agent.inbound import INBOUND_TYPES, Inbound
from runtime.agent.rounds import ModelRounds
from runtime.agent.snapshot import restore
from runtime.agent.state import TurnRecord

__all__ = ["INBOUND_TYPES", "ConversationCore", "TurnOutcome", "provisional"]


_NEW_EVENT_FIELDS = (
    "event_id",
    "type",
    "at",
    "project_id",
    "conversation_id",
    "correlation_id",
    "causation_id",
    "data",
)


def provisional(events: list[NewEvent], after_seq: int) -> list[Envelope]:
    """``events`` as envelopes numbered from ``after_seq`` + 1, before their commit.

    What a host folds ahead of a commit (:meth:`ConversationCore.confirm` replaces their
    positions once the journal gave them): no hash, stream version 0.
    """
    return [
        Envelope(
            **{f: getattr(e, f) for f in _NEW_EVENT_FIELDS},
            seq=after_seq + i,
            stream_version=0,
            hash="",
            prev_hash="",
        )
        for i, e in enumerate(events, start=1)
    ]


class TurnOutcome(TypedDict):
    """What a ``wait`` on a turn answers: the turn's first ``user.message`` and its end."""

    seq: int
    """The ``seq`` of the turn's first ``user.message``."""
    event_id: str
    """That event's id."""
    correlation_id: str
    """The turn's correlation."""
    outcome: str
    """The turn-ending event's type, or ``awaiting_approval``."""
    outcome_data: dict[str, Any] | None
    """That event's data (``{call_ids}`` of the calls awaiting approval)."""


def _outcome(record: TurnRecord, outcome: str, data: dict[str, Any] | None) -> TurnOutcome:
    return {
        "seq": record.user_seq,
        "event_id": record.user_event_id,
        "correlation_id": record.correlation_id,
        "outcome": outcome,
        "outcome_data": data,
    }


class ConversationCore(Inbound, ModelRounds, ToolCalls):
    """One conversation's agent loop, folded from its events.

    The state (``LoopState``) and three groups of steps over it, side by side: client
    requests (``Inbound``), model rounds (``ModelRounds``), tool calls (``ToolCalls``).
    """

    def committed(self, envelopes: list[Envelope]) -> list[Effect]:
        """The journal committed ``envelopes``: fold them, then decide what comes next."""
        for envelope in envelopes:
            if envelope.seq > self.last_seq:  # a retried batch comes back with known events
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
                    AppendBatch(
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
            return [AppendBatch(events=to_start), *effects]
        if self.pending:
            return effects
        cause = turn.last_event_id or turn.round_event_id
        return [
            AppendBatch(
                events=self._start_turn(
                    turn.correlation_id, cause or "", turn.started_at, round_=turn.round + 1
                )
            ),
            *effects,
        ]

    def _resolve_waiters(self) -> list[Effect]:
        effects: list[Effect] = []
        for correlation in sorted(self.waiters):
            outcome = self.turn_outcome(correlation)
            if outcome is not None:
                for reply_to in self.waiters.pop(correlation):
                    effects.append(Answer(to=reply_to, result=outcome))
        return effects

    def turn_outcome(self, correlation: str) -> TurnOutcome | None:
        """The ``wait`` reply of the turn of ``correlation`` once it is over, else None.

        Read from the turn's record (``turns``): a turn older than the records kept
        (``REMEMBERED_TURNS``) is not answered.
        """
        record = self.turns.get(correlation)
        if record is None:
            return None
        if correlation not in self.fold.open_turns:
            if record.end_type is None:  # no turn opened (orchestration off): nothing ends it
                return None
            return _outcome(record, record.end_type, record.end_data)
        turn = self.turn
        if (
            turn is not None
            and turn.correlation_id == correlation
            and self.fold.status() == "awaiting_approval"
        ):
            return _outcome(record, "awaiting_approval", {"call_ids": sorted(self.pending)})
        return None

    def acknowledged(self, append: AppendBatch, envelopes: list[Envelope]) -> list[Effect]:
        """The journal committed ``append``: answer its client, fold it, decide what's next.

        The client (``ack_to``) gets the first event's ``seq``, ``event_id`` and
        ``correlation_id``.
        """
        effects: list[Effect] = []
        if append.ack_to is not None and envelopes:
            first = envelopes[0]
            ack = {
                "seq": first.seq,
                "event_id": first.event_id,
                "correlation_id": first.correlation_id,
            }
            effects.append(Answer(to=append.ack_to, result=ack))
        return effects + self.committed(envelopes)

    def confirm(self, provisional: list[Envelope], committed: list[Envelope]) -> bool:
        """The journal committed events the shell let this core fold ahead of the commit.

        A host folds the loop's own batches at once, with ``provisional`` envelopes (``seq``
        counting on from :attr:`last_seq`, no hash), while the turn goes on in memory
        (``actors.agent_shell``: nothing leaves the host before the commit). The commit's
        positions take their places: the last ``seq`` of the core, its fold and its model
        context, and the ``requested_seq`` of calls requested meanwhile. False when the
        journal kept something else than what was folded (the shell redacts a stage as the
        journal does, so it never should): the state is then uncertain.
        """
        real = {e.event_id: e for e in committed}
        moved: dict[int, int] = {}
        for envelope in provisional:
            kept = real.get(envelope.event_id)
            if kept is None or kept.data != envelope.data or kept.type != envelope.type:
                return False
            moved[envelope.seq] = kept.seq
        self.last_seq = moved.get(self.last_seq, self.last_seq)
        self.fold.last_seq = moved.get(self.fold.last_seq, self.fold.last_seq)
        self._context.last_seq = moved.get(self._context.last_seq, self._context.last_seq)
        for call in self.fold.calls.values():
            call.requested_seq = moved.get(call.requested_seq, call.requested_seq)
        for record in self.turns.values():
            record.user_seq = moved.get(record.user_seq, record.user_seq)
        return True

    def busy(self) -> bool:
        """Whether the loop has work in flight (one that has none may be passivated).

        A client waiting for a turn, or a turn running or awaiting approval.
        """
        return bool(self.waiters) or self.status() in ("running", "awaiting_approval")

    def rehydrate(
        self,
        events: list[Envelope],
        waiters: list[tuple[str, Any]],
        *,
        recovering: bool,
        snapshot: bytes | None = None,
    ) -> list[Effect]:
        """A conversation started again: fold its events, take the waiters, recover.

        With ``snapshot`` (:mod:`runtime.agent.snapshot`, checked by the journal that
        stored it), the state starts from it and ``events`` are those after it; without,
        ``events`` are the whole history. ``waiters`` (``(correlation_id, reply_to)``) are
        the clients of the actor that died, answered when their turns end. Always recover:
        an idle conversation has no started call (it is then :meth:`advance`), and one with
        a started call was cut off by a crash of itself (``recovering``), its project or the
        daemon; no runner will answer for that call, and running it again would repeat it.
        """
        if snapshot is not None:
            restore(self, snapshot)
        self.load(events)
        for correlation, reply_to in waiters:
            self.waiters.setdefault(correlation, []).append(reply_to)
        return self.recover("conversation restarted" if recovering else "runtime restarted")

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
