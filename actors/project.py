"""The Project actor: owns a project's Policy, ToolRunner and Conversations.

It records the project's start, routes requests to conversations (starting a passivated
one again from the journal on demand), stops idle ones, and supervises its children:
a child that dies is restarted with backoff and rebuilt from its events; more than
``max_restarts`` within ``restart_period_ms`` escalates to the Supervisor. Every crash,
restart and escalation is an event.
"""

from __future__ import annotations

import os
import secrets
import time
from datetime import timedelta
from typing import Any

from thespian.actors import ActorExitRequest, ChildActorExited, WakeupMessage

from actors.base import RoostActor, error_reply, utc_now
from actors.conversation import ConversationActor
from actors.messages import (
    ActorStarted,
    ConversationFailed,
    ConversationIdle,
    Escalate,
    PeerUpdate,
    ReadProject,
    ReadResult,
    Reply,
    Request,
    RunDirect,
    SetupConversation,
    SetupPolicy,
    SetupProject,
    SetupRunner,
)
from actors.policy import PolicyActor
from actors.toolrunner import ToolRunnerActor
from events import catalog as ev
from events.envelope import format_at, new_correlation_id, new_event
from runtime.errors import (
    BadRequestError,
    ConversationAlreadyStartedError,
    ConversationNotFoundError,
)
from runtime.lifecycle.supervision import ChildNames, RestartPolicy
from runtime.wire.ops import waits_for_turn

__all__ = ["ProjectActor"]

_CONVERSATION_OPS = frozenset(
    {
        "send_event",
        "cancel",
        "resume",
        "approve",
        "reject",
        "get_projection",
        "stop_conversation",
    }
)


class ProjectActor(RoostActor):
    """One project: its children, its routing, its supervision."""

    kind = "project"
    parent_kind = "supervisor"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.setup: SetupProject | None = None
        self.policy: Any = None
        self.runner: Any = None
        self.known: set[str] = set()  # conversations started and not stopped
        self.stopped: set[str] = set()  # conversations stopped (and not started again)
        self.live: dict[str, Any] = {}  # conversation id -> address
        self.by_address = ChildNames()
        self.forwarded: dict[str, int] = {}
        self.stopping: set[str] = set()
        self.tools: list[dict[str, Any]] = []
        self.registry: Any = None  # the project's ToolRegistry, built once in _setup
        self.restarts: RestartPolicy | None = None
        self.ready = False
        self.reading = False
        self.supervisor: Any = None
        self.exiting = False
        self.pids: dict[str, int] = {"project": os.getpid()}
        self.waiting: list[tuple[Any, Any]] = []
        self.held: dict[str, list[Request]] = {}  # crashed conversation -> requests for it
        # conversation -> correlation -> (client waiting for that turn, wait deadline)
        self.waiters: dict[str, dict[str, tuple[Any, float]]] = {}

    def handle(self, message: Any, sender: Any) -> None:
        """Set up, route, supervise."""
        if isinstance(message, SetupProject):
            self.supervisor = sender
            self._setup(message)
        elif isinstance(message, ReadResult):
            self._restored(message)
        elif isinstance(message, Request):
            if not self.ready:
                self.waiting.append((message, sender))
                return
            self._request(message)
        elif isinstance(message, ActorStarted):
            self.pids[message.role] = message.pid
        elif isinstance(message, ConversationIdle):
            self._idle(message)
        elif isinstance(message, ConversationFailed):
            self._failed(message.conversation_id)
        elif isinstance(message, ChildActorExited):
            self._child_exited(message.childAddress)
        elif isinstance(message, WakeupMessage):
            self._restart(message.payload)
        elif isinstance(message, PeerUpdate) and message.journal is not None:
            self.journal = message.journal
            self.resend_appends()
            if not self.ready and self.setup is not None and (self.setup.restore or self.reading):
                self.send(self.journal, ReadProject(project_id=self.setup.project_id))
            for address in (self.runner, *self.live.values()):
                self.send(address, message)

    # --- start -------------------------------------------------------------------------

    def _setup(self, setup: SetupProject) -> None:
        from runtime.guard.sandbox import probe_layers  # noqa: PLC0415
        from runtime.tools.registry import ToolRegistry  # noqa: PLC0415

        self.setup = setup
        self.journal = setup.journal
        self.alert_options = setup.options
        self.restarts = RestartPolicy(
            int(setup.options.get("max_restarts", 3)),
            int(setup.options.get("restart_period_ms", 5000)),
        )
        registry = self.registry = ToolRegistry.for_project(setup.root, setup.options)
        self.tools = registry.model_tools(setup.options)
        self._start_policy()
        self._start_runner()
        if setup.restore:
            self.send(self.journal, ReadProject(project_id=setup.project_id))
            return
        correlation = new_correlation_id()
        summary = registry.asset_summary()
        started = self._event(
            ev.ProjectStarted(
                root=setup.root, options=setup.options, sandbox_layers=probe_layers()
            ),
            correlation,
        )
        loaded = self._event(
            ev.ProjectAssetsLoaded(
                generation=int(summary.get("generation", 1)),
                counts=dict(summary.get("counts", {})),
                errors=list(summary.get("errors", [])),
            ),
            correlation,
            cause=started.event_id,
        )

        def done(answer: Any) -> None:
            if not hasattr(answer, "envelopes"):
                self.ready = True
                if setup.reply_to is not None:
                    self.send(setup.reply_to, Reply(ok=False, error=answer.error))
                self._drain()
                return
            # A project started again under an id it had before keeps its conversations:
            # read them, then answer (``_restored``).
            self.reading = True
            self.send(self.journal, ReadProject(project_id=setup.project_id))

        self.append([started, loaded], then=done)

    def _restored(self, result: ReadResult) -> None:
        for envelope in result.events:
            if envelope.type == "conversation.started" and envelope.conversation_id:
                self.known.add(envelope.conversation_id)
                self.stopped.discard(envelope.conversation_id)
            elif envelope.type == "conversation.stopped" and envelope.conversation_id:
                self.known.discard(envelope.conversation_id)
                self.stopped.add(envelope.conversation_id)
        self.ready = True
        self.reading = False
        assert self.setup is not None
        if not self.setup.restore and self.setup.reply_to is not None:
            self.send(self.setup.reply_to, Reply(ok=True, result=self.setup.project_id))
        self._drain()

    def _drain(self) -> None:
        waiting, self.waiting = self.waiting, []
        for message, _sender in waiting:
            self._request(message)

    def _start_policy(self) -> None:
        assert self.setup is not None
        self.policy = self.createActor(PolicyActor)
        self.send(
            self.policy,
            SetupPolicy(
                project_id=self.setup.project_id,
                root=self.setup.root,
                options=self.setup.options,
                registry=self.registry,
            ),
        )

    def _start_runner(self) -> None:
        assert self.setup is not None
        self.runner = self.createActor(ToolRunnerActor)
        self.send(
            self.runner,
            SetupRunner(
                project_id=self.setup.project_id,
                root=self.setup.root,
                options=self.setup.options,
                registry=self.registry,
                journal=self.journal,
            ),
        )

    def _event(self, payload: ev.Event, correlation: str, cause: str | None = None) -> Any:
        assert self.setup is not None
        return new_event(
            payload,
            project_id=self.setup.project_id,
            at=format_at(utc_now()),
            correlation_id=correlation,
            causation_id=cause,
        )

    # --- routing -----------------------------------------------------------------------

    def _request(self, request: Request) -> None:
        op, args = request.op, request.args
        try:
            if op == "start_conversation":
                self._start_conversation(request)
            elif op in _CONVERSATION_OPS:
                self._note_waiter(request)
                forwarded = self._forward(str(args["conversation_id"]), request)
                if op == "stop_conversation" and forwarded:
                    self.known.discard(args["conversation_id"])
                    self.stopped.add(args["conversation_id"])
                    self.stopping.add(args["conversation_id"])
            elif op == "run_tool":
                meta = (args.get("request") or {}).get("meta") or {}
                conversation_id = meta.get("conversation_id")
                if conversation_id:
                    self._forward(str(conversation_id), request)
                else:
                    self.send(
                        self.runner, RunDirect(request=args["request"], reply_to=request.reply_to)
                    )
            elif op == "list_tools":
                self.send(request.reply_to, Reply(ok=True, result=self._list_tools()))
            elif op == "live_status":
                self.send(
                    request.reply_to,
                    Reply(
                        ok=True,
                        result={
                            "conversations": sorted(self.known),
                            "active_conversations": sorted(self.live),
                            "health": {"status": "ok"},
                            "pids": self._live_pids(),
                        },
                    ),
                )
            else:
                raise BadRequestError(
                    f"operation {op!r} does not apply to a project", reason="unknown_op"
                )
        except Exception as e:
            self.send(request.reply_to, error_reply(e))

    def _live_pids(self) -> dict[str, int]:
        live = {f"conversation:{c}" for c in self.live}
        return {
            role: pid
            for role, pid in sorted(self.pids.items())
            if not role.startswith("conversation:") or role in live
        }

    def _list_tools(self) -> list[dict[str, Any]]:
        assert self.setup is not None
        return list(self.registry.list_tools(self.setup.options))

    def _start_conversation(self, request: Request) -> None:
        conversation_id = request.args.get("conversation_id") or "c-" + secrets.token_hex(6)
        if conversation_id in self.known:
            raise ConversationAlreadyStartedError(
                f"conversation {conversation_id} already exists in this project",
                conversation_id=conversation_id,
            )
        self.known.add(conversation_id)
        self.stopped.discard(conversation_id)
        self._spawn(conversation_id, new=True, reply_to=request.reply_to)

    def _note_waiter(self, request: Request) -> None:
        """Remember a client that waits for a turn, until its wait would have timed out.

        If the conversation dies, its replacement gets these waiters and answers them when
        it has finished the turn (the daemon ignores an answer whose request is over).
        """
        args = request.args
        if not waits_for_turn(request.op, args):
            return
        correlation = args["event"]["correlation_id"]  # the daemon gave it one
        now = time.monotonic()
        waits = self.waiters.setdefault(str(args["conversation_id"]), {})
        for key in [k for k, (_, until) in waits.items() if until < now]:
            del waits[key]
        waits[correlation] = (request.reply_to, now + float(args["wait_timeout_s"]))

    def _waiters_of(self, conversation_id: str) -> list[tuple[str, Any]]:
        now = time.monotonic()
        waits = self.waiters.get(conversation_id, {})
        return [(corr, to) for corr, (to, until) in sorted(waits.items()) if until >= now]

    def _forward(self, conversation_id: str, request: Request) -> bool:
        """Send ``request`` to the conversation (True), or hold it while it restarts."""
        address = self.live.get(conversation_id)
        if address is not None and self._dead(conversation_id):
            self._child_exited(address)  # killed, and Thespian has not told us yet
        if conversation_id in self.held:
            self.held[conversation_id].append(request)
            return False
        address = self._conversation(conversation_id)
        if self.send(address, request):  # a refused one is never handled: no idle mismatch
            self.forwarded[conversation_id] = self.forwarded.get(conversation_id, 0) + 1
        return True

    def _dead(self, conversation_id: str) -> bool:
        """Whether the conversation's process has exited (checked without reaping it)."""
        pid = self.pids.get(f"conversation:{conversation_id}")
        if pid is None:
            return False
        try:
            return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
        except ChildProcessError:
            return True

    def _conversation(self, conversation_id: str) -> Any:
        if conversation_id in self.stopped:
            assert self.setup is not None
            raise ConversationNotFoundError(
                f"conversation {conversation_id} is stopped; start it again with "
                f"`roost conversation start {self.setup.project_id} --id {conversation_id}`",
                conversation_id=conversation_id,
                reason="stopped",
            )
        if conversation_id not in self.known:
            raise ConversationNotFoundError(
                f"no conversation {conversation_id} in this project; start it first",
                conversation_id=conversation_id,
            )
        address = self.live.get(conversation_id)
        if address is None:
            address = self._spawn(conversation_id, new=False)
        return address

    def _spawn(
        self, conversation_id: str, *, new: bool, reply_to: Any = None, recovering: bool = False
    ) -> Any:
        assert self.setup is not None
        address = self.createActor(ConversationActor)
        self.live[conversation_id] = address
        self.by_address.add(address, conversation_id)
        self.pids.pop(f"conversation:{conversation_id}", None)  # until the new one announces
        self.forwarded[conversation_id] = 0
        self.send(
            address,
            SetupConversation(
                project_id=self.setup.project_id,
                conversation_id=conversation_id,
                root=self.setup.root,
                options=self.setup.options,
                journal=self.journal,
                policy=self.policy,
                runner=self.runner,
                tools=self.tools,
                new=new,
                recovering=recovering,
                reply_to=reply_to,
                waiters=self._waiters_of(conversation_id) if recovering else [],
            ),
        )
        return address

    def _idle(self, idle: ConversationIdle) -> None:
        conversation_id = idle.conversation_id
        address = self.live.get(conversation_id)
        if address is None or self.forwarded.get(conversation_id, 0) != idle.handled:
            return
        self.stopping.add(conversation_id)
        del self.live[conversation_id]
        self.send(address, ActorExitRequest())

    def _failed(self, conversation_id: str) -> None:
        """Stop a conversation whose append failed; hold its requests until it restarts.

        The stop goes behind everything already forwarded to it, which it answers with the
        append's error; its exit is then a crash like any other (restart, events).
        """
        address = self.live.get(conversation_id)
        if address is None:
            return
        self.stopping.discard(conversation_id)
        self.held.setdefault(conversation_id, [])
        self.send(address, ActorExitRequest())

    def child_name(self, address: Any) -> str | None:
        """``toolrunner``, ``policy`` or ``conversation:ID`` for a live child's address."""
        if self.runner is not None and address == self.runner:
            return "toolrunner"
        if self.policy is not None and address == self.policy:
            return "policy"
        for conversation_id, live in self.live.items():
            if address == live:
                return f"conversation:{conversation_id}"
        return None

    # --- supervision -------------------------------------------------------------------

    def on_exit(self) -> None:
        """Stopping (project stop or shutdown): restart nothing from now on."""
        self.exiting = True

    def _child_exited(self, address: Any) -> None:
        assert self.setup is not None and self.restarts is not None
        if self.exiting:
            return
        if address == self.runner:
            child = "toolrunner"
        elif address == self.policy:
            child = "policy"
        elif (conversation_id := self.by_address.pop(address)) is not None:
            if conversation_id in self.stopping:
                self.stopping.discard(conversation_id)
                return  # passivated or stopped on purpose
            if self.live.get(conversation_id) != address:
                return
            del self.live[conversation_id]
            child = f"conversation:{conversation_id}"
        else:
            return
        decision = self.restarts.on_crash(child)
        correlation = new_correlation_id()
        crashed = self._event(
            ev.ActorCrashed(
                actor=child, reason="process exited", restart_count=decision.restart_count
            ),
            correlation,
        )
        if not decision.restart:
            escalated = self._event(
                ev.ActorEscalated(
                    actor=child,
                    reason=f"more than {self.restarts.max_restarts} restarts within "
                    f"{int(self.restarts.period_s * 1000)} ms",
                    restart_count=decision.restart_count,
                ),
                correlation,
                cause=crashed.event_id,
            )
            self.append([crashed, escalated])
            self.log.error("actor_escalated", child=child, restart_count=decision.restart_count)
            self.send(self.supervisor, Escalate(project_id=self.setup.project_id, child=child))
            return
        self.append([crashed])
        if child.startswith("conversation:"):
            self.held.setdefault(child.split(":", 1)[1], [])
        self.wakeupAfter(
            timedelta(seconds=decision.delay_s),
            payload={
                "child": child,
                "restart_count": decision.restart_count,
                "cause": crashed.event_id,
                "correlation": correlation,
            },
        )

    def _restart(self, payload: Any) -> None:
        if not isinstance(payload, dict) or self.exiting:
            return
        child = payload["child"]
        if child == "toolrunner":
            self._start_runner()
            update = PeerUpdate(runner=self.runner, runner_lost="the tool runner exited")
            for address in self.live.values():
                self.send(address, update)
        elif child == "policy":
            self._start_policy()
            for address in self.live.values():
                self.send(address, PeerUpdate(policy=self.policy))
        else:
            conversation_id = child.split(":", 1)[1]
            if conversation_id in self.known and conversation_id not in self.live:
                self._spawn(conversation_id, new=False, recovering=True)
            for request in self.held.pop(conversation_id, []):
                self._request(request)
        restarted = self._event(
            ev.ActorRestarted(
                actor=child,
                reason="restarted from its events",
                restart_count=payload["restart_count"],
            ),
            payload["correlation"],
            cause=payload["cause"],
        )
        self.append([restarted])
        self.log.info("actor_restarted", child=child, restart_count=payload["restart_count"])
