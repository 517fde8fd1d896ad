"""The Project's decisions as plain code: messages in, effects out.

:class:`ProjectCore` holds one project's lifecycle state: which conversations exist (folded from
``conversation.started`` / ``conversation.stopped``), which run, the requests that wait for the
start or for a crashed conversation's restart, the clients that wait for a turn (with their
deadlines) and the restart intensity of its children. It routes each request (starting a passivated
conversation again on demand), passivates idle ones, and decides about each crash: restart after a
backoff, or escalate to the Supervisor. It returns :mod:`effects <runtime.lifecycle.effects>`;
``actors/project.py`` carries them out. Clocks, ids and the process check are injected, so the core
is unit-tested without an actor system (``tests/runtime/lifecycle``).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import msgspec

from events import catalog as ev
from events.envelope import Envelope, format_at, new_correlation_id, new_event
from runtime.errors import (
    BadRequestError,
    ConversationAlreadyStartedError,
    ConversationNotFoundError,
    RoostError,
    WireError,
)
from runtime.lifecycle.effects import (
    Answer,
    AppendThen,
    Child,
    Crash,
    Effect,
    EscalateChild,
    Log,
    PeerChanged,
    ReadHistory,
    RunDirectForProject,
    Send,
    Spawn,
    Stop,
    answer_after,
    error_reply,
)
from runtime.lifecycle.effects import Wakeup as WakeupEffect
from runtime.lifecycle.project_health import health, server_problems
from runtime.lifecycle.readme import Description
from runtime.lifecycle.supervision import (
    ChildNames,
    RestartPolicy,
    crash_events,
    process_exited,
    restarted_event,
)
from runtime.lifecycle.supervisor_core import utc_now
from runtime.lifecycle.turn_waiters import TurnWaiters
from runtime.option_table import RuntimeOptions
from runtime.wire.dispatch import op_handlers
from runtime.wire.op_args import (
    ConversationArgs,
    InjectFaultArgs,
    ListToolsArgs,
    ProjectArgs,
    ProtocolArgs,
    RunToolArgs,
    StartConversationArgs,
)
from runtime.wire.ops import Call

__all__ = [
    "POLICY",
    "TOOLRUNNER",
    "ProjectCore",
    "conversation_child",
    "process_exited",
]

POLICY = "policy"
TOOLRUNNER = "toolrunner"

_RESPAWN: dict[str, tuple[Effect, ...]] = {
    TOOLRUNNER: (
        Spawn(name=TOOLRUNNER),
        PeerChanged(peer=TOOLRUNNER, lost="the tool runner exited"),
    ),
    POLICY: (Spawn(name=POLICY), PeerChanged(peer=POLICY)),
}
"""A fixed child's restart: create it again and tell the others it moved."""


def conversation_child(conversation_id: str) -> str:
    """A conversation's child name: ``conversation:<id>``."""
    return f"conversation:{conversation_id}"


class ProjectCore:
    """One project: its children, its routing, its supervision."""

    def __init__(
        self,
        *,
        project_id: str,
        options: dict[str, Any],
        restore: bool,
        reply_to: Any = None,
        list_tools: Callable[[str | None], list[dict[str, Any]]] = lambda _source: [],
        describe: Callable[[], Description] = lambda: {"description": None, "source": None},
        is_dead: Callable[[int], bool] = process_exited,
        clock: Callable[[], Any] = utc_now,
        monotonic: Callable[[], float] = time.monotonic,
        new_id: Callable[[], str] = new_correlation_id,
        pid: int = 0,
        correlation_id: str | None = None,
    ) -> None:
        self.project_id = project_id
        self.options = options
        self.settings = RuntimeOptions.of(options)
        """The options, typed; their defaults are written once, in ``runtime.option_table``."""
        self.restore = restore
        self.reply_to = reply_to
        self.list_tools = list_tools
        self.describe = describe
        """``describe_project``: the README's first paragraph (``runtime.lifecycle.readme``)."""
        self.is_dead = is_dead
        self.clock = clock
        self.monotonic = monotonic
        self.new_id = new_id
        """Correlations of the events the runtime records on its own (crashes, restarts)."""
        self.correlation_id = correlation_id
        """The ``start_project`` request's correlation (a new project records its start under
        it; a restored one records none)."""
        self.restarts = RestartPolicy(
            self.settings.max_restarts, self.settings.restart_period_ms, clock=monotonic
        )
        self.fixed: dict[str, Any] = {TOOLRUNNER: None, POLICY: None}  # None until spawned
        self.known: set[str] = set()  # conversations started and not stopped
        self.stopped: set[str] = set()  # conversations stopped (and not started again)
        self.live: dict[str, Any] = {}  # conversation id -> address
        self.by_address = ChildNames()
        self.forwarded: dict[str, int] = {}
        self.stopping: set[str] = set()
        self.problems: list[dict[str, Any]] = []
        """Servers that did not start (``diagnostics`` health ``degraded``), see :meth:`start`."""
        self.refused: set[str] = set()
        """Conversations stopping as the journal refused an append (a full disk): no escalation."""
        self.ready = False
        self.reading = False
        self.exiting = False
        self.pids: dict[str, int] = {"project": pid}
        self.waiting: list[tuple[Call[Any], Any, Any]] = []  # until ready
        self.held: dict[str, list[tuple[Call[Any], Any, Any]]] = {}
        """Requests for a crashed conversation, until its restart."""
        self.waiters = TurnWaiters(monotonic)
        """The clients waiting for a turn, handed to a conversation's replacement."""

    # --- children ------------------------------------------------------------------------

    @property
    def policy(self) -> Any:
        """The Policy's address."""
        return self.fixed[POLICY]

    @property
    def runner(self) -> Any:
        """The ToolRunner's address."""
        return self.fixed[TOOLRUNNER]

    def address(self, name: str) -> Any:
        """The address of the child ``name``."""
        if name in self.fixed:
            return self.fixed[name]
        return self.live.get(name.split(":", 1)[1])

    def spawned(self, name: str, address: Any) -> None:
        """The shell created the child ``name`` at ``address``."""
        if name in self.fixed:
            self.fixed[name] = address
            return
        conversation_id = name.split(":", 1)[1]
        self.live[conversation_id] = address
        self.by_address.add(address, conversation_id)

    def _children(self) -> Iterator[tuple[str, Any]]:
        yield from self.fixed.items()
        yield from ((conversation_child(c), a) for c, a in self.live.items())

    def _fixed_name(self, address: Any) -> str | None:
        for name, live in self.fixed.items():
            if live is not None and address == live:
                return name
        return None

    def actor_started(self, role: str, pid: int) -> None:
        """A child announced its pid."""
        self.pids[role] = pid

    def live_pids(self) -> dict[str, int]:
        """The pids of this project's actors (conversations only while they run)."""
        live = {conversation_child(c) for c in self.live}
        return {
            role: pid
            for role, pid in sorted(self.pids.items())
            if not role.startswith("conversation:") or role in live
        }

    # --- start ---------------------------------------------------------------------------

    def start(self, root: str, asset_summary: dict[str, Any], sandbox_layers: Any) -> list[Effect]:
        """Start Policy and ToolRunner; record the start, or read the events to restore."""
        effects: list[Effect] = [Spawn(name=POLICY), Spawn(name=TOOLRUNNER)]
        self.problems = server_problems(asset_summary.get("errors") or [])
        if self.restore:
            return [*effects, ReadHistory()]
        correlation = self.correlation_id
        if not correlation:
            raise RoostError(
                f"project {self.project_id} was started without the correlation id the "
                "gateway mints for start_project",
                reason="missing_correlation_id",
            )
        started = self._event(
            ev.ProjectStarted(root=root, options=self.options, sandbox_layers=sandbox_layers),
            correlation,
        )
        loaded = self._event(
            ev.ProjectAssetsLoaded(
                generation=int(asset_summary.get("generation", 1)),
                counts=dict(asset_summary.get("counts", {})),
                errors=list(asset_summary.get("errors", [])),
            ),
            correlation,
            cause=started.event_id,
        )

        def done(error: WireError | None) -> list[Effect]:
            if error is not None:  # not recorded: the Supervisor forgets this project
                failed: list[Effect] = [EscalateChild(child="start", error=error)]
                waiting, self.waiting = self.waiting, []
                if self.reply_to is not None:
                    failed.append(Answer(to=self.reply_to, ok=False, error=error))
                return failed + [Answer(to=w[1], ok=False, error=error) for w in waiting]
            # A project started again under an id it had before keeps its conversations:
            # read them, then answer (``restored``).
            self.reading = True
            return [ReadHistory()]

        return [*effects, AppendThen(events=[started, loaded], then=done)]

    def restored(self, events: Iterable[Envelope]) -> list[Effect]:
        """Fold which conversations exist; answer the start; serve what waited."""
        for envelope in events:
            conversation_id = envelope.conversation_id
            if envelope.type == "conversation.started" and conversation_id:
                self.known.add(conversation_id)
                self.stopped.discard(conversation_id)
            elif envelope.type == "conversation.stopped" and conversation_id:
                self.known.discard(conversation_id)
                self.stopped.add(conversation_id)
        self.ready = True
        self.reading = False
        effects: list[Effect] = []
        if not self.restore and self.reply_to is not None:
            effects.append(Answer(to=self.reply_to, ok=True, result=self.project_id))
        return effects + self._drain()

    def journal_changed(self) -> list[Effect]:
        """The Journal restarted: tell the children; read again if a read was lost."""
        effects: list[Effect] = [PeerChanged(peer="journal")]
        if not self.ready and (self.restore or self.reading):
            effects.append(ReadHistory())
        return effects

    def _drain(self) -> list[Effect]:
        waiting, self.waiting = self.waiting, []
        effects: list[Effect] = []
        for request in waiting:
            effects += self._request(*request)
        return effects

    def _event(self, payload: ev.Event, correlation: str, cause: str | None = None) -> Any:
        return new_event(
            payload,
            project_id=self.project_id,
            at=format_at(self.clock()),
            correlation_id=correlation,
            causation_id=cause,
        )

    # --- routing -------------------------------------------------------------------------

    def request(self, call: Call[Any], reply_to: Any, message: Any) -> list[Effect]:
        """Serve or route a client request (held until the project is ready)."""
        if not self.ready:
            self.waiting.append((call, reply_to, message))
            return []
        return self._request(call, reply_to, message)

    def _request(self, call: Call[Any], reply_to: Any, message: Any) -> list[Effect]:
        try:
            handler = _OPS.get(call.op)
            if handler is None:
                raise BadRequestError(
                    f"operation {call.op!r} does not apply to a project", reason="unknown_op"
                )
            effects: list[Effect] = handler(self, call, reply_to, message)
            return effects
        except Exception as e:
            return [error_reply(reply_to, e)]

    # --- ops the Project serves (the conversation ops go on: ``_to_conversation``) -------

    def op_start_conversation(
        self, call: Call[StartConversationArgs], reply_to: Any, message: Any
    ) -> list[Effect]:
        """``start_conversation``: spawn it; it records its start and answers."""
        correlation = call.correlation()
        conversation_id = call.args.conversation_id or "c-" + secrets.token_hex(6)
        if conversation_id in self.known:
            raise ConversationAlreadyStartedError(
                f"conversation {conversation_id} already exists in this project",
                conversation_id=conversation_id,
            )
        history = conversation_id in self.stopped  # stopped before: it goes on from its events
        old = self.live.get(conversation_id) if history else None  # the stopped incarnation
        self.known.add(conversation_id)
        self.stopped.discard(conversation_id)
        spawn = self._spawn(conversation_id, new=True, reply_to=reply_to)
        done = {"correlation_id": correlation, "history": history}
        stop = [] if old is None else [Stop(to=old)]  # one incarnation at a time
        return [*stop, *(msgspec.structs.replace(s, **done) for s in spawn)]

    def _to_conversation(self, call: Call[Any], reply_to: Any, message: Any) -> list[Effect]:
        """A request for one conversation: on to it (started again when passivated)."""
        self.waiters.note(call, reply_to)
        return self._forward(str(call.args.conversation_id), (call, reply_to, message))[0]

    def op_stop_conversation(
        self, call: Call[ConversationArgs], reply_to: Any, message: Any
    ) -> list[Effect]:
        """``stop_conversation``: on to it; once it has it, the conversation is stopped."""
        conversation_id = call.args.conversation_id
        effects, forwarded = self._forward(conversation_id, (call, reply_to, message))
        if forwarded:
            self.known.discard(conversation_id)
            self.stopped.add(conversation_id)
            self.stopping.add(conversation_id)
        return effects

    def op_run_tool(self, call: Call[RunToolArgs], reply_to: Any, message: Any) -> list[Effect]:
        """``run_tool``: by the conversation it names, else by the ToolRunner directly."""
        conversation_id = call.args.request.meta.conversation_id
        if conversation_id:
            return self._forward(conversation_id, (call, reply_to, message))[0]
        return [RunDirectForProject(request=call.args.request, reply_to=reply_to)]

    def op_list_tools(self, call: Call[ListToolsArgs], reply_to: Any, message: Any) -> list[Effect]:
        """``list_tools``: the tools the options let through (for a source: its offer)."""
        return [Answer(to=reply_to, ok=True, result=self.list_tools(call.args.source))]

    def op_describe_project(
        self, call: Call[ProjectArgs], reply_to: Any, message: Any
    ) -> list[Effect]:
        """``describe_project``: the project's id, root and options."""
        result = {"project_id": self.project_id, **self.describe()}
        return [Answer(to=reply_to, ok=True, result=result)]

    def op_live_status(self, call: Call[ProjectArgs], reply_to: Any, message: Any) -> list[Effect]:
        """``live_status`` (the daemon's own): conversations, health and pids."""
        status = {
            "conversations": sorted(self.known),
            "active_conversations": sorted(self.live),
            "health": health(self.problems),
            "pids": self.live_pids(),
        }
        return [Answer(to=reply_to, ok=True, result=status)]

    def op_inject_fault(
        self, call: Call[InjectFaultArgs], reply_to: Any, message: Any
    ) -> list[Effect]:
        """``inject_fault``: crash a live hosted child, as a SIGKILL would a process.

        Refused unless the daemon was started with ``ROOST_FAULT_INJECTION=1``.
        """
        target = call.args.target
        address = dict(self._children()).get(target)
        if address is None or isinstance(address, Child):
            raise BadRequestError(
                f"no live child {target!r} in project {self.project_id}",
                reason="unknown_target",
                target=target,
            )
        return [Crash(to=address), Answer(to=reply_to, ok=True, result={"crashed": target})]

    def op_check_protocol(
        self, call: Call[ProtocolArgs], reply_to: Any, message: Any
    ) -> list[Effect]:
        """``check_protocol``: allowed when ``protocol_allowlist`` names the protocol.

        When it does not, ``security.protocol_denied`` is journaled (SPEC section 7) before
        the answer.
        """
        protocol = call.args.protocol
        allowed = protocol in self.settings.protocol_allowlist
        result = {"protocol": protocol, "allowed": allowed}
        if allowed:
            return [Answer(to=reply_to, ok=True, result=result)]
        denied = self._event(
            ev.SecurityProtocolDenied(protocol=protocol, operation=call.args.operation),
            call.correlation(),
        )
        return [AppendThen(events=[denied], then=answer_after(reply_to, result))]

    def _forward(
        self, conversation_id: str, request: tuple[Call[Any], Any, Any]
    ) -> tuple[list[Effect], bool]:
        """Pass ``request`` to the conversation (True), or hold it while it restarts."""
        effects: list[Effect] = []
        address = self.live.get(conversation_id)
        pid = self.pids.get(conversation_child(conversation_id))
        if address is not None and pid is not None and self.is_dead(pid):
            effects += self.child_exited(address)  # killed, and Thespian has not told us yet
        if conversation_id in self.held:
            self.held[conversation_id].append(request)
            return effects, False
        self._check_exists(conversation_id)
        if conversation_id not in self.live:
            effects += self._spawn(conversation_id, new=False)
        self.forwarded[conversation_id] = self.forwarded.get(conversation_id, 0) + 1
        effects.append(Send(to=Child(conversation_child(conversation_id)), message=request[2]))
        return effects, True

    def _check_exists(self, conversation_id: str) -> None:
        if conversation_id in self.stopped:
            raise ConversationNotFoundError(
                f"conversation {conversation_id} of project {self.project_id} is stopped; "
                "start it again with "
                f"`roost conversation start {self.project_id} --id {conversation_id}`",
                project_id=self.project_id,
                conversation_id=conversation_id,
                reason="stopped",
            )
        if conversation_id not in self.known:
            raise ConversationNotFoundError(
                f"no conversation {conversation_id} in project {self.project_id}; start it with "
                f"`roost conversation start {self.project_id} --id {conversation_id}`",
                project_id=self.project_id,
                conversation_id=conversation_id,
            )

    def _spawn(
        self, conversation_id: str, *, new: bool, reply_to: Any = None, recovering: bool = False
    ) -> list[Effect]:
        # The address exists once the shell ran the Spawn; until then, its name.
        self.live[conversation_id] = Child(conversation_child(conversation_id))
        self.pids.pop(conversation_child(conversation_id), None)  # until the new one announces
        self.forwarded[conversation_id] = 0
        waiters = self.waiters.of(conversation_id) if recovering else []
        spawn = Spawn(
            name=conversation_child(conversation_id),
            new=new,
            recovering=recovering,
            reply_to=reply_to,
            waiters=waiters,
        )
        return [spawn]

    def send_refused(self, send: Send) -> list[Effect]:
        """The shell could not deliver ``send`` (the child's mailbox is full).

        Its client already got ``overloaded``. A refused forward never reached the conversation,
        so it is not counted against its idle offer (which compares what was forwarded with
        what it handled): it would keep a quiet conversation from passivating until the next
        forward. A refused ``stop_conversation`` did not stop the conversation.
        """
        name = send.to.name if isinstance(send.to, Child) else ""
        if not name.startswith("conversation:"):
            return []
        conversation_id = name.split(":", 1)[1]
        if self.forwarded.get(conversation_id, 0) > 0:
            self.forwarded[conversation_id] -= 1
        if getattr(send.message, "op", None) == "stop_conversation":
            self.known.add(conversation_id)
            self.stopped.discard(conversation_id)
            self.stopping.discard(conversation_id)
        return []

    def idle(self, conversation_id: str, handled: int, sender: Any) -> list[Effect]:
        """A conversation (``sender``) offers to stop: stop it unless requests reached it since."""
        address = self.live.get(conversation_id)
        if address is not None and address != sender:
            return [Stop(to=sender)]  # an incarnation no longer live (stopped, started again)
        if address is None or self.forwarded.get(conversation_id, 0) != handled:
            return []
        self.stopping.add(conversation_id)
        del self.live[conversation_id]
        return [Stop(to=address)]

    def failed(
        self, conversation_id: str, *, unrecorded: bool = False, code: str = ""
    ) -> list[Effect]:
        """Stop a conversation whose append failed; hold its requests until it restarts.

        The stop goes behind everything already forwarded to it, which it answers with the
        append's error; its exit is then a crash like any other (restart, events). One
        whose ``conversation.started`` was not recorded (``unrecorded``) is forgotten: a
        later request for it is ``conversation_not_found``, as the journal says. When the
        journal refused the append (``code`` ``journal_error``, e.g. a full disk), the exit
        is not the conversation's fault: it restarts at once, counting toward no escalation.
        """
        address = self.live.get(conversation_id)
        if address is None:
            return []
        if unrecorded:
            del self.live[conversation_id]
            self.known.discard(conversation_id)
            self.stopping.add(conversation_id)
            return [Stop(to=address)]
        self.stopping.discard(conversation_id)
        self.held.setdefault(conversation_id, [])
        if code == "journal_error":
            self.refused.add(conversation_id)
        return [Stop(to=address)]

    def child_name(self, address: Any) -> str | None:
        """``toolrunner``, ``policy`` or ``conversation:ID`` for a live child's address."""
        for name, live in self._children():
            if live is not None and address == live:
                return name
        return None

    # --- supervision ---------------------------------------------------------------------

    def exit(self) -> None:
        """Stopping (project stop or shutdown): restart nothing from now on."""
        self.exiting = True

    def child_exited(self, address: Any) -> list[Effect]:
        """A child's process is gone: restart it after a backoff, or escalate."""
        if self.exiting:
            return []
        child = self._fixed_name(address)
        if child is None:
            conversation_id = self.by_address.pop(address)
            if conversation_id is None:
                return []
            if conversation_id in self.stopping:
                self.stopping.discard(conversation_id)
                return []  # passivated or stopped on purpose
            if self.live.get(conversation_id) != address:
                return []
            del self.live[conversation_id]
            child = conversation_child(conversation_id)
            if conversation_id in self.refused:  # restarted, never escalated for it
                self.refused.discard(conversation_id)
                return self._restart_after_refusal(child)
        decision = self.restarts.on_crash(child)
        correlation = self.new_id()
        escalation = (
            None
            if decision.restart
            else f"more than {self.restarts.max_restarts} restarts within "
            f"{int(self.restarts.period_s * 1000)} ms"
        )
        events = crash_events(
            project_id=self.project_id,
            actor=child,
            reason="process exited",
            restart_count=decision.restart_count,
            at=format_at(self.clock()),
            correlation_id=correlation,
            escalation=escalation,
        )
        if not decision.restart:
            fields = {"child": child, "restart_count": decision.restart_count}
            return [
                AppendThen(events=events),
                Log(level="error", event="actor_escalated", fields=fields),
                EscalateChild(child=child),
            ]
        if child.startswith("conversation:"):
            self.held.setdefault(child.split(":", 1)[1], [])
        payload = {
            "child": child,
            "restart_count": decision.restart_count,
            "cause": events[0].event_id,
            "correlation": correlation,
        }
        return [AppendThen(events=events), WakeupEffect(delay_s=decision.delay_s, payload=payload)]

    def _restart_after_refusal(self, child: str) -> list[Effect]:
        """Restart a conversation the journal refused an append of, at once.

        Its requests were answered with the journal's error; the restart reads its state back.
        As a crash, a few requests on a full disk would escalate and restart the whole project.
        """
        payload = {
            "child": child,
            "restart_count": 0,
            "cause": None,
            "correlation": self.new_id(),
            "reason": "restarted from its events after the journal refused an append",
        }
        return self.wakeup(payload)

    def wakeup(self, payload: Any) -> list[Effect]:
        """A restart's backoff is over: restart the child; serve what was held for it."""
        if not isinstance(payload, dict) or self.exiting:
            return []
        child = payload["child"]
        effects: list[Effect] = []
        held: list[Effect] = []  # served once the restart's own event is committed, before them
        if child in _RESPAWN:
            effects += _RESPAWN[child]
        else:
            conversation_id = child.split(":", 1)[1]
            if conversation_id in self.known and conversation_id not in self.live:
                effects += self._spawn(conversation_id, new=False, recovering=True)
            for request in self.held.pop(conversation_id, []):
                held += self._request(*request)
        restarted = restarted_event(
            project_id=self.project_id,
            actor=child,
            reason=payload.get("reason", "restarted from its events"),
            restart_count=payload["restart_count"],
            at=format_at(self.clock()),
            correlation_id=payload["correlation"],
            cause=payload["cause"],
        )
        fields = {"child": child, "restart_count": payload["restart_count"]}
        log = Log(level="info", event="actor_restarted", fields=fields)
        return [*effects, AppendThen(events=[restarted], then=lambda _error: held), log]


_OPS = op_handlers(ProjectCore, "project", forward=ProjectCore._to_conversation)
"""Each op that reaches a Project, and its method (``_to_conversation``: on to it)."""
