"""Messages between actors: frozen msgspec Structs (picklable; Thespian carries them).

Addresses (Thespian ``ActorAddress``) travel in ``Any`` fields. A request from the daemon
carries ``reply_to``: whoever finishes the work answers there directly, so a request
forwarded Supervisor → Project → Conversation costs no extra hop on the way back.

:class:`Reply` answers every request, whoever answers (a core's ``Answer`` effect).
"""

from __future__ import annotations

from typing import Any

import msgspec

from events.catalog import Event
from events.envelope import Envelope, NewEvent
from runtime.errors import WireError
from runtime.settings_table import JournalKind
from runtime.tools.base import CallSpec
from runtime.tools.registry import ToolRegistry
from runtime.wire.ops import Call, ToolRequest

__all__ = [
    "ActorStarted",
    "AppendFailed",
    "AppendRequest",
    "Appended",
    "Boot",
    "CallCancel",
    "CallDecision",
    "CallDone",
    "ConversationFailed",
    "ConversationIdle",
    "DecideCall",
    "DeleteProject",
    "DirectDone",
    "Escalate",
    "JournalMoved",
    "Message",
    "PolicyRestarted",
    "ProjectDeleted",
    "ProjectSetup",
    "ReadProject",
    "ReadResult",
    "ReadTypes",
    "Reply",
    "Request",
    "RunCall",
    "RunDirect",
    "RunnerRestarted",
    "SetupConversation",
    "SetupJournal",
    "SetupPolicy",
    "SetupProject",
    "SetupRunner",
]


class Message(msgspec.Struct, frozen=True, kw_only=True):
    """Base of every actor message."""


class Request(Message, frozen=True, kw_only=True):
    """A client operation routed down the tree until an actor can serve it."""

    call: Call[Any]
    """The op, its arguments Struct and its ids (``runtime.wire.ops``)."""
    reply_to: Any
    """The daemon endpoint waiting for the :class:`Reply`."""


class Reply(Message, frozen=True, kw_only=True):
    """The answer to a :class:`Request`."""

    ok: bool
    """True on success."""
    result: Any = None
    """The result when ok."""
    error: WireError | None = None
    """The wire error ``{code, message, details}`` when not ok."""


class SetupJournal(Message, frozen=True, kw_only=True):
    """Configure the Journal actor (it opens the store on this message, after fork)."""

    home: str
    """ROOST_HOME (the SQLite file lives there)."""
    journal: JournalKind
    """The journal's kind (the daemon's ``DaemonConfig.journal``)."""
    peer_roots: list[int] = []
    """Pids one of which every journal-link peer must descend from (the Supervisor, the
    daemon); empty: the Journal's own process."""
    error: WireError | None = None
    """Set on the Journal's answer when the store did not open: the error's wire shape."""


class AppendRequest(Message, frozen=True, kw_only=True):
    """Commit a batch; answered by :class:`Appended` or :class:`AppendFailed`."""

    key: str
    """Idempotency key: re-sending after a journal restart never appends twice."""
    events: list[NewEvent]
    """The batch."""
    token: int
    """The sender's handle for this append."""


class Appended(Message, frozen=True, kw_only=True):
    """A batch was committed."""

    token: int
    """The request's token."""
    envelopes: list[Envelope]
    """The committed events."""


class AppendFailed(Message, frozen=True, kw_only=True):
    """A batch could not be committed."""

    token: int
    """The request's token."""
    error: WireError
    """The wire error."""


class ReadProject(Message, frozen=True, kw_only=True):
    """Read a project's events (optionally one conversation's)."""

    project_id: str
    """The project."""
    conversation_id: str | None = None
    """Only this conversation, when set."""
    token: int = 0
    """The sender's handle."""
    reply_to: Any = None
    """Where to answer (defaults to the sender)."""


class ReadResult(Message, frozen=True, kw_only=True):
    """Events read from the journal."""

    token: int
    """The request's token."""
    events: list[Envelope]
    """The events in seq order (one conversation's: those after ``snapshot`` when set)."""
    snapshot: bytes | None = None
    """One conversation's read: its snapshot (``runtime.agent.snapshot``), checked by the
    journal, which ``events`` follow; None when it has none or it did not check out."""


class ProjectSetup(Message, frozen=True, kw_only=True):
    """What the set-up of a project's actor (and of the project itself) carries."""

    project_id: str
    """The project."""
    root: str
    """Resolved root."""
    options: dict[str, Any]
    """Normalized options."""


class SetupProject(ProjectSetup, frozen=True, kw_only=True):
    """Start (or restore) a project actor."""

    journal: Any
    """The Journal's address."""
    restore: bool = False
    """True when restoring from the journal (no ``project.started`` is appended)."""
    correlation_id: str | None = None
    """A new project's: the ``start_project`` request's, minted by the gateway."""
    reply_to: Any = None
    """The client waiting for the start."""


class SetupPolicy(ProjectSetup, frozen=True, kw_only=True):
    """Configure a project's Policy actor."""

    registry: ToolRegistry
    """The project's tools, built once by the Project."""


class SetupRunner(ProjectSetup, frozen=True, kw_only=True):
    """Configure a project's ToolRunner actor."""

    registry: ToolRegistry
    """The project's tools, built once by the Project (the same value the Policy has)."""
    journal: Any
    """The Journal (for signals the runner records itself)."""


class SetupConversation(ProjectSetup, frozen=True, kw_only=True):
    """Start (or rehydrate) a conversation actor."""

    conversation_id: str
    """The conversation."""
    journal: Any
    """The Journal."""
    policy: Any
    """The Policy."""
    runner: Any
    """The ToolRunner."""
    tools: list[dict[str, Any]]
    """Tools offered to the model."""
    new: bool
    """A new conversation (append ``conversation.started``; ``history``: once its events
    from before it was stopped are read)."""
    history: bool = False
    recovering: bool = False
    """True when restarted after a crash (running calls fail as crashed)."""
    correlation_id: str | None = None
    """Correlation of the ``conversation.started`` event of a new conversation: the
    ``start_conversation`` request's, minted by the gateway (required when ``new``)."""
    reply_to: Any = None
    """The client waiting for the start."""
    waiters: list[tuple[str, Any]] = []
    """``(correlation_id, reply_to)`` of clients waiting (``send_event`` with ``wait``) on
    the conversation this one replaces after a crash: they get their turn's outcome here."""
    fold_tools: list[str] = []
    """Read-only tools the host runs inline: a call of one ends no stage (``agent_shell``)."""


class JournalMoved(Message, frozen=True, kw_only=True):
    """The Journal restarted: its new address (unanswered appends are sent there again)."""

    journal: Any
    """New Journal address."""


class PolicyRestarted(Message, frozen=True, kw_only=True):
    """The project's Policy restarted: its new address (undecided calls are asked again)."""

    policy: Any
    """New Policy address."""


class RunnerRestarted(Message, frozen=True, kw_only=True):
    """The project's ToolRunner died and was restarted: calls in flight fail as crashed."""

    runner: Any
    """New ToolRunner address."""
    lost: str | None = None
    """Why the calls in flight were lost (set whenever it died)."""


class DecideCall(Message, frozen=True, kw_only=True):
    """Ask the Policy to decide a call."""

    call: CallSpec
    """The call."""


class CallDecision(Message, frozen=True, kw_only=True):
    """The Policy's verdict: the events to record for it."""

    call_id: str
    """The call."""
    events: list[Event]
    """Decision, signals and (for a refusal) the terminal ``tool.failed``."""


class RunCall(Message, frozen=True, kw_only=True):
    """Run an allowed call."""

    call: CallSpec
    """The call."""


class CallDone(Message, frozen=True, kw_only=True):
    """A call's terminal event and its signals."""

    call_id: str
    """The call."""
    events: list[Event]
    """Signals, then the terminal event."""


class CallCancel(Message, frozen=True, kw_only=True):
    """Stop these calls; their results will be ignored."""

    call_ids: list[str]
    """The calls."""


class ConversationIdle(Message, frozen=True, kw_only=True):
    """A conversation has been idle for ``idle_passivation_ms`` and offers to stop."""

    conversation_id: str
    """The conversation."""
    handled: int
    """Requests it has handled; the project stops it only if it forwarded no more."""


class ConversationFailed(Message, frozen=True, kw_only=True):
    """A conversation's append failed: it asks its project to stop it and start it again.

    The project holds later requests for it and sends the stop, which arrives behind every
    request the project forwarded before: the conversation answers those with the append's
    error instead of dying with them in its mailbox.
    """

    conversation_id: str
    """The conversation."""
    unrecorded: bool = False
    """True when the failed append held its ``conversation.started``: the conversation was
    never recorded, and the project forgets it instead of restarting it."""
    code: str = ""
    """The append's error code (``journal_error``: the journal refused it, e.g. a full
    disk; the restart then counts toward no escalation)."""


class RunDirect(Message, frozen=True, kw_only=True):
    """A client's ``run_tool``: decide, run and answer ``reply_to`` directly."""

    request: ToolRequest
    """``{name, args, meta: {conversation_id?, correlation_id?}}``."""
    reply_to: Any
    """The client."""
    conversation_id: str | None = None
    """Set when a conversation records the call's events (it gets a DirectDone)."""


class DirectDone(Message, frozen=True, kw_only=True):
    """A direct run finished; the conversation records its events, then answers."""

    events: list[Event]
    """``tool.requested``, decision, signals, terminal event."""
    result: dict[str, Any]
    """The run_tool result dict."""
    correlation_id: str
    """The call's correlation."""
    reply_to: Any
    """The client."""


class Escalate(Message, frozen=True, kw_only=True):
    """A child failed beyond the restart intensity; the parent takes over."""

    project_id: str
    """The project."""
    child: str
    """The child that kept failing."""
    error: WireError | None = None
    """Set when the project's start could not be recorded (e.g. a full disk): the
    Supervisor forgets the project instead of restarting it."""


class ReadTypes(Message, frozen=True, kw_only=True):
    """Read every event of the given types (answered by :class:`ReadResult`)."""

    types: list[str]
    """Event types."""
    token: int = 0
    """The sender's handle."""


class DeleteProject(Message, frozen=True, kw_only=True):
    """Supervisor → Journal: delete a stopped project's history (answer: ProjectDeleted)."""

    project_id: str
    """The project."""
    deleted_by: str = ""
    """Who asked (recorded in the deletion record)."""
    reply_to: Any = None
    """The client waiting for the answer (handed back in :class:`ProjectDeleted`)."""


class ProjectDeleted(Message, frozen=True, kw_only=True):
    """Journal → Supervisor: the outcome of a :class:`DeleteProject`."""

    project_id: str
    """The project."""
    reply_to: Any = None
    """The client waiting for the answer."""
    result: dict[str, Any] | None = None
    """What was deleted (``Journal.delete_project``), or None on error."""
    error: WireError | None = None
    """The wire error, or None."""


class Boot(Message, frozen=True, kw_only=True):
    """Start the Supervisor: open the journal, restore running projects."""

    home: str
    """ROOST_HOME."""
    journal: JournalKind
    """The journal's kind (``DaemonConfig.journal``), handed to the Journal actor."""
    daemon_pid: int = 0
    """The daemon process: when it dies, the actor tree takes itself down (0: no watch)."""
    daemon_started: float = 0.0
    """The daemon's create time (guards against pid reuse)."""


class ActorStarted(Message, frozen=True, kw_only=True):
    """A child tells its parent who it is (operators and chaos tests kill by role)."""

    role: str
    """``journal``, ``policy``, ``toolrunner`` or ``conversation:<id>``."""
    pid: int
    """Its process id."""
