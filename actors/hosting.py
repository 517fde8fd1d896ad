"""Entities hosted in a host actor: many actors, one process, one mailbox each.

Thespian's queue transport makes every actor a process and relays every message between
two actors that are not parent and child (unpickled and pickled again by each relay).
That is what it is good at for the control plane — creating, supervising and restarting
processes — and too dear for the data plane: a conversation's turn used to cross the
process tree sixteen times. So a project's Conversations, its Policy and its ToolRunner
are **entities** hosted inside the Project's process (:class:`EntityHost`), as Orleans
grains and Akka Cluster Sharding entities are:

- An entity is an instance of the same actor class (``ConversationActor``,
  ``PolicyActor``, ``ToolRunnerActor``), given a :class:`_Port` in place of Thespian's
  actor manager: its ``send``, ``wakeupAfter`` and ``myAddress`` go through the host. Its
  address is a Thespian ``ActorAddress`` whose details name the host, the entity and its
  incarnation, so the cores (``ProjectCore``) keep handling children by address.
- Each entity has its own mailbox and handles one message at a time; the host runs the
  entities that have mail round-robin, one message each, until none has. A message
  between two entities of a host is a Python object handed over in memory: no pickle, no
  pipe, no relay.
- An entity exits as an actor does (an ``ActorExitRequest``: a passivation, a stop, an
  exception storm); the host tells its owner (:meth:`HostOwner.entity_exited`), which
  treats it as a child's exit: the Project restarts a crashed conversation from its events
  and leaves its neighbours alone. The host process itself is a Thespian actor: when it
  dies (SIGKILL, OOM) the Supervisor restarts it, and its entities come back by replay on
  their next message.
- Threads of the host (tool runs, model calls, the journal appender) hand their results back
  with :meth:`EntityHost.post`, which wakes the host's loop with one small message to its own
  mailbox: no polling. Journal appends of every entity go through one :class:`Appender`
  thread per host, pipelined over one journal link: a host's conversations share the
  Journal's group commit.
- A Thespian message an entity sends outside the host (an append or a read to the Journal)
  carries the host's address as its sender; the host gives it a token of its own and routes
  the answer back to the entity (:meth:`EntityHost.outbound`, :meth:`EntityHost.route_answer`).
- What exited entities leave (their objects point at each other) is collected when it is
  worth a full pass (``actors.host_collector``).
"""

from __future__ import annotations

import itertools
import os
import queue
import threading
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import msgspec
from thespian.actors import ActorAddress, ActorExitRequest, WakeupMessage

from actors.host_appender import Appender
from actors.host_collector import ExitCollector
from actors.host_owner import HostOwner
from actors.messages import Appended, AppendFailed, AppendRequest, Message, ReadProject, ReadResult
from events.envelope import NewEvent
from runtime.journal.link_client import LinkBatch
from runtime.logging import get_logger

__all__ = [
    "Deferred",
    "EntityHost",
    "EntityWakeup",
    "HostOwner",
    "HostWake",
    "is_entity",
]

log = get_logger("roost.host")

_ENTITY = "roost-entity"
"""The first item of an entity address's details."""
_HOST_TOKENS = 1 << 40
"""Tokens the host gives its entities' outbound requests start here (the owner's own
appends and reads use small tokens of their own)."""


class HostWake(Message, frozen=True, kw_only=True):
    """A thread of the host left work for its entities (sent by the host to itself)."""


class EntityWakeup(msgspec.Struct, frozen=True, kw_only=True):
    """The payload of a host wakeup that belongs to an entity."""

    address: Any
    """The entity's address."""
    payload: Any = None
    """The entity's own payload."""


class Deferred:
    """A call an entity runs in its own turn (a thread's answer, handed over in memory)."""

    __slots__ = ("args", "fn")

    def __init__(self, fn: Callable[..., None], *args: Any) -> None:
        self.fn = fn
        self.args = args

    def run(self) -> None:
        """Make the call."""
        self.fn(*self.args)


def is_entity(address: Any) -> bool:
    """Whether ``address`` is an entity's (hosted) rather than a process's."""
    details = getattr(address, "addressDetails", None)
    return isinstance(details, tuple) and len(details) == 4 and details[0] == _ENTITY


class _Port:
    """What a hosted entity's Thespian base calls instead of an actor manager."""

    def __init__(self, host: EntityHost, address: ActorAddress) -> None:
        self.host = host
        self.address = address
        self.globalName = None

    def actor_send(self, target: Any, message: Any) -> None:
        """``Actor.send``: through the host."""
        self.host.send(self.address, target, message)

    def wakeupAfter(self, period: Any, payload: Any = None) -> None:
        """``Actor.wakeupAfter``: the timer of the host, delivered back to this entity."""
        self.host.owner.wakeupAfter(period, EntityWakeup(address=self.address, payload=payload))

    def createActor(self, *_args: Any, **_kwargs: Any) -> Any:
        """Refused: the children of an entity would be processes of their own."""
        raise RuntimeError("a hosted entity does not create actors")

    def post(self, message: Any) -> None:
        """From any thread: deliver ``message`` to this entity in the host's loop."""
        self.host.post(self.address, message)

    def call_model(self, adapter: Any, request: Any, done: Callable[[Any], None]) -> None:
        """Start a model call on the host's ``ModelCaller``; ``done(outcome)`` on its thread."""
        self.host.model_caller().submit(adapter, request, done)

    def append(
        self, events: list[NewEvent], key: str, then: Callable[[Any], None], *, redacted: bool
    ) -> bool:
        """Queue an append for the host's appender; ``then(answer)`` runs in our turn.

        ``redacted``: each event was redacted as the journal would (a staged turn).
        """
        batch = (events, key, redacted)
        return self.host.append(self.address, [batch], lambda answers: then(answers[0]))


class _Entity:
    __slots__ = ("actor", "address", "key", "mailbox", "scheduled")

    def __init__(self, actor: Any, address: ActorAddress) -> None:
        self.actor = actor
        self.address = address
        self.key = address.addressDetails
        self.mailbox: deque[tuple[Any, Any]] = deque()
        self.scheduled = False


class EntityHost:
    """The entities of one host actor, their mailboxes and the loop that runs them."""

    def __init__(self, owner: HostOwner, appender: Appender | None = None) -> None:
        """``appender``: the host's (``actors.host_appender``); None without a journal link."""
        self.owner = owner
        self.entities: dict[Any, _Entity] = {}
        self.runnable: deque[_Entity] = deque()
        self.parent_mail: deque[tuple[Any, Any]] = deque()
        self.posted: queue.SimpleQueue[tuple[Any, Any]] = queue.SimpleQueue()
        self._wake_lock = threading.Lock()
        self._wake_pending = False
        self._incarnations = itertools.count(1)
        self._tokens = itertools.count(_HOST_TOKENS)
        self._answers: dict[int, tuple[Any, int]] = {}
        self._running = False
        self.appender = appender
        self.host_id = f"{os.getpid()}-{id(self):x}"
        self._model_caller: Any = None
        self.collector = ExitCollector()
        """The full collection after exits (``actors.host_collector``)."""

    # --- entities ------------------------------------------------------------------------

    def create(self, actor_class: type, name: str) -> ActorAddress:
        """A new entity of ``actor_class`` named ``name``; its address."""
        address = ActorAddress((_ENTITY, self.host_id, name, next(self._incarnations)))
        actor: Any = object.__new__(actor_class)
        actor.hosted = True
        actor.__init__()
        actor._myRef = _Port(self, address)
        self.entities[address.addressDetails] = _Entity(actor, address)
        return address

    def owns(self, address: Any) -> bool:
        """Whether ``address`` is one of this host's entities (alive or not)."""
        return is_entity(address) and address.addressDetails[1] == self.host_id

    def live(self, address: Any) -> bool:
        """Whether ``address`` is a live entity of this host."""
        return self.owns(address) and address.addressDetails in self.entities

    def count(self) -> int:
        """Live entities."""
        return len(self.entities)

    def deliver(self, target: Any, message: Any, sender: Any) -> bool:
        """Put ``message`` in ``target``'s mailbox (False: no such entity, dropped)."""
        entity = self.entities.get(target.addressDetails)
        if entity is None:
            log.debug("entity_dead_letter", target=str(target), message=type(message).__name__)
            return False
        entity.mailbox.append((message, sender))
        if not entity.scheduled:
            entity.scheduled = True
            self.runnable.append(entity)
        return True

    def send(self, source: ActorAddress, target: Any, message: Any) -> bool:
        """An entity's send: in memory inside the host, else through the owner's Thespian."""
        if self.owns(target):
            return self.deliver(target, message, source)
        if target == self.owner.myAddress:
            self.parent_mail.append((message, source))
            return True
        return self.owner.send(target, self.outbound(source, message))

    # --- answers from outside ------------------------------------------------------------

    def outbound(self, source: ActorAddress, message: Any) -> Any:
        """``message`` as the host sends it for ``source``: its token becomes the host's."""
        if (
            isinstance(message, AppendRequest | ReadProject)
            and getattr(message, "reply_to", None) is None
        ):
            token = next(self._tokens)
            self._answers[token] = (source, message.token)
            return msgspec.structs.replace(message, token=token)
        return message

    def take(self, message: Any) -> bool:
        """Take a message that is the host's, not its owner's (False: the owner's)."""
        return _TAKERS.get(type(message), _owners)(self, message)

    def route_answer(self, message: Appended | AppendFailed | ReadResult) -> bool:
        """Hand an answer to an entity's outbound request to that entity (False: not one)."""
        routed = self._answers.pop(message.token, None)
        if routed is None:
            return False
        source, token = routed
        self.deliver(source, msgspec.structs.replace(message, token=token), self.owner.myAddress)
        return True

    # --- threads -------------------------------------------------------------------------

    def post(self, target: Any, message: Any) -> None:
        """From any thread: deliver ``message`` to ``target`` in the host's loop."""
        self.posted.put((target, message))
        with self._wake_lock:
            if self._wake_pending:
                return
            self._wake_pending = True
        address = self.owner.myAddress
        self.owner.host_queue().put((None, (address, address, HostWake())), local=True)

    def _woken(self, message: HostWake) -> bool:
        self.take_posted()
        return True

    def take_posted(self) -> None:
        """The host woke up: deliver what threads posted."""
        with self._wake_lock:
            self._wake_pending = False
        while True:
            try:
                target, message = self.posted.get_nowait()
            except queue.Empty:
                return
            if target == self.owner.myAddress:  # e.g. a request from the host link
                self.parent_mail.append((message, target))
            else:
                self.deliver(target, message, target)

    def model_caller(self) -> Any:
        """The host's ``ModelCaller``: one event loop, one connection pool.

        Made on the first call of a model over the network (``runtime.llm.caller``).
        """
        if self._model_caller is None:
            from runtime.llm.caller import ModelCaller  # noqa: PLC0415 - only for such models

            self._model_caller = ModelCaller()
        return self._model_caller

    def append(
        self,
        source: ActorAddress,
        batches: Sequence[LinkBatch],
        then: Callable[[list[Any]], None],
    ) -> bool:
        """Queue batches for the appender (False: the host has none: no journal link).

        ``then(answers)`` runs in ``source``'s turn, one answer per batch.
        """
        if self.appender is None:
            return False
        self.appender.submit(batches, lambda answers: self.post(source, Deferred(then, answers)))
        return True

    # --- the loop ------------------------------------------------------------------------

    def wakeup(self, message: WakeupMessage) -> bool:
        """Deliver a wakeup that belongs to an entity (False: the owner's own)."""
        payload = message.payload
        if not isinstance(payload, EntityWakeup):
            return False
        wakeup = WakeupMessage(message.delayPeriod, payload.payload)
        self.deliver(payload.address, wakeup, payload.address)
        return True

    def run(self) -> None:
        """Run entities with mail, one message each in turn, until none has (not reentrant).

        Then, out of the loop's frame, collect what exited entities left if it is due.
        """
        if self._running:
            return
        self._running = True
        try:
            self._run_mail()
        finally:
            self._running = False
        self.collector.collect_if_due()

    def _run_mail(self) -> None:
        while self.runnable or self.parent_mail:
            while self.parent_mail:
                message, sender = self.parent_mail.popleft()
                self.owner.receiveMessage(message, sender)
            if not self.runnable:
                continue
            entity = self.runnable.popleft()
            entity.scheduled = False
            if not entity.mailbox or entity.key not in self.entities:
                continue
            message, sender = entity.mailbox.popleft()
            entity.actor.receiveMessage(message, sender)
            if isinstance(message, ActorExitRequest):
                self._exited(entity)
            elif entity.mailbox:
                entity.scheduled = True
                self.runnable.append(entity)

    def crash(self, address: Any) -> None:
        """Crash an entity on purpose (fault injection): its exit runs, then it is gone.

        Its owner hears of it as of any exit and, not having asked for it, restarts it.
        """
        entity = self.entities.get(address.addressDetails)
        if entity is None:
            return
        try:
            entity.actor.on_exit()
        finally:
            self._exited(entity)

    def _exited(self, entity: _Entity) -> None:
        del self.entities[entity.key]
        entity.mailbox.clear()
        self.collector.exited(len(self.entities))
        self.owner.entity_exited(entity.address)

    def stop_all(self) -> None:
        """The host stops: every entity gets its exit (no restart follows)."""
        for entity in list(self.entities.values()):
            try:
                entity.actor.receiveMessage(ActorExitRequest(), self.owner.myAddress)
            finally:
                self.entities.pop(entity.key, None)
        if self.appender is not None:
            self.appender.close()
        if self._model_caller is not None:
            self._model_caller.close()
            self._model_caller = None


def _owners(host: EntityHost, message: Any) -> bool:
    """A message of a type the host never takes: its owner's."""
    return False


_TAKERS: dict[type, Callable[[EntityHost, Any], bool]] = {
    HostWake: EntityHost._woken,
    WakeupMessage: EntityHost.wakeup,
    **dict.fromkeys((Appended, AppendFailed, ReadResult), EntityHost.route_answer),
}
"""Message type -> the host's method that takes it when it is the host's: a thread's wake,
an entity's wakeup, an answer to an entity's request (:meth:`EntityHost.take`)."""
