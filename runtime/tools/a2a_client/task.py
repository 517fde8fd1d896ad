"""One delegated A2A task, on the official ``a2a`` SDK: send, follow, cancel.

A call of ``a2a.<agent>.send`` sends one message to the agent with the SDK's client
(``ClientFactory`` over the agent card fetched at project start) and follows the task it
starts: over ``message/stream`` when the card says the agent streams, otherwise
``message/send`` with ``returnImmediately`` and ``tasks/get`` until the task ends. Either
way the task id is known as soon as the agent has made one, so a timeout or a cancelled
conversation can cancel the *remote* task (``tasks/cancel``, :func:`cancel_task`).

Every HTTP connection is made through :func:`runtime.guard.network.pinning.pinned_client`:
the egress policy judges every request and pins every connection to an address it checked.

:class:`Delegation` folds what the agent sends (task, status updates, artifact updates, or a
direct message) into the tool's result and records each state it sees as an
``a2a.task_updated`` signal in the call's ``signals``.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any, TypedDict

import httpx
from a2a.client import Client, ClientConfig, ClientFactory
from a2a.client.card_resolver import parse_agent_card
from a2a.types.a2a_pb2 import (
    AgentCard,
    Artifact,
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    Task,
    TaskState,
)
from a2a.utils.constants import TransportProtocol
from google.protobuf.json_format import MessageToDict

from events import catalog as ev
from runtime.errors import ToolError
from runtime.guard.network.egress import NetworkPolicy
from runtime.guard.network.pinning import pinned_client

__all__ = [
    "BINDINGS",
    "ENDED",
    "INTERRUPTED",
    "ON_PAYLOAD",
    "A2AArtifact",
    "A2AResult",
    "Delegation",
    "cancel_task",
    "card_from_json",
    "card_to_json",
    "open_client",
    "send_and_follow",
    "state_name",
]

ENDED: frozenset[str] = frozenset({"completed", "failed", "canceled", "rejected"})
"""Task states after which the task does nothing more."""
INTERRUPTED: frozenset[str] = frozenset({"input_required", "auth_required"})
"""Task states in which the agent waits for the caller: the call returns."""

_POLL_S = 0.25


def state_name(state: int) -> str:
    """``TASK_STATE_INPUT_REQUIRED`` → ``input_required``."""
    return str(TaskState.Name(state)).removeprefix("TASK_STATE_").lower()


def card_to_json(card: AgentCard) -> dict[str, object]:
    """The card as its JSON form (picklable, for the registry)."""
    data: dict[str, object] = MessageToDict(card)
    return data


def card_from_json(data: Mapping[str, Any]) -> AgentCard:
    """The card back from :func:`card_to_json`'s form."""
    return parse_agent_card(dict(data))


class A2AArtifact(TypedDict):
    """One artifact of a remote task, as an ``a2a.<agent>`` tool returns it."""

    artifact_id: str
    """The artifact's id."""
    name: str
    """Its name (empty when it has none)."""
    parts: list[dict[str, object]]
    """Its parts in their protobuf JSON form."""


class A2AResult(TypedDict):
    """What an ``a2a.<agent>`` tool returns."""

    agent: str
    """The agent's configured name."""
    task_id: str | None
    """The remote task, if one was created."""
    context_id: str | None
    """Its context, to continue the conversation."""
    state: str
    """The task's last state (``completed``, ``input_required``, ...)."""
    text: str
    """The answer's text: the artifacts', else the reply's, else the status message's."""
    artifacts: list[A2AArtifact]
    """Every artifact the task produced."""


def _parts(parts: Any) -> list[dict[str, object]]:
    return [MessageToDict(part) for part in parts]


def _text(parts: Any) -> str:
    return "\n".join(part.text for part in parts if part.HasField("text"))


class Delegation:
    """What one call has seen of its remote task; records each new state as a signal."""

    def __init__(self, agent: str, call_id: str, signals: list[ev.Event]) -> None:
        self.agent = agent
        self.call_id = call_id
        self.signals = signals
        self.task_id = ""
        """The remote task, once the agent made one."""
        self.context_id = ""
        """The remote context."""
        self.state = ""
        """The last state seen (``state_name``), or ``message`` for a direct reply."""
        self.status_text = ""
        """Text of the last status message (a question, a failure's reason)."""
        self.reply_text = ""
        """Text of a direct message reply (no task)."""
        self.artifacts: dict[str, Artifact] = {}
        self._started = time.monotonic()

    def note(self, state: str, detail: str = "") -> None:
        """Record ``state`` (a task state or Roost's own cancel step) as a signal."""
        self.signals.append(
            ev.A2aTaskUpdated(
                agent=self.agent,
                task_id=self.task_id,
                context_id=self.context_id,
                state=state,
                detail=detail,
                call_id=self.call_id,
                elapsed_ms=round((time.monotonic() - self._started) * 1000),
            )
        )

    def _see(self, task_id: str, context_id: str, state: int, message: Message | None) -> None:
        self.task_id = task_id or self.task_id
        self.context_id = context_id or self.context_id
        if message is not None and message.parts:
            self.status_text = _text(message.parts)
        name = state_name(state)
        if name not in ("unspecified", self.state):
            self.state = name
            self.note(name)

    def _artifact(self, artifact: Artifact, append: bool) -> None:
        known = self.artifacts.get(artifact.artifact_id)
        if append and known is not None:
            known.parts.extend(artifact.parts)
        else:
            copy = Artifact()
            copy.CopyFrom(artifact)
            self.artifacts[artifact.artifact_id] = copy

    def absorb_task(self, task: Task) -> None:
        """Take in a whole task (the first answer, or a ``tasks/get``)."""
        for artifact in task.artifacts:
            self._artifact(artifact, append=False)
        message = task.status.message if task.status.HasField("message") else None
        self._see(task.id, task.context_id, task.status.state, message)

    def absorb(self, response: StreamResponse) -> None:
        """Take in one answer of the agent, by the kind of its payload (:data:`ON_PAYLOAD`)."""
        ON_PAYLOAD[response.WhichOneof("payload")](self, response)

    def _status_update(self, response: StreamResponse) -> None:
        update = response.status_update
        status = update.status
        message = status.message if status.HasField("message") else None
        self._see(update.task_id, update.context_id, status.state, message)

    def _artifact_update(self, response: StreamResponse) -> None:
        update = response.artifact_update
        self.task_id = update.task_id or self.task_id
        self.context_id = update.context_id or self.context_id
        self._artifact(update.artifact, append=update.append)

    def _message(self, response: StreamResponse) -> None:
        self.context_id = response.message.context_id or self.context_id
        self.reply_text = _text(response.message.parts)
        self.state = "message"

    @property
    def size(self) -> int:
        """Bytes taken in so far (artifacts, status and reply text): what the caps will see."""
        kept: int = sum(int(a.ByteSize()) for a in self.artifacts.values())
        return kept + len(self.status_text.encode()) + len(self.reply_text.encode())

    @property
    def waiting(self) -> bool:
        """Whether the task may still change (neither ended nor waiting for the caller)."""
        return self.state not in ENDED | INTERRUPTED | {"message"}

    def result(self) -> A2AResult:
        """The tool's result: ids, state, the answer's text and every artifact's parts."""
        artifacts: list[A2AArtifact] = [
            {"artifact_id": a.artifact_id, "name": a.name, "parts": _parts(a.parts)}
            for a in self.artifacts.values()
        ]
        text = "\n".join(t for t in (_text(a.parts) for a in self.artifacts.values()) if t)
        return {
            "agent": self.agent,
            "task_id": self.task_id or None,
            "context_id": self.context_id or None,
            "state": self.state,
            "text": text or self.reply_text or self.status_text,
            "artifacts": artifacts,
        }


ON_PAYLOAD: dict[str | None, Callable[[Delegation, StreamResponse], None]] = {
    None: lambda delegation, response: None,
    "task": lambda delegation, response: delegation.absorb_task(response.task),
    "status_update": Delegation._status_update,
    "artifact_update": Delegation._artifact_update,
    "message": Delegation._message,
}
"""How a delegation takes in each kind of ``StreamResponse`` payload (None: there is none)."""


BINDINGS: tuple[str, ...] = (TransportProtocol.JSONRPC, TransportProtocol.HTTP_JSON)
"""The A2A protocol bindings Roost speaks (both over the pinned HTTP client); not gRPC."""


def open_client(card: AgentCard, http: httpx.AsyncClient, *, streaming: bool) -> Client:
    """The SDK's client for ``card`` over ``http`` (the agent's preferred binding of ours).

    ``ValueError`` when the card offers none of :data:`BINDINGS`.
    """
    config = ClientConfig(
        httpx_client=http,
        streaming=streaming,
        polling=not streaming,
        supported_protocol_bindings=list(BINDINGS),
    )
    return ClientFactory(config).create(card)


async def send_and_follow(
    card: AgentCard,
    policy: NetworkPolicy,
    delegation: Delegation,
    args: Mapping[str, Any],
    *,
    timeout_s: float,
    max_bytes: int,
) -> None:
    """Send ``args['text']`` (continuing ``context_id`` / ``task_id`` when given); follow it.

    Stops reading with ``ToolError`` ``output_too_large`` once the agent has sent more than
    ``max_bytes`` (``tool_max_output_bytes``), so a runaway agent cannot fill the memory.
    """
    message = Message(
        message_id=str(uuid.uuid4()),
        role=Role.ROLE_USER,
        parts=[Part(text=str(args["text"]))],
    )
    for field in ("context_id", "task_id"):  # the conversation or the task it continues
        if args.get(field):
            setattr(message, field, str(args[field]))
    streaming = bool(card.capabilities.streaming)
    async with pinned_client(policy, timeout_s=timeout_s) as http:
        client = open_client(card, http, streaming=streaming)
        async for response in client.send_message(SendMessageRequest(message=message)):
            delegation.absorb(response)
            _bounded(delegation, max_bytes)
        while not streaming and delegation.task_id and delegation.waiting:
            await asyncio.sleep(_POLL_S)
            task = await client.get_task(GetTaskRequest(id=delegation.task_id))
            delegation.absorb_task(task)
            _bounded(delegation, max_bytes)


def _bounded(delegation: Delegation, max_bytes: int) -> None:
    size = delegation.size
    if size > max_bytes:
        raise ToolError(
            "output_too_large",
            f"A2A agent {delegation.agent} sent more than {max_bytes} bytes "
            "(tool_max_output_bytes); the rest was not read. Ask for less or raise the option",
            actual=size,
            max=max_bytes,
        )


async def cancel_task(
    card: AgentCard, policy: NetworkPolicy, task_id: str, timeout_s: float
) -> str:
    """Ask the agent to cancel ``task_id`` (``tasks/cancel``); return the state it answers."""
    async with pinned_client(policy, timeout_s=timeout_s) as http:
        client = open_client(card, http, streaming=False)
        task = await client.cancel_task(CancelTaskRequest(id=task_id))
        return state_name(task.status.state)
