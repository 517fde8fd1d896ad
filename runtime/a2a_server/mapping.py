"""The plain core of ``roost a2a serve``: A2A ids and shapes to Roost's and back, no I/O.

- Ids: an A2A context is the conversation ``a2a-CONTEXT`` (:func:`conversation_of`); a task
  is one turn in it, its id ``CONTEXT.HEX12`` (:func:`new_task_id`), which is also the
  turn's correlation id, so ``roost timeline P a2a-CONTEXT --correlation-id TASK`` shows it
  and :func:`parse_task_id` finds the conversation again from the task id alone.
- The agent card (:func:`agent_card`): the project, its ``.roost`` commands and workflows
  as skills (from ``list_tools``), streaming, the URL served.
- A task's journal (:func:`task_from_entries`): the incident timeline entries of its
  correlation folded into an A2A ``Task`` (state, the user's message, the answer as the
  ``response`` artifact), which is what ``GetTask`` answers.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Artifact,
    Message,
    Part,
    Role,
    Task,
    TaskState,
    TaskStatus,
)
from google.protobuf.timestamp_pb2 import Timestamp

__all__ = [
    "CONTEXT_ID",
    "CONVERSATION_PREFIX",
    "RESPONSE_ARTIFACT",
    "TURN_END_TYPES",
    "TaskProgress",
    "agent_card",
    "agent_message",
    "approval_text",
    "conversation_of",
    "new_task_id",
    "parse_task_id",
    "skills_of",
    "task_from_entries",
    "timestamp",
]

CONVERSATION_PREFIX = "a2a-"
"""The conversation of context ``C`` is ``a2a-C``."""
CONTEXT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,59}")
"""The context ids this server takes (``a2a-`` + it is a conversation id)."""
RESPONSE_ARTIFACT = "response"
"""The id of the artifact holding a task's answer (the turn's last assistant message)."""
TURN_END_TYPES = frozenset({"llm.completed", "llm.failed", "budget.exceeded"})
"""Events that end a turn (``events.conversation_fold``)."""

_TASK_SUFFIX = re.compile(r"[0-9a-f]{12}")


def conversation_of(context_id: str) -> str:
    """The conversation of an A2A context; ``ValueError`` for an id of another shape."""
    if not CONTEXT_ID.fullmatch(context_id):
        raise ValueError(
            "a context id is 1-60 letters, digits, '.', '_' or '-', starting with a letter or "
            "digit (leave it out to start a new context)"
        )
    return CONVERSATION_PREFIX + context_id


def new_task_id(context_id: str) -> str:
    """A fresh task id in ``context_id``: ``CONTEXT.`` + 12 hex digits."""
    return f"{context_id}.{secrets.token_hex(6)}"


def parse_task_id(task_id: str) -> tuple[str, str] | None:
    """``(context_id, conversation_id)`` of a task id this server made, else None."""
    context_id, dot, suffix = task_id.rpartition(".")
    if not dot or not _TASK_SUFFIX.fullmatch(suffix) or not CONTEXT_ID.fullmatch(context_id):
        return None
    return context_id, CONVERSATION_PREFIX + context_id


# --- the agent card ------------------------------------------------------------------------


def skills_of(tools: Iterable[dict[str, Any]]) -> list[AgentSkill]:
    """The project's ``.roost`` commands and workflows (``list_tools`` rows) as skills."""
    skills: list[AgentSkill] = []
    for tool in tools:
        name = str(tool.get("name", ""))
        for prefix, tag in (("command.run.", "command"), ("workflow.run.", "workflow")):
            if name.startswith(prefix):
                skills.append(
                    AgentSkill(
                        id=name,
                        name=name.removeprefix(prefix),
                        description=str(tool.get("description") or name),
                        tags=["roost", tag],
                    )
                )
    return sorted(skills, key=lambda s: s.id)


def agent_card(
    *, project_id: str, description: str, url: str, version: str, tools: Iterable[dict[str, Any]]
) -> AgentCard:
    """The card of project ``project_id`` served at ``url`` (JSON-RPC, streaming)."""
    skills = skills_of(tools)
    if not skills:  # the protocol wants one: the project's agent itself
        skills = [
            AgentSkill(
                id="conversation",
                name="conversation",
                description=f"Talk to the agent of the Roost project {project_id}.",
                tags=["roost"],
            )
        ]
    return AgentCard(
        name=project_id,
        description=description,
        version=version,
        supported_interfaces=[
            AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0"),
            AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="0.3"),
        ],
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=skills,
    )


# --- messages ------------------------------------------------------------------------------


def timestamp(at: str | None) -> Timestamp:
    """A protobuf timestamp of an event's ``at`` (ISO 8601, ``Z``); now when None."""
    stamp = Timestamp()
    if at:
        stamp.FromJsonString(at)
    else:
        stamp.GetCurrentTime()
    return stamp


def agent_message(
    text: str, *, task_id: str, context_id: str, message_id: str, metadata: dict[str, Any] | None
) -> Message:
    """An agent message of the task (``message_id``: the event's id, so replays agree)."""
    message = Message(
        role=Role.ROLE_AGENT,
        message_id=message_id,
        task_id=task_id,
        context_id=context_id,
        parts=[Part(text=text)],
    )
    if metadata:
        message.metadata.update(metadata)
    return message


def approval_text(project_id: str, conversation_id: str, call_id: str, tool: str) -> str:
    """What an ``input-required`` status says: which call waits and how to decide it."""
    return (
        f"{tool} ({call_id}) awaits approval: `roost approve {project_id} {conversation_id} "
        f"{call_id}` or `roost reject {project_id} {conversation_id} {call_id}`"
    )


# --- a task from its journal ---------------------------------------------------------------


@dataclass
class TaskProgress:
    """An A2A task's progress: its turn's state, folded from its events (live or journal)."""

    project_id: str
    """The project."""
    conversation_id: str
    """The conversation (``a2a-CONTEXT``)."""
    state: int = TaskState.TASK_STATE_SUBMITTED
    """The A2A task state."""
    answer: str | None = None
    """The last assistant message's text."""
    answer_id: str | None = None
    """That message's event id."""
    reason: str | None = None
    """Why it failed or was cancelled."""
    awaiting: dict[str, str] = field(default_factory=dict)
    """Calls awaiting approval: call id → tool name."""
    names: dict[str, str] = field(default_factory=dict)
    """The tool of each call requested: call id → tool name."""
    last_at: str | None = None
    """When the last event was recorded."""

    def apply(self, event: Mapping[str, Any]) -> int | None:
        """Fold one event (a wire event or timeline entry); the new state if it changed."""
        kind, data = str(event.get("type")), event.get("data") or {}
        self.last_at = event.get("at") or self.last_at
        before = self.state
        _STEPS.get(kind, TaskProgress._progress)(self, event, data)
        return self.state if self.state != before else None

    def _progress(self, event: Mapping[str, Any], data: Mapping[str, Any]) -> None:
        """A turn not ended yet works, or waits for input while a call awaits approval."""
        if self.state not in _ENDED:
            self.state = (
                TaskState.TASK_STATE_INPUT_REQUIRED
                if self.awaiting
                else TaskState.TASK_STATE_WORKING
            )

    def _asked(self, event: Mapping[str, Any], data: Mapping[str, Any]) -> None:
        self.state = TaskState.TASK_STATE_WORKING

    def _answered(self, event: Mapping[str, Any], data: Mapping[str, Any]) -> None:
        if data.get("content"):
            self.answer, self.answer_id = str(data["content"]), str(event.get("event_id"))
        self._progress(event, data)

    def _requested(self, event: Mapping[str, Any], data: Mapping[str, Any]) -> None:
        self.names[str(data.get("call_id"))] = str(data.get("name"))
        self._progress(event, data)

    def _awaits(self, event: Mapping[str, Any], data: Mapping[str, Any]) -> None:
        call_id = str(data.get("call_id"))
        self.awaiting[call_id] = self.names.get(call_id, "a tool call")
        self._progress(event, data)

    def _decided(self, event: Mapping[str, Any], data: Mapping[str, Any]) -> None:
        self.awaiting.pop(str(data.get("call_id")), None)
        self._progress(event, data)

    def _completed(self, event: Mapping[str, Any], data: Mapping[str, Any]) -> None:
        self.state = TaskState.TASK_STATE_COMPLETED

    def _failed(self, event: Mapping[str, Any], data: Mapping[str, Any]) -> None:
        self.reason = str(data.get("reason") or "llm_failed")
        cancelled = self.reason in ("conversation_cancelled", "conversation_stopped")
        self.state = TaskState.TASK_STATE_CANCELED if cancelled else TaskState.TASK_STATE_FAILED

    def _over_budget(self, event: Mapping[str, Any], data: Mapping[str, Any]) -> None:
        self.reason = f"budget_exceeded: {data.get('budget')}"
        self.state = TaskState.TASK_STATE_FAILED

    def status_text(self) -> str | None:
        """The text of the current status's message, if it has one."""
        return _STATUS_TEXT.get(self.state, _no_text)(self)

    def _approval_text(self) -> str | None:
        if not self.awaiting:
            return None
        call_id, tool = next(iter(self.awaiting.items()))
        return approval_text(self.project_id, self.conversation_id, call_id, tool)


def _no_text(turn: TaskProgress) -> str | None:
    return None


_STEPS: dict[str, Callable[[TaskProgress, Mapping[str, Any], Mapping[str, Any]], None]] = {
    "user.message": TaskProgress._asked,
    "assistant.message": TaskProgress._answered,
    "tool.requested": TaskProgress._requested,
    "tool.approval_requested": TaskProgress._awaits,
    "tool.approved": TaskProgress._decided,
    "tool.rejected": TaskProgress._decided,
    "tool.cancelled": TaskProgress._decided,
    "tool.failed": TaskProgress._decided,
    "llm.completed": TaskProgress._completed,
    "llm.failed": TaskProgress._failed,
    "budget.exceeded": TaskProgress._over_budget,
}
"""How each kind of event moves a task (any other: :meth:`TaskProgress._progress`)."""

_STATUS_TEXT: dict[int, Callable[[TaskProgress], str | None]] = {
    TaskState.TASK_STATE_INPUT_REQUIRED: TaskProgress._approval_text,
    TaskState.TASK_STATE_COMPLETED: lambda turn: turn.answer,
    TaskState.TASK_STATE_FAILED: lambda turn: turn.reason,
    TaskState.TASK_STATE_CANCELED: lambda turn: turn.reason,
}
"""What the status message says in each state that has one."""

_ENDED = frozenset(
    {
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_CANCELED,
    }
)


def task_from_entries(
    task_id: str, context_id: str, project_id: str, entries: Iterable[Mapping[str, Any]]
) -> Task | None:
    """The task ``task_id`` from its correlation's timeline entries; None without its message."""
    conversation_id = CONVERSATION_PREFIX + context_id
    turn = TaskProgress(project_id=project_id, conversation_id=conversation_id)
    user: Mapping[str, Any] | None = None
    for entry in entries:
        if entry.get("correlation_id") != task_id:
            continue
        if entry.get("type") == "user.message" and user is None:
            user = entry
        turn.apply(entry)
    if user is None:
        return None
    metadata = {"project_id": project_id, "conversation_id": conversation_id}
    question = Message(
        role=Role.ROLE_USER,
        message_id=str(user.get("event_id")),
        task_id=task_id,
        context_id=context_id,
        parts=[Part(text=str((user.get("data") or {}).get("content", "")))],
    )
    status = TaskStatus(state=turn.state, timestamp=timestamp(turn.last_at))  # type: ignore[arg-type]
    text = turn.status_text()
    if text:
        status.message.CopyFrom(
            agent_message(
                text,
                task_id=task_id,
                context_id=context_id,
                message_id=f"{task_id}:status",
                metadata=None,
            )
        )
    task = Task(id=task_id, context_id=context_id, status=status, history=[question])
    task.metadata.update({"roost": metadata})
    if turn.answer is not None:
        task.artifacts.append(
            Artifact(
                artifact_id=RESPONSE_ARTIFACT,
                name="response",
                parts=[Part(text=turn.answer)],
            )
        )
    return task
