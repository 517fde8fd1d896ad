"""What the Conversation actor does for its core: carry out the agent loop's effects.

:class:`AgentShell` runs a :class:`runtime.agent.ConversationCore`'s effects one at a time
and feeds what they bring back (a commit, a model reply) to the core. An ``AppendBatch`` goes
over the journal link (or, without one, to the Journal actor) and nothing after it runs
before the journal's answer; inputs that arrive meanwhile are queued, so the core only ever
sees committed state. A failed append stops the loop: the state is uncertain until the
Project restarts the conversation from its events.
"""

from __future__ import annotations

import functools
import operator
from collections import deque
from collections.abc import Callable
from datetime import timedelta
from typing import Any, ClassVar

import msgspec

from actors.base import RoostActor
from actors.dispatch import Handler, handler_table
from actors.hosting import Deferred
from actors.messages import (
    Appended,
    AppendFailed,
    CallCancel,
    ConversationFailed,
    DecideCall,
    Reply,
    Request,
    RunCall,
    RunDirect,
)
from events.envelope import Envelope
from runtime.agent import effects as fx
from runtime.agent.core import ConversationCore, provisional
from runtime.errors import WireError
from runtime.llm.base import ModelAdapter, ModelError
from runtime.llm.resilience import ModelNote

__all__ = ["FLUSH", "STOP", "AgentShell"]

STOP = "stop"
"""The wakeup payload that ends a conversation whose append failed."""
FLUSH = "flush"
"""The wakeup payload that commits a stage whose in-host answer is late."""
_STAGE_LIMIT = timedelta(milliseconds=200)
"""How long a stage waits for an in-host answer (a policy verdict, an inline read)."""
_STOP_GRACE_S = 10.0
"""How long a conversation whose append failed waits for its project to stop it."""


_REDACTION: list[Any] = []


def _redacted(events: list[Any]) -> list[Any]:
    """``events`` as the journal's append redacts them (the redaction is made once)."""
    if not _REDACTION:
        from runtime.journal.append_redaction import AppendRedaction  # noqa: PLC0415

        _REDACTION.append(AppendRedaction())
    redaction = _REDACTION[0]
    return [redaction.event(event) for event in redaction.streams(events)]


class AgentShell(RoostActor):
    """A :class:`RoostActor` that carries out a conversation core's effects."""

    input_handlers: ClassVar[dict[type, Handler]] = {}
    """Input type -> the method handing it to the core (``table="input"`` rows)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.input_handlers = handler_table(cls, "input")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.core: ConversationCore | None = None
        self.adapter: ModelAdapter | None = None
        self.policy: Any = None
        self.runner: Any = None
        self.parent: Any = None
        self.inputs: deque[tuple[Any, Any]] = deque()
        self.effects: deque[fx.Effect] = deque()
        self.waiting_append = False
        self.waiting_model = False
        """A hosted entity's model call runs on a thread: nothing else runs meanwhile."""
        self.staged: list[fx.AppendBatch] = []
        """The loop's own batches, folded ahead of their commit (hosted: see ``_stages``)."""
        self.staged_envelopes: list[Envelope] = []
        """Their provisional envelopes, in order (``ConversationCore.confirm``)."""
        self.awaiting: set[tuple[str, str]] = set()
        """In-host answers a staged turn waits for: ``("policy"|"call", call_id)``."""
        self.flush_armed = False
        self.fold_tools: frozenset[str] = frozenset()
        """Read-only tools the host's runner runs inline: their calls do not end a stage."""
        self.loading = False
        self.failed: AppendFailed | None = None
        """A failed append's answer: state is uncertain, nothing more runs until the restart,
        and requests that wait behind it get its error as their answer."""
        self.appends.routes_alerts = False  # _settle queues a commit's alerts (either path)

    @property
    def stopping(self) -> bool:
        """Whether an append failed (:attr:`failed`): the loop waits for its restart."""
        return self.failed is not None

    def input(self, message: Any, sender: Any) -> None:
        """Hand one queued input to the core: the method its type's ``input`` row names."""
        handler: Handler = self.input_handlers.get(type(message), AgentShell.unserved)
        handler(self, message, sender)

    def unserved(self, message: Any, sender: Any) -> None:
        """An input no ``input`` row serves: the core has no use for it (dropped)."""

    def after_pump(self) -> None:
        """Called whenever the loop stops to wait (subclasses)."""

    def pump(self) -> None:
        """Run effects and inputs until something must be waited for.

        Nothing runs before the core exists: an input that overtakes the set-up message
        (Thespian gives no order between a new actor's first messages from different
        paths) waits.
        """
        while self.core is not None and not (
            self.waiting_append or self.loading or self.waiting_model
        ):
            if self.stopping:
                break
            if self.effects:
                effect = self.effects.popleft()
                if self.staged and self._ends_stage(effect):
                    self.effects.appendleft(effect)
                    self._flush()
                    break
                self.run(effect)
            elif self.inputs:
                if self.staged and isinstance(self.inputs[0][0], Request):
                    # A client's request is answered from the core's state: commit first, so
                    # no answer is computed from events the journal has not numbered yet.
                    self._flush()
                    break
                self.input(*self.inputs.popleft())
            else:
                break
        if self.stopping:  # what waits behind the failed append will not run here
            inputs, self.inputs = self.inputs, deque()
            waiting = [getattr(message, "reply_to", None) for message, _sender in inputs]
            effects, self.effects = self.effects, deque()
            # e.g. a start's answer, due after its commit
            waiting += [_waiter(effect) for effect in effects]
            self._fail(waiting)
        elif self.staged and not self.waiting_append:
            if not self.awaiting:
                self._flush()  # nothing more happens in memory: commit the stage
            elif not self.flush_armed:  # an in-host answer is due; commit anyway if it is not
                self.flush_armed = True
                self.wakeupAfter(_STAGE_LIMIT, payload=FLUSH)
        self.after_pump()

    # --- stages: one commit per step that waits on nothing outside the host -------------

    def _stages(self, effect: fx.AppendBatch) -> bool:
        """Whether ``effect`` is folded now and committed with the rest of its stage.

        Only in a host, and only the loop's own batches: a client's append (its key, its
        acknowledgement) ends the stage and commits at once.
        """
        return self.hosted and effect.ack_to is None and effect.key is None

    def _ends_stage(self, effect: fx.Effect) -> bool:
        """Whether the stage must be committed before ``effect`` runs.

        Anything a client, the model server or a tool process would see is: an answer, a
        client's append, a model call over the network, a call that is not a read-only
        file or asset tool the runner runs inline, a cancel, a direct run.
        """
        match effect:
            case fx.AppendBatch():
                return not self._stages(effect)
            case fx.AskPolicy():
                return False
            case fx.CallModel():
                return not getattr(self.adapter, "instant", False)
            case fx.Dispatch(call=call):
                return not (call.name in self.fold_tools and call.run_mode == "sync")
            case _:
                return True

    def _stage(self, effect: fx.AppendBatch) -> None:
        """Fold ``effect`` now with provisional envelopes; commit it with its stage.

        Its events are redacted first, as the journal redacts a batch
        (``runtime.journal.append_redaction``), so what the core folds is what the journal
        will keep: the journal's own redaction then finds nothing more to hide.
        """
        core = self.core
        assert core is not None
        effect = msgspec.structs.replace(effect, events=_redacted(effect.events))
        last = self.staged_envelopes[-1].seq if self.staged_envelopes else core.last_seq
        envelopes = provisional(effect.events, last)
        self.staged.append(effect)
        self.staged_envelopes.extend(envelopes)
        self.effects.extend(core.acknowledged(effect, envelopes))

    def _flush(self) -> None:
        """Commit the stage, with the client's append that ends it if one does."""
        staged, self.staged = self.staged, []
        provisional, self.staged_envelopes = self.staged_envelopes, []
        events = [event for effect in staged for event in effect.events]
        self.waiting_append = True
        self.append(events, functools.partial(self._flushed, events, provisional), redacted=True)

    def _flushed(self, events: list[Any], provisional: list[Envelope], answer: Any) -> None:
        core = self.core
        assert core is not None
        if not isinstance(answer, AppendFailed) and not core.confirm(provisional, answer.envelopes):
            error: WireError = {
                "code": "internal_error",
                "message": "the journal kept other events than the conversation folded",
                "details": {"reason": "stage_mismatch"},
            }
            answer = AppendFailed(token=0, error=error)  # restarted from what it kept
        if isinstance(answer, AppendFailed):
            self._settle(fx.AppendBatch(events=events), answer)
        else:
            self.waiting_append = False
            self.effects = deque(self._recomputed(effect) for effect in self.effects)
            self._queue_alerts(answer.envelopes)
        self.pump()

    def _recomputed(self, effect: fx.Effect) -> fx.Effect:
        """A turn's outcome computed before the commit, computed again from what it holds.

        The journal may have redacted what the outcome quotes (a provider's error message).
        """
        core = self.core
        assert core is not None
        if not isinstance(effect, fx.Answer) or not isinstance(effect.result, dict):
            return effect
        correlation = effect.result.get("correlation_id")
        if "outcome" not in effect.result or not isinstance(correlation, str):
            return effect
        outcome = core.turn_outcome(correlation)
        return effect if outcome is None else msgspec.structs.replace(effect, result=outcome)

    def flush_due(self) -> None:
        """The stage waited long enough for an in-host answer: commit it now."""
        self.flush_armed = False
        if self.staged and not self.waiting_append and not self.stopping:
            self._flush()
            self.pump()

    def run(self, effect: fx.Effect) -> None:
        """Carry out one effect."""
        core = self.core
        assert core is not None
        match effect:
            case fx.AppendBatch() if self._stages(effect):
                self._stage(effect)
            case fx.AppendBatch(events=events, key=key) if self.hosted:
                # The host's appender commits it (``JournalAppends.append``, with its
                # neighbours' batches); nothing after the append runs before the answer.
                self.waiting_append = True
                self.append(events, then=functools.partial(self._appended, effect), key=key)
            case fx.AppendBatch(events=events, key=key):
                # Over the journal link: wait here for the commit; pump goes on after it.
                answer = self.appends.over_link(events, key)
                if answer is not None:
                    self._settle(effect, answer)
                else:  # to the Journal actor: wait for its answer message
                    self.waiting_append = True
                    self.append(events, then=functools.partial(self._appended, effect), key=key)
            case fx.Answer(to=to, ok=ok, result=result, error=error):
                self.send(to, Reply(ok=ok, result=result, error=error))
            case fx.CallModel(request=request, round=round_) if self.hosted and not getattr(
                self.adapter, "instant", False
            ):
                # A model that answers over the network never blocks the host: the host's
                # ModelCaller runs the call on its event loop (one connection pool per host),
                # and the outcome comes back to this entity's turn; inputs wait meanwhile.
                self.waiting_model = True
                port = self._myRef
                port.call_model(
                    self.adapter,
                    request,
                    lambda outcome: port.post(Deferred(self._model_done, round_, outcome)),
                )
            case fx.CallModel(request=request, round=round_):
                assert self.adapter is not None
                try:
                    reply = self.adapter.complete(request)
                except ModelError as e:
                    notes = self._notes()
                    self.effects.extend(core.model_failed(round_, e.reason, e.message, notes))
                except Exception as e:
                    message = f"{type(e).__name__}: {e}"
                    notes = self._notes()
                    self.effects.extend(core.model_failed(round_, "adapter_error", message, notes))
                else:
                    self.effects.extend(core.model_replied(round_, reply, self._notes()))
            case fx.AskPolicy(call=call):
                if self.hosted:
                    self.awaiting.add(("policy", call.call_id))
                self.send(self.policy, DecideCall(call=call))
            case fx.Dispatch(call=call):
                if self.hosted and not self._ends_stage(effect):
                    self.awaiting.add(("call", call.call_id))
                self.send(self.runner, RunCall(call=call))
            case fx.CancelCalls(call_ids=call_ids):
                self.send(self.runner, CallCancel(call_ids=call_ids))
            case fx.RunDirectForConversation(request=request, reply_to=reply_to):
                direct = RunDirect(
                    request=request, reply_to=reply_to, conversation_id=core.conversation_id
                )
                self.send(self.runner, direct)

    def _model_done(self, round_: int, outcome: Any) -> None:
        """A hosted call's ``ModelOutcome`` (``runtime.llm.caller``), in this entity's turn."""
        core = self.core
        assert core is not None
        self.waiting_model = False
        if outcome.ok:
            self.effects.extend(core.model_replied(round_, outcome.reply, outcome.notes))
        else:
            reason = outcome.reason or "adapter_error"
            self.effects.extend(core.model_failed(round_, reason, outcome.message, outcome.notes))
        self.pump()

    def _notes(self) -> list[ModelNote]:
        """The retries and breaker transitions of the model call just made (journaled)."""
        take = getattr(self.adapter, "take_notes", None)  # the resilient adapter's only
        return list(take()) if take is not None else []

    def _appended(self, effect: fx.AppendBatch, answer: Any) -> None:
        """An append's answer arrived as an actor message."""
        self._settle(effect, answer)
        self.pump()

    def _settle(self, effect: fx.AppendBatch, answer: Appended | AppendFailed) -> None:
        """Hand a commit to the core, or stop on a failed append."""
        core = self.core
        assert core is not None
        self.waiting_append = False
        if isinstance(answer, AppendFailed):
            self.failed = answer
            waiting = [effect.ack_to]
            for event in effect.events:  # a turn never recorded: its waiters wait no more
                if event.type == "user.message":
                    waiting += core.waiters.pop(event.correlation_id, [])
            self._fail(waiting)
            # State is uncertain: stop, and let the project restart us from the journal. The
            # project sends the stop, behind what it already forwarded (answered meanwhile
            # with this error); if it does not within the grace, stop anyway.
            self.log.error("append_failed_exiting", error=answer.error)
            unrecorded = any(e.type == "conversation.started" for e in effect.events)
            failed = ConversationFailed(
                conversation_id=core.conversation_id,
                unrecorded=unrecorded,
                code=str(answer.error.get("code", "")),
            )
            self.send(self.parent, failed)
            self.wakeupAfter(timedelta(seconds=_STOP_GRACE_S), payload=STOP)
            return
        self.effects.extend(core.acknowledged(effect, answer.envelopes))
        self._queue_alerts(answer.envelopes)

    def _queue_alerts(self, envelopes: list[Envelope]) -> None:
        """Queue a commit's routed alerts: through the effect queue, the core folds them too."""
        alerts = self.appends.alerts_for(envelopes)
        if alerts:
            self.effects.append(fx.AppendBatch(events=alerts))

    def _fail(self, waiting: list[Any]) -> None:
        """Answer each of ``waiting`` (None: nobody) with the failed append's error."""
        assert self.failed is not None
        for reply_to in waiting:
            if reply_to is not None:
                self.send(reply_to, Reply(ok=False, error=self.failed.error))


def _nobody(effect: fx.Effect) -> Any:
    """An effect no client waits on."""
    return None


def _waiter(effect: fx.Effect) -> Any:
    """Who waits on ``effect`` (:data:`_WAITERS`), or None."""
    waiter: Callable[[Any], Any] = _WAITERS.get(type(effect), _nobody)
    return waiter(effect)


_WAITERS: dict[type, Callable[[Any], Any]] = {
    fx.Answer: operator.attrgetter("to"),
    fx.AppendBatch: operator.attrgetter("ack_to"),
}
"""Effect type -> who waits on an effect of it (the client a failed append leaves waiting)."""
