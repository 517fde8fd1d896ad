"""The state the agent loop folds from a conversation's events, and what every step shares.

:class:`LoopState` holds a conversation's committed events, the fold read from them (the
projections' own :class:`events.conversation_fold.ConversationFold`: status, open turns,
pending calls), the turn in progress (:class:`TurnState`) and the bookkeeping of calls and
drafts; it builds events (``_new``) and opens model rounds within the budgets
(``_start_turn``). The groups of steps each extend it, side by side, never one another:
``calls`` (tool-call bookkeeping), ``rounds`` (model rounds), ``inbound`` (client
requests); ``core`` joins them (what comes next).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from events import catalog as ev
from events.catalog import decode_data, type_names
from events.conversation_fold import TURN_END_TYPES, ConversationFold, PendingCall
from events.envelope import Envelope, NewEvent, format_at, new_event
from events.projections import PROJECTION_KEYS, LlmContextFold
from runtime.agent.window import SentContext
from runtime.option_table import RuntimeOptions
from runtime.tools.base import CallSpec

__all__ = ["Clock", "LoopState", "TurnRecord", "TurnState"]

Clock = Callable[[], datetime]

_READS = type_names(
    ev.LlmStarted,
    ev.AssistantMessage,
    ev.ToolRequested,
    ev.ToolCompleted,
    ev.ToolFailed,
    ev.ToolCancelled,
)
"""The payloads ``_apply`` reads (the rest it folds without decoding)."""

_REMEMBERED_CANCELS = 1024
"""Cancelled running calls whose late signals are still awaited (the oldest are dropped)."""

REMEMBERED_TURNS = 256
"""Turns whose outcome is kept for clients waiting on them (the oldest ended ones go)."""

_PRUNE_EVERY = 64
"""Ended turns let past ``REMEMBERED_TURNS`` before the oldest are dropped (in one pass)."""


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


@dataclass
class TurnRecord:
    """What a ``wait`` on a turn answers: its first ``user.message`` and how it ended."""

    correlation_id: str
    """The turn's correlation."""
    user_seq: int
    """The ``seq`` of its first ``user.message``."""
    user_event_id: str
    """The id of that ``user.message``."""
    end_type: str | None = None
    """The type of its last turn-ending event (``TURN_END_TYPES``), None while none came."""
    end_data: dict[str, Any] | None = None
    """That event's data."""


class LoopState:
    """One conversation's state, folded from its committed events."""

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
        self.last_seq = 0
        """The ``seq`` of the last event folded (events at or before it are known)."""
        self.turns: dict[str, TurnRecord] = {}
        """The recent turns by correlation, oldest first (at most ``REMEMBERED_TURNS`` ended)."""
        self._context = LlmContextFold(self.settings.context_window_chars)
        self._sent = SentContext()
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
        """Fold already-committed events (rehydration); produces no effects.

        They are folded in ``seq`` order; one at or before :attr:`last_seq` is known already
        and skipped (a retried batch, or the events a snapshot holds).
        """
        for envelope in sorted(events, key=lambda e: e.seq):
            if envelope.seq > self.last_seq:
                self._apply(envelope)

    def _apply(self, e: Envelope) -> None:
        self.last_seq = e.seq
        # A call cancelled while it ran: its runner still answers later (with signals).
        payload = decode_data(e.type, e.data) if e.type in _READS else None
        closing = (
            self.fold.calls.get(payload.call_id) if isinstance(payload, ev.ToolCancelled) else None
        )
        if e.conversation_id == self.conversation_id:
            self._context.apply(e)
            self.fold.apply(e)
            self._record_turn(e)
        turn = self.turn
        match payload:
            case ev.LlmStarted(round=round_):
                if turn is None or turn.correlation_id != e.correlation_id:
                    user = self._user_message(e.correlation_id)
                    turn = self.turn = TurnState(
                        correlation_id=e.correlation_id,
                        user_event_id=user.event_id if user else None,
                        started_at=user.at if user else e.at,
                        directives=(user.data.get("llm") if user else None),
                    )
                turn.round, turn.round_event_id, turn.model_done = round_, e.event_id, False
            case ev.AssistantMessage(usage=usage):
                self.tokens_used += usage.get("total_tokens", 0)
                if turn is not None:
                    turn.model_done, turn.last_event_id = True, e.event_id
                    for key, value in usage.items():
                        turn.usage[key] = turn.usage.get(key, 0) + value
            case ev.ToolRequested() if turn is not None:
                turn.tool_call_count += 1
            case (
                ev.ToolCompleted(call_id=call_id)
                | ev.ToolFailed(call_id=call_id)
                | ev.ToolCancelled(call_id=call_id)
            ):
                if closing is not None and call_id in self._dispatched:
                    self._await_late_signals(closing, e.event_id)
                self._dispatched.discard(call_id)
                self._asked.discard(call_id)
                if turn is not None and e.correlation_id == turn.correlation_id:
                    turn.last_event_id = e.event_id
            case _ if (
                e.type in TURN_END_TYPES
                and turn is not None
                and turn.correlation_id == e.correlation_id
            ):
                self.turn = None
                self._model_round = None

    def _record_turn(self, e: Envelope) -> None:
        """Keep what a ``wait`` on the event's turn answers (``turn_outcome``)."""
        if e.type == "user.message" and e.correlation_id not in self.turns:
            self.turns[e.correlation_id] = TurnRecord(e.correlation_id, e.seq, e.event_id)
            open_turns = self.fold.open_turns
            if len(self.turns) >= REMEMBERED_TURNS + len(open_turns) + _PRUNE_EVERY:
                ended = [c for c in self.turns if c not in open_turns]
                for correlation in ended[: len(ended) - REMEMBERED_TURNS]:
                    del self.turns[correlation]
        elif e.type in TURN_END_TYPES:
            record = self.turns.get(e.correlation_id)
            if record is not None:
                record.end_type, record.end_data = e.type, e.data

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

    def _budgets(self, started_at: str, round_: int) -> Iterator[tuple[str, int, int, bool]]:
        """Each budget in order: its name, limit, use so far, and whether it is exceeded.

        The duration is read (from the clock) only when the budgets before it hold.
        """
        settings = self.settings
        yield "max_rounds", settings.max_rounds, round_ - 1, round_ > settings.max_rounds
        yield (
            "token_budget",
            settings.token_budget,
            self.tokens_used,
            self.tokens_used >= settings.token_budget,
        )
        started = datetime.fromisoformat(started_at.replace("Z", "+00:00"))
        used_ms = int((self.clock() - started).total_seconds() * 1000)
        limit_ms = settings.duration_budget_ms
        yield "duration_budget_ms", limit_ms, used_ms, round_ > 1 and used_ms > limit_ms

    def _budget_exceeded(self, started_at: str, round_: int) -> ev.BudgetExceeded | None:
        for budget, limit, used, exceeded in self._budgets(started_at, round_):
            if exceeded:
                return ev.BudgetExceeded(budget=budget, limit=limit, used=used)
        return None

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

    def _drop_draft(self) -> None:
        self._draft, self._draft_calls, self._draft_verdicts = [], {}, {}

    def status(self) -> str:
        """``idle``, ``running``, ``awaiting_approval`` or ``cancelled`` (the fold's)."""
        return self.fold.status()

    def projection(self, key: str) -> Any:
        """The live projection ``key`` (``events.projections.PROJECTION_KEYS``).

        ``diagnostics`` and ``pending_tool_calls`` come straight from the fold the loop runs
        on, ``llm_context`` from the model's context fold. ``timeline`` is every event of
        the conversation, which the loop does not keep: the gateway reads it from the
        journal (``runtime.daemon.backend``). Raises ``KeyError`` for it and an unknown key.
        """
        live = _LIVE_PROJECTIONS.get(key)
        if live is not None:
            return live(self)
        if key in PROJECTION_KEYS:
            raise KeyError(
                f"projection {key!r} is read from the journal, not the live conversation"
            )
        raise KeyError(f"unknown projection {key!r}; expected one of: {', '.join(PROJECTION_KEYS)}")


_LIVE_PROJECTIONS: dict[str, Callable[[LoopState], Any]] = {
    "diagnostics": lambda state: state.fold.diagnostics(),
    "pending_tool_calls": lambda state: state.fold.pending_calls(),
    "llm_context": lambda state: state._context.messages(),
}
"""The projections the loop serves from its own folds, by key."""
