"""The event catalog: one frozen, keyword-only, tagged msgspec Struct per event type.

Each Struct is the typed payload (the envelope's ``data``) of one event type; its tag is
the dotted type name. Payloads only grow: a new field always has a default and a field's
type never changes, so old journal bytes keep decoding (see ``docs/events.md``). Each
also declares, once, what it means to the incident views (``facts``: its error kind,
report section, timeline mark, stage boundaries, describer, signal-ness; see
``events.facts``); the tables below and in the views are derived from them.
"""

from __future__ import annotations

from typing import Any, ClassVar, Final

import msgspec

from events import describe as d
from events.facts import PLAIN, EventFacts, Stage
from events.view_types import ChangedPath, QuarantinedPath

__all__ = [
    "PAYLOAD_TYPES",
    "SIGNAL_TYPES",
    "TERMINAL_TOOL_TYPES",
    "A2aTaskUpdated",
    "ActorCrashed",
    "ActorEscalated",
    "ActorMailboxOverflow",
    "ActorRestarted",
    "AlertDispatched",
    "AlertFailed",
    "AssistantDelta",
    "AssistantMessage",
    "BudgetExceeded",
    "ConversationCancel",
    "ConversationResume",
    "ConversationStarted",
    "ConversationStopped",
    "Event",
    "JournalCheckpoint",
    "JournalProjectDeleted",
    "LlmBreakerChanged",
    "LlmCompleted",
    "LlmFailed",
    "LlmRetried",
    "LlmStarted",
    "McpServerExited",
    "McpServerRestarted",
    "McpServerStarted",
    "PolicyAllowed",
    "PolicyDenied",
    "ProjectAssetsLoaded",
    "ProjectAssetsReloaded",
    "ProjectStarted",
    "ProjectStopped",
    "SecurityCommandBlocked",
    "SecurityEnvDenied",
    "SecurityLeftoverQuarantined",
    "SecurityNetworkDenied",
    "SecurityProtocolDenied",
    "SecurityRepeatedTimeoutFailures",
    "SecuritySandboxExceptionUsed",
    "SecuritySandboxViolation",
    "SecuritySensitiveArtifactDetected",
    "SecuritySensitivePathDenied",
    "ToolApprovalRequested",
    "ToolApproved",
    "ToolCancelled",
    "ToolChanges",
    "ToolChildProcessesTerminated",
    "ToolCompleted",
    "ToolFailed",
    "ToolRejected",
    "ToolRequested",
    "ToolStarted",
    "ToolTimeout",
    "UserMessage",
    "decode_data",
    "facts_of",
    "payload_to_data",
    "type_names",
    "validate_data",
]


class Event(msgspec.Struct, frozen=True, kw_only=True, tag_field="type"):
    """Base of every domain event payload; the tag is the event's dotted type."""

    facts: ClassVar[EventFacts]
    """What the type means to the incident views; each payload class declares its own."""


_TURN_END: Final[tuple[Stage, ...]] = ("turn", "model_round")
_CALL_END: Final[tuple[Stage, ...]] = ("tool_call", "tool_run")
SECURITY_ERROR: Final = EventFacts(kind="security", section="security_signals", signal=True)
SECURITY_SIGNAL: Final = EventFacts(mark="security", section="security_signals", signal=True)


# --- project ---------------------------------------------------------------------------


class ProjectStarted(Event, frozen=True, kw_only=True, tag="project.started"):
    """A project was started (or restored) with validated options."""

    facts = PLAIN

    root: str
    """Absolute, resolved project root."""
    options: dict[str, Any] = {}
    """The normalized runtime options."""
    sandbox_layers: dict[str, Any] = {}
    """Isolation layers probed at start (name -> available/detail)."""


class ProjectStopped(Event, frozen=True, kw_only=True, tag="project.stopped"):
    """A project was stopped on request, or not restored at daemon start."""

    facts = PLAIN

    reason: str = "requested"
    """Why: ``requested``, or ``invalid_root_path: <reason>`` when it was not restored."""


class ProjectAssetsLoaded(Event, frozen=True, kw_only=True, tag="project.assets_loaded"):
    """The project's assets (skills, commands, workflows) were loaded."""

    facts = PLAIN

    generation: int = 1
    """Monotonic asset generation."""
    counts: dict[str, int] = {}
    """Valid assets per type."""
    errors: list[dict[str, Any]] = []
    """Assets that failed to parse, each ``{type, key, reason}`` (an MCP server that exited
    adds ``exit_status``, ``stderr_tail`` and maybe ``hint``)."""


class ProjectAssetsReloaded(Event, frozen=True, kw_only=True, tag="project.assets_reloaded"):
    """The project's assets were reloaded."""

    facts = PLAIN

    generation: int = 1
    """Monotonic asset generation."""
    counts: dict[str, int] = {}
    """Valid assets per type."""
    errors: list[dict[str, Any]] = []
    """Assets that failed to parse, each ``{type, key, reason}``."""


# --- conversation ----------------------------------------------------------------------


class ConversationStarted(Event, frozen=True, kw_only=True, tag="conversation.started"):
    """A conversation was opened."""

    facts = PLAIN


class ConversationStopped(Event, frozen=True, kw_only=True, tag="conversation.stopped"):
    """A conversation was closed on request."""

    facts = EventFacts(describe=d.reason_only)

    reason: str = "requested"
    """Why the conversation stopped."""


class UserMessage(Event, frozen=True, kw_only=True, tag="user.message"):
    """A message from the user; starts a turn."""

    facts = EventFacts(opens=("turn",), describe=d.message)

    content: str = ""
    """The message text."""
    llm: dict[str, Any] | None = None
    """Directives for the deterministic model adapter (tests, demos, soak)."""


class LlmStarted(Event, frozen=True, kw_only=True, tag="llm.started"):
    """A model round began."""

    facts = EventFacts(opens=("model_round",), closes=("model_round",), describe=d.llm_started)

    provider: str
    """Adapter name (``deterministic``, ``openai``)."""
    model: str | None = None
    """Model name, when the adapter has one."""
    round: int = 1
    """Model round within the turn, from 1."""


class AssistantDelta(Event, frozen=True, kw_only=True, tag="assistant.delta"):
    """A streamed chunk of assistant text."""

    facts = EventFacts(describe=d.message)

    content: str
    """The chunk."""


class ToolRequested(Event, frozen=True, kw_only=True, tag="tool.requested"):
    """The model asked for a tool call."""

    facts = EventFacts(opens=("policy", "tool_call"), closes=("model_round",), describe=d.requested)

    call_id: str
    """Unique id of this call; every later event about it carries it."""
    name: str
    """Tool name."""
    args: dict[str, Any] = {}
    """Arguments as the model gave them (redacted)."""
    run_mode: str = "sync"
    """``sync`` or ``async``."""
    source: str = "model"
    """Who made the call: ``model``, ``run_tool`` (a client's) or ``mcp`` (``roost mcp serve``)."""


class ToolApprovalRequested(Event, frozen=True, kw_only=True, tag="tool.approval_requested"):
    """The policy asked a person to approve a call."""

    facts = EventFacts(opens=("approval",), closes=("policy",), decision="ask", describe=d.approval)

    call_id: str
    """The call awaiting approval."""


class ToolApproved(Event, frozen=True, kw_only=True, tag="tool.approved"):
    """A person approved a call."""

    facts = EventFacts(opens=("policy",), closes=("approval",), describe=d.approval)

    call_id: str
    """The approved call."""
    reason: str | None = None
    """Optional note."""


class ToolRejected(Event, frozen=True, kw_only=True, tag="tool.rejected"):
    """A person rejected a call."""

    facts = EventFacts(
        kind="denial",
        section="denials",
        opens=("policy",),
        closes=("approval",),
        describe=d.approval,
    )

    call_id: str
    """The rejected call."""
    reason: str | None = None
    """Optional note."""


class ToolStarted(Event, frozen=True, kw_only=True, tag="tool.started"):
    """A tool call began running."""

    facts = EventFacts(opens=("tool_run",), describe=d.call)

    call_id: str
    """The call."""
    name: str
    """Tool name."""


class ToolCompleted(Event, frozen=True, kw_only=True, tag="tool.completed"):
    """A tool call succeeded (terminal)."""

    facts = EventFacts(closes=_CALL_END, describe=d.completed)

    call_id: str
    """The call this result closes."""
    name: str
    """Tool name."""
    duration_ms: int = 0
    """Wall time of the run."""
    result: dict[str, Any] = {}
    """The run_tool result dict (capped and redacted)."""
    risk_flags: list[str] = []
    """Sorted: ``bidi_control``, ``invisible_unicode``, ``sensitive_artifact_detected``."""


class ToolFailed(Event, frozen=True, kw_only=True, tag="tool.failed"):
    """A tool call failed (terminal)."""

    facts = EventFacts(kind="failure", section="failures", closes=_CALL_END, describe=d.failed)

    call_id: str
    """The call this failure closes."""
    name: str
    """Tool name."""
    duration_ms: int = 0
    """Wall time until the failure."""
    reason: dict[str, Any] = {}
    """``{code, ...fields}``; see the tool error codes."""


class ToolCancelled(Event, frozen=True, kw_only=True, tag="tool.cancelled"):
    """A tool call was cancelled (terminal)."""

    facts = EventFacts(
        mark="cancel", section="cancellations", closes=_CALL_END, describe=d.cancelled
    )

    call_id: str
    """The cancelled call."""
    name: str
    """Tool name."""
    reason: str = "conversation_cancelled"
    """Why it was cancelled."""


class AssistantMessage(Event, frozen=True, kw_only=True, tag="assistant.message"):
    """The model's reply for one round (its text may be empty when it only calls tools)."""

    facts = EventFacts(closes=("model_round",), describe=d.message)

    content: str
    """The message text."""
    round: int = 0
    """The model round this reply closes (0 when unknown)."""
    usage: dict[str, int] = {}
    """Token usage of this round."""


class LlmCompleted(Event, frozen=True, kw_only=True, tag="llm.completed"):
    """The turn ended normally."""

    facts = EventFacts(closes=_TURN_END, describe=d.llm_completed)

    finish_reason: str = "stop"
    """``stop``, ``tool_calls``, ``length``..."""
    tool_call_count: int = 0
    """Tool calls requested during the turn."""
    usage: dict[str, int] = {}
    """Token usage (prompt_tokens, completion_tokens, total_tokens)."""


class LlmFailed(Event, frozen=True, kw_only=True, tag="llm.failed"):
    """The turn ended because the model failed."""

    facts = EventFacts(
        kind="failure",
        section="failures",
        closes=_TURN_END,
        describe=d.llm_failed,
        timeout_when=lambda payload: payload.reason == "timeout",
    )

    reason: str
    """Why, a stable code (``timeout``, ``provider_error``, ``circuit_open``, ...)."""
    message: str = ""
    """The failure in words, the provider's message included (``HTTP 404 from ...: ...``)."""


class LlmRetried(Event, frozen=True, kw_only=True, tag="llm.retried"):
    """A model call's attempt failed with a retryable error and was tried again."""

    facts = EventFacts(section="model_retries", describe=d.llm_retried)

    round: int = 1
    """Model round within the turn, from 1."""
    attempt: int = 1
    """The attempt that failed, from 1."""
    reason: str = ""
    """The attempt's error (``rate_limited``, ``provider_error``, ``timeout``)."""
    status: int | None = None
    """The provider's HTTP status, when there was one."""
    retry_after_ms: int | None = None
    """The provider's ``Retry-After`` in ms, when it sent one."""
    delay_ms: int = 0
    """The wait before the next attempt, in ms (at least ``retry_after_ms``)."""
    message: str = ""
    """The provider's error in words (``HTTP 429 from ...: ...``)."""
    elapsed_ms: int = 0
    """When, in ms since the round's model call started (the event is appended later)."""


class LlmBreakerChanged(Event, frozen=True, kw_only=True, tag="llm.breaker_changed"):
    """The model provider's circuit breaker changed state (the conversation's own breaker)."""

    facts = EventFacts(section="model_retries", describe=d.breaker)

    provider: str = ""
    """Adapter name (``openai``)."""
    previous: str = ""
    """The state it left: ``closed``, ``open`` or ``half_open``."""
    state: str = ""
    """The state it entered: ``open`` (calls refused), ``half_open`` (one probe let
    through) or ``closed``."""
    consecutive_failures: int = 0
    """Retryable failures since the last success, at the transition."""
    failure_threshold: int = 0
    """Consecutive failures that open it."""
    last_error: str = ""
    """The provider's last error (``reason: message``) when it opened or let a probe through."""
    round: int = 1
    """Model round within the turn, from 1."""
    elapsed_ms: int = 0
    """When, in ms since the round's model call started (the event is appended later)."""


class BudgetExceeded(Event, frozen=True, kw_only=True, tag="budget.exceeded"):
    """A budget stopped the turn."""

    facts = EventFacts(kind="failure", section="failures", closes=_TURN_END, describe=d.budget)

    budget: str
    """``max_rounds``, ``token_budget`` or ``duration_budget_ms``."""
    limit: int
    """The configured limit."""
    used: int
    """What had been used when the check failed."""


class ConversationCancel(Event, frozen=True, kw_only=True, tag="conversation.cancel"):
    """The conversation was cancelled; pending calls are cancelled with it."""

    facts = EventFacts(mark="cancel", section="cancellations", describe=d.reason_only)

    reason: str = "user_cancelled"
    """Why."""


class ConversationResume(Event, frozen=True, kw_only=True, tag="conversation.resume"):
    """A cancelled conversation was reopened."""

    facts = PLAIN


# --- signals ---------------------------------------------------------------------------


class PolicyAllowed(Event, frozen=True, kw_only=True, tag="policy.allowed"):
    """The policy allowed a tool call."""

    facts = EventFacts(closes=("policy",), decision="allow", signal=True, describe=d.policy)

    tool: str
    """Tool name."""
    reason: str = "allowed"
    """Why it was allowed."""
    source: str = "policy"
    """``policy``, ``user`` or ``hook``."""
    call_id: str | None = None
    """The call decided, when there is one."""


class PolicyDenied(Event, frozen=True, kw_only=True, tag="policy.denied"):
    """The policy denied a tool call."""

    facts = EventFacts(
        kind="denial",
        section="denials",
        closes=("policy",),
        decision="deny",
        signal=True,
        describe=d.policy,
    )

    tool: str
    """Tool name."""
    reason: str
    """The denial reason code."""
    source: str = "policy"
    """``policy``, ``user`` or ``hook``."""
    outside_root_exception_reason_codes: list[str] = []
    """Reason codes of outside-root exceptions that applied."""
    call_id: str | None = None
    """The call decided, when there is one."""


class ToolTimeout(Event, frozen=True, kw_only=True, tag="tool.timeout"):
    """A tool call hit its timeout."""

    facts = EventFacts(kind="timeout", section="timeouts", signal=True, describe=d.timeout)

    call_id: str
    """The call."""
    timeout_count: int = 1
    """Timeouts so far for this (project, tool)."""
    tool: str | None = None
    """Tool name."""


class ToolChildProcessesTerminated(
    Event, frozen=True, kw_only=True, tag="tool.child_processes_terminated"
):
    """Processes of a tool call were killed (a stopping cancel: always, ``count`` maybe 0)."""

    facts = EventFacts(signal=True)

    call_id: str
    """The call."""
    reason: str
    """``timeout``, ``cancel`` or ``completed``."""
    count: int
    """How many processes were killed."""


class ToolChanges(Event, frozen=True, kw_only=True, tag="tool.changes"):
    """What a tool process changed in the project root, as the review after its run found it.

    Entries are ``{path, kind, size?, sha256?, target?, outside_root?}`` (``path`` relative
    to the root; ``sha256`` of regular files up to 4 MiB, not of sensitive ones); each list
    keeps its first 200 entries, the counts are exact.
    """

    facts = EventFacts(signal=True)

    call_id: str
    """The call whose run this was."""
    tool: str = "command.run"
    """The tool that ran the process."""
    method: str = "inotify"
    """``inotify`` (the paths with events) or ``walk`` (the whole root, judged by ctime)."""
    detail: str = ""
    """Why a walk was needed, when one was."""
    created: list[ChangedPath] = []
    """Entries that did not exist before the run (a walk lists every change here)."""
    modified: list[ChangedPath] = []
    """Entries that existed and were changed."""
    deleted: list[ChangedPath] = []
    """Entries that existed and are gone."""
    created_count: int = 0
    """All created entries."""
    modified_count: int = 0
    """All modified entries."""
    deleted_count: int = 0
    """All deleted entries."""
    quarantined: list[QuarantinedPath] = []
    """What the review took out of the root (``error``: it could not be, and is still there)."""
    recovered: bool = False
    """The run was cut by a stop or a crash and reviewed when the daemon or project started."""
    conversation_id: str | None = None
    """The call's conversation, for a recovered run (recorded as a project-level event)."""


class SecurityLeftoverQuarantined(
    Event, frozen=True, kw_only=True, tag="security.leftover_quarantined"
):
    """A tool process left something in the root that may not stay; it was taken out."""

    facts = SECURITY_SIGNAL

    path: str
    """Relative to the project root."""
    reason: str
    """``git_dir_created``, ``bare_repository``, ``assets_created``, ``hooks_created``,
    ``sensitive_alias``, ``setid_file`` or ``special_file``."""
    kind: str = "file"
    """What it was: ``file``, ``dir``, ``symlink``, ``fifo``, ``socket`` or ``device``."""
    moved_to: str | None = None
    """Where it is now in ``ROOST_HOME/quarantine`` (``None``: a special file, removed)."""
    error: str | None = None
    """Why it could not be taken out (it is still in the root), when it could not."""
    tool: str | None = None
    """Tool name."""
    call_id: str | None = None
    """The call whose run left it."""
    conversation_id: str | None = None
    """The call's conversation, for a recovered run (recorded as a project-level event)."""


class SecuritySandboxViolation(Event, frozen=True, kw_only=True, tag="security.sandbox_violation"):
    """A tool tried to reach outside the workspace."""

    facts = SECURITY_ERROR

    tool: str | None = None
    """Tool name."""
    path: str | None = None
    """The offending path (redacted)."""
    reason: str | None = None
    """The reason code."""
    call_id: str | None = None
    """The call, when there is one."""


class SecuritySandboxExceptionUsed(
    Event, frozen=True, kw_only=True, tag="security.sandbox_exception_used"
):
    """An ``outside_root_allowlist`` entry let a path through."""

    facts = SECURITY_SIGNAL

    reason_code: str
    """The entry's reason code."""
    tool: str | None = None
    """Tool name."""
    path: str | None = None
    """The path that used the exception."""
    call_id: str | None = None
    """The call, when there is one."""


class SecuritySensitivePathDenied(
    Event, frozen=True, kw_only=True, tag="security.sensitive_path_denied"
):
    """A tool touched a sensitive or protected path."""

    facts = SECURITY_ERROR

    tool: str | None = None
    """Tool name."""
    path: str | None = None
    """The path."""
    reason: str | None = None
    """The reason code."""
    call_id: str | None = None
    """The call, when there is one."""


class SecurityNetworkDenied(Event, frozen=True, kw_only=True, tag="security.network_denied"):
    """A network target was refused."""

    facts = SECURITY_ERROR

    target: str
    """The target as found (redacted)."""
    reason: str
    """The reason code."""
    tool: str | None = None
    """Tool name."""
    call_id: str | None = None
    """The call, when there is one."""


class SecurityEnvDenied(Event, frozen=True, kw_only=True, tag="security.env_denied"):
    """A command's environment was refused."""

    facts = SECURITY_ERROR

    denied_keys: list[str] = []
    """Keys that were not allowed."""
    reason: str | None = None
    """Reason code when the payload itself was invalid."""
    tool: str | None = None
    """Tool name."""
    call_id: str | None = None
    """The call, when there is one."""


class SecurityProtocolDenied(Event, frozen=True, kw_only=True, tag="security.protocol_denied"):
    """A protocol entry point (MCP, A2A) was refused."""

    facts = SECURITY_ERROR

    protocol: str
    """The protocol."""
    operation: str
    """The operation attempted."""


class SecuritySensitiveArtifactDetected(
    Event, frozen=True, kw_only=True, tag="security.sensitive_artifact_detected"
):
    """A tool result contained sensitive material."""

    facts = SECURITY_SIGNAL

    finding_count: int
    """Number of findings."""
    finding_kinds: list[str] = []
    """Kinds of findings (sorted)."""
    tool: str | None = None
    """Tool name."""
    call_id: str | None = None
    """The call, when there is one."""


class SecurityRepeatedTimeoutFailures(
    Event, frozen=True, kw_only=True, tag="security.repeated_timeout_failures"
):
    """A tool timed out as often as the alert threshold."""

    facts = SECURITY_ERROR

    tool: str
    """Tool name."""
    timeout_count: int
    """Timeouts so far."""
    threshold: int
    """The configured threshold."""


class SecurityCommandBlocked(Event, frozen=True, kw_only=True, tag="security.command_blocked"):
    """A command matched the non-bypassable blocklist."""

    facts = SECURITY_ERROR

    pattern: str
    """The blocklist pattern that matched."""
    call_id: str | None = None
    """The call, when there is one."""


class ActorCrashed(Event, frozen=True, kw_only=True, tag="actor.crashed"):
    """A supervised actor died."""

    facts = EventFacts(kind="crash", section="actor_events", signal=True, describe=d.actor)

    actor: str
    """Actor kind and id, e.g. ``conversation:c1``."""
    reason: str
    """Why it died."""
    restart_count: int = 0
    """Restarts within the current period."""


class ActorRestarted(Event, frozen=True, kw_only=True, tag="actor.restarted"):
    """A supervised actor was restarted from its events."""

    facts = EventFacts(mark="restart", section="actor_events", signal=True, describe=d.actor)

    actor: str
    """Actor kind and id."""
    reason: str
    """Why it was restarted."""
    restart_count: int = 0
    """Restarts within the current period."""


class ActorEscalated(Event, frozen=True, kw_only=True, tag="actor.escalated"):
    """Restart intensity was exceeded; the failure went to the parent."""

    facts = EventFacts(kind="crash", section="actor_events", signal=True, describe=d.actor)

    actor: str
    """Actor kind and id."""
    reason: str
    """Why."""
    restart_count: int = 0
    """Restarts within the current period."""


class ActorMailboxOverflow(Event, frozen=True, kw_only=True, tag="actor.mailbox_overflow"):
    """An actor's mailbox reached its bound: sends to it were refused, or it cleared again."""

    facts = EventFacts(mark="failure", section="actor_events", signal=True)

    actor: str
    """Whose mailbox (kind and id, e.g. ``conversation:c1``; the sender's parent by kind)."""
    sender: str
    """The actor whose sends to it waited in its own process (kind)."""
    phase: str
    """``full`` (sends refused from now on) or ``cleared`` (drained to half, or reader gone)."""
    backlog_bytes: int = 0
    """Bytes the sender had waiting for the mailbox."""
    limit_bytes: int = 0
    """The bound on those bytes."""
    refused: int = 0
    """Sends refused in this episode so far (a waiting client got ``overloaded``)."""
    duration_ms: int = 0
    """Time since the mailbox reached the bound."""


class AlertDispatched(Event, frozen=True, kw_only=True, tag="alert.dispatched"):
    """An alert was delivered to the configured router."""

    facts = EventFacts(signal=True)

    event: str
    """The signal type alerted on."""
    router: str
    """The ``module:function`` router."""


class AlertFailed(Event, frozen=True, kw_only=True, tag="alert.failed"):
    """An alert could not be delivered."""

    facts = EventFacts(kind="failure", section="failures", signal=True)

    event: str
    """The signal type alerted on."""
    router: str
    """The ``module:function`` router."""
    reason: str = ""
    """Why delivery failed."""


# --- journal ---------------------------------------------------------------------------


class JournalCheckpoint(Event, frozen=True, kw_only=True, tag="journal.checkpoint"):
    """The journal sealed the project's chain head (project-level; see ``events.seal``).

    Written by the journal itself, never by a client or an actor: every N events, every T
    seconds, when the project stops and when the daemon stops. Not part of any
    conversation, timeline or incident report.
    """

    facts = PLAIN

    index: int
    """The project's checkpoint number: 1 for its first, then one more each time."""
    head_position: int
    """Position in the project's stream (its N-th event) of the sealed head."""
    head_hash: str
    """``hash`` of the sealed head: the project's last event before this checkpoint."""
    prev_checkpoint: str
    """``mac`` of the project's previous checkpoint (64 zeros for the first)."""
    sealed_at: str
    """When it was sealed (UTC ISO 8601 with milliseconds)."""
    reason: str
    """Why: ``count``, ``interval``, ``project_stopped`` or ``shutdown`` (``project_deleted``
    for the deletion log's own, see ``events.deletion``)."""
    key_id: str
    """First 16 hex digits of the SHA-256 of the key that made ``mac``."""
    mac: str
    """HMAC-SHA256 (hex) over the project id and every other field, with the journal key."""


class JournalProjectDeleted(Event, frozen=True, kw_only=True, tag="journal.project_deleted"):
    """An operator deleted a project's whole history (``roost project delete``).

    Written by the journal itself, in its own deletion log (the stream of the reserved id
    ``_roost.deletions``, which no project can take), in the transaction that deletes the
    project's events; see ``events.deletion``. ``roost verify`` reads it to tell a deletion
    from tampering.
    """

    facts = PLAIN

    project_id: str
    """The project whose events were deleted."""
    events: int
    """How many events the project held (its stream's last position)."""
    head_hash: str
    """``hash`` of the project's last event when it was deleted."""
    checkpoint_index: int = 0
    """Index of the project's last checkpoint (0: it had none)."""
    checkpoint_mac: str = ""
    """``mac`` of that checkpoint, the one its anchor named ("" when none)."""
    deleted_at: str
    """When (UTC ISO 8601 with milliseconds)."""
    deleted_by: str = ""
    """Who asked, as the client said (``user@host``)."""
    key_id: str = ""
    """First 16 hex digits of the SHA-256 of the key that made ``mac``."""
    mac: str = ""
    """HMAC-SHA256 (hex) over every other field, with the journal key ("" unsealed)."""


class McpServerStarted(Event, frozen=True, kw_only=True, tag="mcp.server_started"):
    """An external MCP server (``mcp_servers``) was started and initialized for tool calls."""

    facts = PLAIN

    server: str
    """The server's name in ``mcp_servers``."""
    transport: str = "stdio"
    """``stdio`` (a sandboxed process) or ``http`` (streamable HTTP)."""
    call_id: str | None = None
    """The call that started it."""
    start_ms: int = 0
    """How long the start took; not charged to the call's (or its workflow's) timeout."""


class McpServerExited(Event, frozen=True, kw_only=True, tag="mcp.server_exited"):
    """An external MCP server stopped answering (its process exited or the connection broke)."""

    facts = PLAIN

    server: str
    """The server's name in ``mcp_servers``."""
    reason: str = "connection_closed"
    """Why it is gone: ``connection_closed``, ``start_failed``, ``view_changed`` (stopped to
    be started again with a fresh view: a sensitive or protected file changed)."""
    detail: str = ""
    """The error seen, shortened."""
    call_id: str | None = None
    """The call that noticed it."""


class McpServerRestarted(Event, frozen=True, kw_only=True, tag="mcp.server_restarted"):
    """An external MCP server that had exited was started again."""

    facts = PLAIN

    server: str
    """The server's name in ``mcp_servers``."""
    attempt: int = 1
    """Restarts so far for this server in this ToolRunner (bounded)."""
    call_id: str | None = None
    """The call that restarted it."""
    start_ms: int = 0
    """How long the start took; not charged to the call's (or its workflow's) timeout."""


class A2aTaskUpdated(Event, frozen=True, kw_only=True, tag="a2a.task_updated"):
    """A remote A2A task a call delegated to (``a2a.<agent>.send``) was seen in a new state.

    One per state the call sees (``submitted``, ``working``, ``completed``, ...), one when
    Roost asks the agent to cancel it (``cancel_requested``) and one with the agent's answer.
    Appended with the call's end (``elapsed_ms`` says when each was seen); a signal, so it is
    recorded also for a call cancelled while it ran.
    """

    facts = EventFacts(signal=True, describe=d.a2a_task)

    agent: str
    """The agent's name in ``a2a_agents``."""
    task_id: str
    """The remote task's id (the agent's)."""
    context_id: str = ""
    """The remote context id: pass it to ``a2a.<agent>.send`` to continue that conversation."""
    state: str = ""
    """A2A task state (``working``, ``completed``, ...), ``cancel_requested``/``cancel_failed``."""
    detail: str = ""
    """Why a cancel was asked (``timeout``, ``conversation_cancelled``) or what it met."""
    call_id: str | None = None
    """The delegating call."""
    elapsed_ms: int = 0
    """When the call saw it, in ms since the call started (the event is appended later)."""


PAYLOAD_TYPES: dict[str, type[Event]] = {
    cls.__struct_config__.tag: cls  # type: ignore[misc]
    for cls in (
        ProjectStarted,
        ProjectStopped,
        ProjectAssetsLoaded,
        ProjectAssetsReloaded,
        ConversationStarted,
        ConversationStopped,
        UserMessage,
        LlmStarted,
        AssistantDelta,
        ToolRequested,
        ToolApprovalRequested,
        ToolApproved,
        ToolRejected,
        ToolStarted,
        ToolCompleted,
        ToolFailed,
        ToolCancelled,
        AssistantMessage,
        LlmCompleted,
        LlmFailed,
        LlmRetried,
        LlmBreakerChanged,
        BudgetExceeded,
        ConversationCancel,
        ConversationResume,
        PolicyAllowed,
        PolicyDenied,
        ToolTimeout,
        ToolChildProcessesTerminated,
        ToolChanges,
        SecuritySandboxViolation,
        SecurityLeftoverQuarantined,
        SecuritySandboxExceptionUsed,
        SecuritySensitivePathDenied,
        SecurityNetworkDenied,
        SecurityEnvDenied,
        SecurityProtocolDenied,
        SecuritySensitiveArtifactDetected,
        SecurityRepeatedTimeoutFailures,
        SecurityCommandBlocked,
        ActorCrashed,
        ActorRestarted,
        ActorEscalated,
        ActorMailboxOverflow,
        AlertDispatched,
        AlertFailed,
        JournalCheckpoint,
        JournalProjectDeleted,
        McpServerStarted,
        McpServerExited,
        McpServerRestarted,
        A2aTaskUpdated,
    )
}
"""Every event type name mapped to its payload Struct."""

SIGNAL_TYPES: frozenset[str] = frozenset(
    name for name, cls in PAYLOAD_TYPES.items() if cls.facts.signal
)
"""Event types that are signals (``source: signal`` in incident timelines)."""

TERMINAL_TOOL_TYPES: frozenset[str] = frozenset(
    name for name, cls in PAYLOAD_TYPES.items() if "tool_call" in cls.facts.closes
)
"""The event types that close a ``tool.requested``."""


def facts_of(event_type: str) -> EventFacts:
    """The facts of ``event_type``, as its payload class declares them.

    A type the catalog does not know (a newer writer's) has a security signal's facts when
    it is a ``security.*`` one, else ``PLAIN``.
    """
    cls = PAYLOAD_TYPES.get(event_type)
    if cls is not None:
        return cls.facts
    return SECURITY_SIGNAL if event_type.startswith("security.") else PLAIN


def payload_to_data(payload: Event) -> dict[str, Any]:
    """Return the wire ``data`` of a payload: its fields without the ``type`` tag."""
    data: dict[str, Any] = msgspec.to_builtins(payload)
    data.pop("type", None)
    return data


def validate_data(event_type: str, data: dict[str, Any]) -> Event:
    """Decode ``data`` as the payload of ``event_type``.

    Raises ``KeyError`` for an unknown type and ``msgspec.ValidationError`` when a field
    has the wrong type or a required field is missing. Unknown extra fields are kept out
    of the typed payload but not rejected, so newer writers stay readable.
    """
    cls = PAYLOAD_TYPES[event_type]
    return msgspec.convert(data, cls)


def decode_data(event_type: str, data: Any) -> Event | None:
    """The typed payload of an event's ``data``, for code that branches on what it says.

    ``decode_data(event.type, event.data)`` for an envelope, the same with the ``type`` and
    ``data`` of a wire event. Readers ``match`` on the result (``case ToolFailed(reason=r)``)
    instead of comparing type strings and reading ``data`` keys. ``None`` when it is not one
    this catalog can read: a type it does not know (a newer writer's), or ``data`` whose
    field has the wrong type or that lacks a required field (never written by Roost, which
    builds every event from its payload). Readers fold such an event as one they do not
    know, so a projection or a report never fails on it; :func:`validate_data` is the strict
    form that raises. Unknown extra fields are left out; the stored ``data`` is not changed.
    msgspec keeps each payload type's decoding plan cached on the type.
    """
    cls = PAYLOAD_TYPES.get(event_type)
    if cls is None:
        return None
    try:
        return msgspec.convert(data, cls)
    except msgspec.ValidationError:
        return None


def type_names(*payloads: type[Event]) -> frozenset[str]:
    """The type names of ``payloads``: what a reader checks before it decodes an event.

    A fold that ``match``es on a few payload types skips every other event without the
    cost of :func:`decode_data` (``if event.type in READS: match decode_data(...)``).
    """
    return frozenset(cls.__struct_config__.tag for cls in payloads)  # type: ignore[misc]
