"""What the Supervisor and Project cores ask their actor shells to do.

The cores (``supervisor_core``, ``project_core``) never send a message or create an actor:
they return these effects and the shell carries them out in order. A child that an effect
creates is known to later effects by name (:class:`Child`), because its address exists
only once the shell has created it (the shell reports it with the core's ``spawned``).

:class:`Answer` ("answer this waiting client") is the agent core's own effect
(``runtime.agent.effects``, the lower of the two layers), re-exported here: every core
answers clients with the same effect, and every shell turns it into the one actor message
``actors.messages.Reply``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from events.envelope import NewEvent
from runtime.agent.effects import Answer
from runtime.errors import WireError, wire_error
from runtime.wire.op_args import ToolRequest

__all__ = [
    "Answer",
    "AppendThen",
    "Child",
    "Crash",
    "DeleteHistory",
    "Effect",
    "EscalateChild",
    "Log",
    "PeerChanged",
    "ReadHistory",
    "ReadLifecycle",
    "RunDirectForProject",
    "Send",
    "Spawn",
    "Stop",
    "Wakeup",
    "answer_after",
    "error_reply",
]


class Child(msgspec.Struct, frozen=True):
    """A child named in the core, resolved to its address when the shell runs the effect.

    Names: ``journal``, ``project:<id>``, ``policy``, ``toolrunner``, ``conversation:<id>``.
    """

    name: str


class Send(msgspec.Struct, frozen=True, kw_only=True):
    """Pass ``message`` (a request the core received, untouched) on to ``to``."""

    to: Any
    """An address, or a :class:`Child`."""
    message: Any


class Spawn(msgspec.Struct, frozen=True, kw_only=True):
    """Create the child ``name`` and set it up (the shell builds its setup message).

    ``restore``: a project rebuilt from its events; ``new``: a conversation that records
    its start (``history``: once it has read the events it had before it was stopped);
    ``recovering``: a conversation restarted after a crash, which answers ``waiters``
    (``(correlation_id, reply_to)``) when their turns end.
    """

    name: str
    reply_to: Any = None
    restore: bool = False
    new: bool = False
    history: bool = False
    recovering: bool = False
    waiters: list[tuple[str, Any]] = []
    correlation_id: str | None = None
    """A new conversation's or project's: the ``start_conversation`` or ``start_project``
    request's (the gateway minted it); its start is recorded under it."""


class Stop(msgspec.Struct, frozen=True, kw_only=True):
    """Ask a child to exit (Thespian's ``ActorExitRequest``)."""

    to: Any


class Crash(msgspec.Struct, frozen=True, kw_only=True):
    """Crash a hosted child on purpose, as a SIGKILL would a process (``inject_fault``)."""

    to: Any


class AppendThen(msgspec.Struct, frozen=True, kw_only=True):
    """Commit ``events``; then, on the journal's answer, run ``then``.

    The shell calls ``then(error)`` (``None`` when committed, else the wire error) and
    carries out the effects it returns.
    """

    events: list[NewEvent]
    then: Callable[[WireError | None], list[Effect]] | None = None


class DeleteHistory(msgspec.Struct, frozen=True, kw_only=True):
    """Ask the Journal to delete a project's history; its answer goes back to the core."""

    project_id: str
    deleted_by: str = ""
    reply_to: Any = None


class Wakeup(msgspec.Struct, frozen=True, kw_only=True):
    """Hand ``payload`` back to the core's ``wakeup`` after ``delay_s``."""

    delay_s: float
    payload: Any


class ReadLifecycle(msgspec.Struct, frozen=True):
    """Read every ``project.started`` / ``project.stopped`` (for the Supervisor's boot)."""


class ReadHistory(msgspec.Struct, frozen=True):
    """Read this project's events (for the Project's start).

    The shell sends the Journal the actor message ``actors.messages.ReadProject``.
    """


class RunDirectForProject(msgspec.Struct, frozen=True, kw_only=True):
    """Have the ToolRunner run a ``run_tool`` request that names no conversation.

    The shell sends the runner the actor message ``actors.messages.RunDirect``.
    """

    request: ToolRequest
    reply_to: Any


class PeerChanged(msgspec.Struct, frozen=True, kw_only=True):
    """Tell the children that a peer (``journal``, ``toolrunner``, ``policy``) moved.

    For the journal the shell also re-sends its unanswered appends.
    """

    peer: str
    lost: str | None = None
    """Why the old one went (calls in flight fail as crashed)."""


class EscalateChild(msgspec.Struct, frozen=True, kw_only=True):
    """Tell the Supervisor that ``child`` failed beyond the restart intensity.

    The shell sends the Supervisor the actor message ``actors.messages.Escalate``.
    """

    child: str
    error: WireError | None = None
    """Set when the project's start could not be recorded: the Supervisor forgets it."""


class Log(msgspec.Struct, frozen=True, kw_only=True):
    """A log line."""

    level: str
    """``info`` or ``error``."""
    event: str
    fields: dict[str, Any] = {}


Effect = (
    (Send | Answer | Spawn | Stop | AppendThen | Wakeup | ReadLifecycle | ReadHistory)
    | RunDirectForProject
    | PeerChanged
    | Crash
    | DeleteHistory
    | EscalateChild
    | Log
)
"""Any effect."""


def answer_after(to: Any, result: Any) -> Callable[[WireError | None], list[Effect]]:
    """An :attr:`AppendThen.then` that answers ``to``: ``result`` once committed, else the error."""

    def answer(error: WireError | None) -> list[Effect]:
        if error is not None:
            return [Answer(to=to, ok=False, error=error)]
        return [Answer(to=to, ok=True, result=result)]

    return answer


def error_reply(to: Any, error: BaseException) -> Answer:
    """An :class:`Answer` to ``to`` carrying ``error`` in its wire shape."""
    return Answer(to=to, ok=False, error=wire_error(error))
