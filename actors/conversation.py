"""The Conversation actor: a shell over :class:`runtime.agent.ConversationCore`.

Every decision of the agent loop is the core's (``runtime/agent``): it takes the requests
the Project forwards, the Policy's verdicts, the ToolRunner's results and the journal's
commits, and returns effects, which :class:`actors.agent_shell.AgentShell` carries out.
This module translates messages into core calls, sets the core up (a new conversation
records its start, a rehydrated one folds its events and recovers), follows peers that
restart, and offers to passivate when idle.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import msgspec
from thespian.actors import ActorExitRequest, WakeupMessage

from actors.agent_shell import FLUSH, STOP, AgentShell
from actors.base import error_reply, utc_now
from actors.dispatch import handles
from actors.messages import (
    CallDecision,
    CallDone,
    ConversationIdle,
    DirectDone,
    JournalMoved,
    PolicyRestarted,
    ReadProject,
    ReadResult,
    Request,
    RunnerRestarted,
    SetupConversation,
)
from runtime.agent.core import ConversationCore
from runtime.errors import RoostError
from runtime.llm.adapters import make_adapter
from runtime.option_table import RuntimeOptions

__all__ = ["ConversationActor"]


class _RunnerLost(msgspec.Struct, frozen=True, kw_only=True):
    """The input a :class:`RunnerRestarted` queues for the core: its calls in flight died."""

    reason: str
    """Why (``RunnerRestarted.lost``)."""


class ConversationActor(AgentShell):
    """Runs one conversation's agent loop."""

    kind = "conversation"
    parent_kind = "project"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.setup: SetupConversation | None = None
        self.settings = RuntimeOptions.of({})  # the set-up's options, typed, from _setup on
        self.handled = 0
        self.last_activity = time.monotonic()
        self.idle_armed = False

    def unhandled(self, message: Any, sender: Any) -> None:
        """Every message no row serves is an input for the core: queued, in order."""
        self.last_activity = time.monotonic()
        self.inputs.append((message, sender))
        self.pump()

    @handles(WakeupMessage)
    def _wakeup(self, message: WakeupMessage, sender: Any) -> None:
        """Its payload names what is due (:data:`_WAKEUPS`); none: the idle check."""
        _WAKEUPS.get(message.payload, ConversationActor._maybe_idle)(self)

    def _stop(self) -> None:
        self.send(self.myAddress, ActorExitRequest())

    @handles(Request, table="input")
    def _request(self, message: Request, sender: Any) -> None:
        core = self.core
        assert core is not None
        self.handled += 1
        try:
            self.effects.extend(core.request(message.call, message.reply_to))
        except RoostError as e:
            self.send(message.reply_to, error_reply(e))

    @handles(CallDecision, table="input")
    def _decided(self, message: CallDecision, sender: Any) -> None:
        assert self.core is not None
        self.awaiting.discard(("policy", message.call_id))
        self.effects.extend(self.core.policy_decided(message.call_id, message.events))

    @handles(CallDone, table="input")
    def _call_done(self, message: CallDone, sender: Any) -> None:
        assert self.core is not None
        self.awaiting.discard(("call", message.call_id))
        self.effects.extend(self.core.tool_finished(message.call_id, message.events))

    @handles(DirectDone, table="input")
    def _direct_done(self, message: DirectDone, sender: Any) -> None:
        assert self.core is not None
        done = self.core.direct_done(
            message.events, message.result, message.correlation_id, message.reply_to
        )
        self.effects.extend(done)

    @handles(_RunnerLost, table="input")
    def _runner_lost(self, message: _RunnerLost, sender: Any) -> None:
        assert self.core is not None
        self.effects.extend(self.core.runner_lost(message.reason))

    @handles(SetupConversation)
    def _setup(self, setup: SetupConversation, sender: Any) -> None:
        self.setup, self.parent = setup, sender
        self.settings = RuntimeOptions.of(setup.options)
        self.announce(sender, f"conversation:{setup.conversation_id}")
        self.journal, self.policy, self.runner = setup.journal, setup.policy, setup.runner
        self.appends.alert_options = setup.options
        self.fold_tools = frozenset(setup.fold_tools)
        self.adapter = make_adapter(setup.options)
        self.core = ConversationCore(
            project_id=setup.project_id,
            conversation_id=setup.conversation_id,
            options=setup.options,
            clock=utc_now,
            tools=setup.tools,
            provider=self.adapter.provider,
            model=self.adapter.model,
        )
        if setup.new and not setup.history:
            self.effects.extend(self.core.started(setup.correlation_id, setup.reply_to))
            self.pump()
        else:
            self.loading = True
            self._read()

    def _read(self) -> None:
        assert self.setup is not None
        project_id, conversation_id = self.setup.project_id, self.setup.conversation_id
        self.send(self.journal, ReadProject(project_id=project_id, conversation_id=conversation_id))

    @handles(ReadResult)
    def _loaded(self, result: ReadResult, sender: Any) -> None:
        assert self.core is not None and self.setup is not None
        self.loading = False
        setup = self.setup
        self.effects.extend(
            self.core.rehydrate(
                result.events,
                setup.waiters,
                recovering=setup.recovering,
                snapshot=result.snapshot,
            )
        )
        if setup.new:  # stopped before: it goes on from its events
            self.effects.extend(self.core.started(setup.correlation_id, setup.reply_to))
        self.pump()

    @handles(JournalMoved)
    def _journal_moved(self, update: JournalMoved, sender: Any) -> None:
        self.journal = update.journal
        self.appends.resend()
        if self.loading:  # the read died with the journal
            self._read()

    @handles(PolicyRestarted)
    def _policy_restarted(self, update: PolicyRestarted, sender: Any) -> None:
        self.policy = update.policy
        self.awaiting = {a for a in self.awaiting if a[0] != "policy"}  # asked again
        if self.core is not None:
            self.effects.extend(self.core.policy_restarted())
            self.pump()

    @handles(RunnerRestarted)
    def _runner_restarted(self, update: RunnerRestarted, sender: Any) -> None:
        """The calls in flight are lost: the core fails them, in turn with other inputs."""
        self.runner = update.runner
        if update.lost:
            self.awaiting = {a for a in self.awaiting if a[0] != "call"}  # never answered
            if self.core is not None:
                self.inputs.append((_RunnerLost(reason=update.lost), None))
                self.pump()

    def after_pump(self) -> None:
        """Arm the idle check (once per period)."""
        if self.setup is None or self.idle_armed:
            return
        self.idle_armed = True
        self.wakeupAfter(timedelta(milliseconds=self.settings.idle_passivation_ms))

    def _maybe_idle(self) -> None:
        self.idle_armed = False
        if self.core is None:
            return
        quiet = (time.monotonic() - self.last_activity) * 1000 >= self.settings.idle_passivation_ms
        queued = (
            self.waiting_append
            or self.waiting_model
            or self.loading
            or self.effects
            or self.inputs
            or self.staged
        )
        if quiet and not queued and not self.core.busy():
            idle = ConversationIdle(conversation_id=self.core.conversation_id, handled=self.handled)
            self.send(self.parent, idle)
        self.after_pump()

    def on_error(self, message: Any, sender: Any, error: Exception) -> None:
        """Answer the waiting client; a repeated failure restarts us (the storm counter)."""
        super().on_error(message, sender, error)
        self.waiting_append = False


_WAKEUPS: dict[Any, Callable[[ConversationActor], None]] = {
    STOP: ConversationActor._stop,  # a failed append's grace ran out: stop anyway
    FLUSH: AgentShell.flush_due,  # a stage waited long enough for an in-host answer
}
"""What a conversation's wakeup payload says is due (the idle check has none)."""
