"""What every Roost actor shares: logging per process, error storms, journal appends.

An exception inside ``receiveMessage`` makes Thespian redeliver once and then bounce the
message as a ``PoisonMessage``; it never restarts the actor. Our actors catch exceptions
themselves, reply with an error where someone waits, and count them: a storm (more than
``STORM_LIMIT`` within ``STORM_WINDOW_S``) makes the actor exit, so its parent sees
``ChildActorExited`` and restarts it from its events.

The helpers a :class:`RoostActor` holds (objects, not base classes): ``outbox``
(``actors.sends``: sends a full mailbox refuses, overflow events) and ``appends``
(``actors.appends``: tracked journal appends); ``actors.process`` is what each actor
process sets up once.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable
from typing import Any, ClassVar

import structlog
from thespian.actors import Actor, ActorExitRequest

from actors.appends import JournalAppends, batch_key
from actors.dispatch import Handler, handler_table
from actors.hosting import Deferred
from actors.messages import ActorStarted, AppendRequest
from actors.process import configure_process_logging, die_with_parent, dump_profile
from actors.sends import MailboxSends, error_reply, utc_now
from events.envelope import NewEvent

__all__ = [
    "STORM_LIMIT",
    "STORM_WINDOW_S",
    "RoostActor",
    "batch_key",
    "error_reply",
    "utc_now",
]

STORM_LIMIT = 5
"""Exceptions within the window that make an actor exit to be restarted."""
STORM_WINDOW_S = 10.0
"""The storm window."""


class RoostActor(Actor):  # type: ignore[misc]
    """Base actor: per-process logging, storm counting; holds its sends and appends."""

    kind = "actor"
    parent_kind = "parent"
    """What the actor's parent is, to name it in mailbox overflow events."""
    hosted = False
    """True for an entity hosted in a host actor's process (``actors.hosting``): the
    process-wide set-up (logging, death with the parent, the profile) is the host's."""
    handlers: ClassVar[dict[type, Handler]] = {}
    """Message type -> the method serving it (``actors.dispatch``), made with the class."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.handlers = handler_table(cls)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.outbox = MailboxSends(self, functools.partial(Actor.send, self))
        """Sends a full mailbox refuses, and this process's overflow events."""
        self.appends = JournalAppends(self)
        """Tracked appends to the Journal actor (or over the journal link)."""
        self._errors: list[float] = []
        # Configure first: binding materializes a logger on the current output, and
        # configuring closes the file inherited from the parent process.
        configure_process_logging(self.kind)
        self.log = structlog.get_logger("roost").bind(
            component=f"roost.{self.kind}", actor=self.kind, pid=os.getpid()
        )
        if not self.hosted:
            die_with_parent()

    def receiveMessage(self, message: Any, sender: Any) -> None:
        """Dispatch ``message``; count and survive exceptions."""
        # Thespian configures logging in a new actor process after the instance exists
        # (closing inherited handlers), so ours is configured on the first message.
        configure_process_logging(self.kind)
        if isinstance(message, ActorExitRequest):
            self.on_exit()
            if not self.hosted:
                dump_profile(self.kind)
            return
        try:
            if isinstance(message, Deferred):
                message.run()
            elif not self.appends.take_answer(message):
                self.handle(message, sender)
        except Exception as e:
            self.log.exception("actor_error", message=type(message).__name__)
            self.on_error(message, sender, e)
            now = time.monotonic()
            self._errors = [t for t in self._errors if now - t < STORM_WINDOW_S] + [now]
            if len(self._errors) > STORM_LIMIT:
                self.log.error("actor_error_storm", errors=len(self._errors))
                self.send(self.myAddress, ActorExitRequest())
        self.outbox.record_overflows()

    def send(self, targetAddr: Any, msg: Any) -> bool:
        """Send ``msg``; False when its mailbox refused it (:meth:`MailboxSends.send`)."""
        return self.outbox.send(targetAddr, msg)

    def append(
        self,
        events: list[NewEvent],
        then: Callable[[Any], None] | None = None,
        *,
        key: str | None = None,
        redacted: bool = False,
    ) -> AppendRequest:
        """Commit ``events``; ``then(Appended | AppendFailed)`` (:meth:`JournalAppends.append`)."""
        return self.appends.append(events, then, key=key, redacted=redacted)

    @property
    def journal(self) -> Any:
        """The Journal actor's address: where this actor's appends and reads go."""
        return self.appends.journal

    @journal.setter
    def journal(self, address: Any) -> None:
        self.appends.journal = address

    def child_name(self, address: Any) -> str | None:
        """The name of the child at ``address`` (subclasses that have children)."""
        return None

    def overflow_scope(self, name: str) -> str | None:
        """The project whose record gets an overflow of ``name``'s mailbox, or None.

        None: nowhere (it is logged). By default the project this actor serves, when it
        has one. The event is project-level, like ``actor.crashed``: a conversation's own
        stream only holds what its core appended (its live projection is compared with
        the journal); ``actor: "conversation:ID"`` puts it in that conversation's
        incident views.
        """
        setup = getattr(self, "setup", None)
        project_id = getattr(setup, "project_id", None) or getattr(self, "project_id", None)
        return str(project_id) if project_id else None

    def handle(self, message: Any, sender: Any) -> None:
        """Hand ``message`` to the method its type's row names (``unhandled`` when none)."""
        handler: Handler = self.handlers.get(type(message), type(self).unhandled)
        handler(self, message, sender)

    def unhandled(self, message: Any, sender: Any) -> None:
        """A message no row serves: dropped (subclasses may queue it)."""

    def announce(self, parent: Any, role: str) -> None:
        """Tell ``parent`` this actor's role and pid."""
        self.send(parent, ActorStarted(role=role, pid=os.getpid()))

    def on_error(self, message: Any, sender: Any, error: Exception) -> None:
        """Answer whoever waits on ``message`` with ``error`` (subclasses may refine)."""
        reply_to = getattr(message, "reply_to", None)
        if reply_to is not None:
            self.send(reply_to, error_reply(error))

    def on_exit(self) -> None:
        """Release resources before the actor stops (subclasses)."""
