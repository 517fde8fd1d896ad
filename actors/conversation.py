"""The Conversation actor: a thin shell that runs :class:`runtime.agent.ConversationCore`.

It carries out the core's effects one at a time. An ``Append`` goes to the Journal and
everything after it waits for the acknowledgement; inputs that arrive meanwhile are
queued, so the core only ever sees committed state. The model is called inline (the
deterministic adapter answers at once; an HTTP model blocks this conversation only).
"""

from __future__ import annotations

import functools
import time
import uuid
from collections import deque
from datetime import timedelta
from typing import Any

from thespian.actors import ActorExitRequest, WakeupMessage

from actors.base import RoostActor, error_reply, utc_now
from actors.messages import (
    Appended,
    AppendFailed,
    CallCancel,
    CallDecision,
    CallDone,
    ConversationFailed,
    ConversationIdle,
    DecideCall,
    DirectDone,
    PeerUpdate,
    ReadProject,
    ReadResult,
    Reply,
    Request,
    RunCall,
    RunDirect,
    SetupConversation,
)
from events import catalog as ev
from events.envelope import Envelope, new_correlation_id
from runtime.agent.core import ConversationCore
from runtime.agent.effects import (
    Append,
    AskPolicy,
    CallModel,
    CancelCalls,
    Dispatch,
    Effect,
)
from runtime.agent.effects import Reply as ReplyEffect
from runtime.errors import BadRequestError, RoostError
from runtime.journal.link import LinkClient, LinkFailed, link_settings
from runtime.llm.adapters import make_adapter
from runtime.llm.base import ModelAdapter, ModelError
from runtime.policy.options import RuntimeOptions
from runtime.wire.ops import event_type_of

__all__ = ["ConversationActor"]

_STOP = "stop"
_STOP_GRACE_S = 10.0
"""How long a conversation whose append failed waits for its project to stop it."""


class ConversationActor(RoostActor):
    """Runs one conversation's agent loop."""

    kind = "conversation"
    parent_kind = "project"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.core: ConversationCore | None = None
        self.setup: SetupConversation | None = None
        self.settings = RuntimeOptions.of({})  # the set-up's options, typed, from _setup on
        self.adapter: ModelAdapter | None = None
        self.policy: Any = None
        self.runner: Any = None
        self.parent: Any = None
        self.inputs: deque[tuple[Any, Any]] = deque()
        self.effects: deque[Effect] = deque()
        self.waiting_append = False
        self.stopping = False
        """An append failed: state is uncertain, nothing more runs until the restart."""
        self.stop_error: dict[str, Any] | None = None
        """That append's error: requests that wait behind it get it as their answer."""
        self.link: LinkClient | None = None
        self.loading = False
        self.handled = 0
        self.last_activity = time.monotonic()
        self.idle_armed = False

    # --- message entry ------------------------------------------------------------------

    def handle(self, message: Any, sender: Any) -> None:
        """Queue inputs while an append or the initial read is outstanding."""
        if isinstance(message, SetupConversation):
            self._setup(message, sender)
            return
        if isinstance(message, ReadResult):
            self._loaded(message)
            return
        if isinstance(message, PeerUpdate):
            self._peers(message)
            return
        if isinstance(message, WakeupMessage):
            if message.payload == _STOP:
                self.send(self.myAddress, ActorExitRequest())
            else:
                self._maybe_idle()
            return
        self.last_activity = time.monotonic()
        self.inputs.append((message, sender))
        self._pump()

    def _pump(self) -> None:
        """Run effects and inputs until something must be waited for.

        Nothing runs before the set-up message: an input that overtakes it (Thespian
        gives no order between a new actor's first messages from different paths) waits.
        """
        while (
            self.core is not None
            and not self.waiting_append
            and not self.loading
            and not self.stopping
        ):
            if self.effects:
                self._run(self.effects.popleft())
            elif self.inputs:
                message, sender = self.inputs.popleft()
                self._input(message, sender)
            else:
                break
        if self.stopping:
            self._refuse_inputs()
        self._arm_idle()

    def _refuse_inputs(self) -> None:
        """Answer the requests queued behind a failed append: none of them will run here.

        The restarted conversation does not get them (they are in this one's memory), so
        their clients get the append's error now rather than a timeout later.
        """
        inputs, self.inputs = self.inputs, deque()
        for message, _sender in inputs:
            reply_to = getattr(message, "reply_to", None)
            if reply_to is not None and self.stop_error is not None:
                self.send(reply_to, Reply(ok=False, error=self.stop_error))

    # --- set-up and rehydration ----------------------------------------------------------

    def _setup(self, setup: SetupConversation, sender: Any) -> None:
        self.setup = setup
        self.settings = RuntimeOptions.of(setup.options)
        self.parent = sender
        self.announce(sender, f"conversation:{setup.conversation_id}")
        self.journal, self.policy, self.runner = setup.journal, setup.policy, setup.runner
        self.alert_options = setup.options
        self.core = ConversationCore(
            project_id=setup.project_id,
            conversation_id=setup.conversation_id,
            options=setup.options,
            clock=utc_now,
            tools=setup.tools,
        )
        self.adapter = make_adapter(setup.options)
        self.core.provider = self.adapter.provider
        self.core.model = self.adapter.model
        if setup.new:
            started = self.core._new(
                ev.ConversationStarted(),
                correlation_id=setup.correlation_id or new_correlation_id(),
                causation_id=None,
            )
            self.effects.append(Append(events=[started]))
            if setup.reply_to is not None:
                self.effects.append(ReplyEffect(to=setup.reply_to, payload=setup.conversation_id))
            self._pump()
            return
        self.loading = True
        self.send(
            self.journal,
            ReadProject(project_id=setup.project_id, conversation_id=setup.conversation_id),
        )

    def _loaded(self, result: ReadResult) -> None:
        assert self.core is not None and self.setup is not None
        self.core.load(result.events)
        self.loading = False
        for correlation, reply_to in self.setup.waiters:  # clients of the actor that died
            self.core.waiters.setdefault(correlation, []).append(reply_to)
        # Always recover: an idle conversation has no started call (it is then advance()),
        # and one with a started call was cut off by a crash of itself, its project or the
        # daemon; no runner will answer for that call, and running it again would repeat it.
        reason = "conversation restarted" if self.setup.recovering else "runtime restarted"
        self.effects.extend(self.core.recover(reason))
        self._pump()

    def _peers(self, update: PeerUpdate) -> None:
        if update.journal is not None:
            self.journal = update.journal
            self.resend_appends()
            if self.loading and self.setup is not None:  # the read died with the journal
                self.send(
                    self.journal,
                    ReadProject(
                        project_id=self.setup.project_id,
                        conversation_id=self.setup.conversation_id,
                    ),
                )
        if update.policy is not None:
            self.policy = update.policy
            if self.core is not None:
                self.effects.extend(self.core.policy_restarted())
                self._pump()
        if update.runner is not None:
            self.runner = update.runner
        if update.runner_lost and self.core is not None:
            self.inputs.append((update, None))
            self._pump()

    # --- inputs ------------------------------------------------------------------------

    def _input(self, message: Any, sender: Any) -> None:
        core = self.core
        assert core is not None
        if isinstance(message, Request):
            self.handled += 1
            try:
                self.effects.extend(self._request(message))
            except RoostError as e:
                self.send(message.reply_to, error_reply(e))
        elif isinstance(message, CallDecision):
            self.effects.extend(core.policy_decided(message.call_id, message.events))
        elif isinstance(message, CallDone):
            self.effects.extend(core.tool_finished(message.call_id, message.events))
        elif isinstance(message, DirectDone):
            self._direct_done(message)
        elif isinstance(message, PeerUpdate) and message.runner_lost:
            self.effects.extend(core.runner_lost(message.runner_lost))

    def _request(self, request: Request) -> list[Effect]:
        core = self.core
        assert core is not None
        op, args = request.op, request.args
        if op == "send_event":
            client_key = args.get("idempotency_key")
            key = f"{core.project_id}/{core.conversation_id}/{client_key}" if client_key else None
            return core.inbound(
                args["event"], request.reply_to, wait=bool(args.get("wait", False)), key=key
            )
        event_type = event_type_of(op)
        if event_type is not None:
            data: dict[str, Any] = {}
            if op in ("approve", "reject"):
                data["call_id"] = args["call_id"]
            if op in ("reject", "cancel") and args.get("reason"):
                data["reason"] = args["reason"]
            event = {
                "type": event_type,
                "data": data,
                "correlation_id": args.get("correlation_id"),
            }
            return core.inbound(event, request.reply_to)
        if op == "get_projection":
            self.send(request.reply_to, Reply(ok=True, result=self._projection(args["key"])))
            return []
        if op == "stop_conversation":
            stopped = core._new(
                ev.ConversationStopped(), correlation_id=new_correlation_id(), causation_id=None
            )
            return [
                Append(events=[stopped]),
                ReplyEffect(
                    to=request.reply_to,
                    payload={"conversation_id": core.conversation_id, "stopped": True},
                ),
            ]
        if op == "run_tool":
            self.send(
                self.runner,
                RunDirect(
                    request=args["request"],
                    reply_to=request.reply_to,
                    conversation_id=core.conversation_id,
                ),
            )
            return []
        raise BadRequestError(
            f"operation {op!r} does not apply to a conversation", reason="unknown_op"
        )

    def _projection(self, key: str) -> Any:
        core = self.core
        assert core is not None
        try:
            return core.projection(key)
        except KeyError as e:
            raise BadRequestError(str(e), reason="unknown_projection", key=key) from e

    def _direct_done(self, message: DirectDone) -> None:
        core = self.core
        assert core is not None
        batch = [
            core._new(p, correlation_id=message.correlation_id, causation_id=None)
            for p in message.events
        ]
        self.effects.append(Append(events=batch))
        self.effects.append(ReplyEffect(to=message.reply_to, payload=message.result))

    # --- effects -----------------------------------------------------------------------

    def _run(self, effect: Effect) -> None:
        core = self.core
        assert core is not None
        if isinstance(effect, Append):
            link = self._link()
            if link is None:
                self.waiting_append = True
                self.append(
                    effect.events, then=functools.partial(self._appended, effect), key=effect.key
                )
                return
            # The journal link: wait here for the commit; _pump goes on with the effects.
            result = link.append(effect.events, effect.key or str(uuid.uuid4()))
            if isinstance(result, LinkFailed):
                self._settle(effect, AppendFailed(token=0, error=result.error))
                return
            self._settle(effect, Appended(token=0, envelopes=result.envelopes))
        elif isinstance(effect, ReplyEffect):
            self.send(effect.to, Reply(ok=True, result=effect.payload))
        elif isinstance(effect, CallModel):
            assert self.adapter is not None
            try:
                reply = self.adapter.complete(effect.request)
            except ModelError as e:
                self.effects.extend(core.model_failed(effect.round, e.reason, e.message))
            except Exception as e:
                message = f"{type(e).__name__}: {e}"
                self.effects.extend(core.model_failed(effect.round, "adapter_error", message))
            else:
                self.effects.extend(core.model_replied(effect.round, reply))
        elif isinstance(effect, AskPolicy):
            self.send(self.policy, DecideCall(call=effect.call))
        elif isinstance(effect, Dispatch):
            self.send(self.runner, RunCall(call=effect.call))
        elif isinstance(effect, CancelCalls):
            self.send(self.runner, CallCancel(call_ids=effect.call_ids))

    def _link(self) -> LinkClient | None:
        """The journal link of this process, made on first use (None: not configured)."""
        if self.link is None:
            settings = link_settings()
            if settings is not None:
                self.link = LinkClient(*settings)
        return self.link

    def _appended(self, effect: Append, answer: Any) -> None:
        """An append's answer arrived as an actor message."""
        self._settle(effect, answer)
        self._pump()

    def _settle(self, effect: Append, answer: Appended | AppendFailed) -> None:
        """Acknowledge and fold a committed append, or stop on a failed one."""
        core = self.core
        assert core is not None
        self.waiting_append = False
        if isinstance(answer, AppendFailed):
            self.stopping = True
            self.stop_error = answer.error
            if effect.ack_to is not None:
                self.send(effect.ack_to, Reply(ok=False, error=answer.error))
            # State is uncertain: stop, and let the project restart us from the journal. The
            # project sends the stop, behind what it already forwarded (answered meanwhile
            # with this error); if it does not within the grace, stop anyway.
            self.log.error("append_failed_exiting", error=answer.error)
            self.send(self.parent, ConversationFailed(conversation_id=core.conversation_id))
            self.wakeupAfter(timedelta(seconds=_STOP_GRACE_S), payload=_STOP)
            return
        assert isinstance(answer, Appended)
        if effect.ack_to is not None and answer.envelopes:
            first = answer.envelopes[0]
            self.send(
                effect.ack_to,
                Reply(
                    ok=True,
                    result={
                        "seq": first.seq,
                        "event_id": first.event_id,
                        "correlation_id": first.correlation_id,
                    },
                ),
            )
        self.effects.extend(core.committed(answer.envelopes))
        # Routed alerts go through the effect queue, so the core folds them too.
        alerts = self.alerts_for(answer.envelopes)
        if alerts:
            self.effects.append(Append(events=alerts))

    def route_alerts(self, envelopes: list[Envelope]) -> None:
        """Nothing here: :meth:`_settle` queues a commit's alerts (either append path)."""

    # --- passivation -------------------------------------------------------------------

    def _arm_idle(self) -> None:
        if self.setup is None or self.idle_armed:
            return
        self.idle_armed = True
        idle_ms = self.settings.idle_passivation_ms
        self.wakeupAfter(timedelta(milliseconds=idle_ms))

    def _maybe_idle(self) -> None:
        self.idle_armed = False
        if self.setup is None or self.core is None:
            return
        idle_ms = self.settings.idle_passivation_ms
        quiet = (time.monotonic() - self.last_activity) * 1000 >= idle_ms
        busy = (
            self.waiting_append
            or self.loading
            or self.effects
            or self.inputs
            or self.core.waiters
            or self.core.status() in ("running", "awaiting_approval")
        )
        if quiet and not busy:
            self.send(
                self.parent,
                ConversationIdle(conversation_id=self.core.conversation_id, handled=self.handled),
            )
        self._arm_idle()

    def on_error(self, message: Any, sender: Any, error: Exception) -> None:
        """Answer the waiting client.

        A half-run step leaves state uncertain, so the storm counter will restart us if it
        repeats.
        """
        super().on_error(message, sender, error)
        self.waiting_append = False
