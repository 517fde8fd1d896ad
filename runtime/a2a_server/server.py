"""The HTTP server of ``roost a2a serve``: the A2A SDK's routes and request handler.

:func:`a2a_app` assembles the SDK's parts around :class:`~runtime.a2a_server.agent.RoostAgent`:

- ``create_agent_card_routes``: the card at ``/.well-known/agent-card.json``, rebuilt per
  request from the daemon's tool listing (a reloaded ``.roost`` asset shows at once);
- ``create_jsonrpc_routes`` at ``/``: the 1.x methods (``SendMessage``,
  ``SendStreamingMessage``, ``GetTask``, ``ListTasks``, ``CancelTask``, ``SubscribeToTask``)
  and, through the SDK's compatibility layer, the 0.3 ones (``message/send``,
  ``message/stream``, ``tasks/get``, ``tasks/cancel``, ``tasks/resubscribe``);
- :class:`RoostRequestHandler` (the SDK's default handler) with :class:`RoostTaskStore` and
  :class:`RoostContextBuilder` (context and task ids, ``runtime.a2a_server.mapping``);
  ``GetTask`` answers from the journal; ``CancelTask`` of a task no turn of this server
  runs (a server started again) is ``conversation.cancel`` too.

Every request passes two gates first: the peer check of ``roost mcp serve --http``
(:class:`~runtime.mcp_server.loopback.SameUserOnly`) and :class:`ProtocolGate` (the Host
and Origin headers name loopback, and the daemon says ``a2a`` is in the project's
``protocol_allowlist``; when not it journals ``security.protocol_denied`` and the request
is refused ``403 protocol_denied``).
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import urlsplit

from a2a.server.agent_execution import SimpleRequestContextBuilder
from a2a.server.context import ServerCallContext
from a2a.server.id_generator import IDGenerator, IDGeneratorContext
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskStore
from a2a.types import (
    AgentCard,
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    ListTasksResponse,
    SendMessageRequest,
    Task,
    TaskNotCancelableError,
    TaskNotFoundError,
    TaskState,
)
from a2a.utils.errors import InvalidParamsError, UnsupportedOperationError
from a2a.utils.task import apply_history_length
from starlette.applications import Starlette

from runtime.a2a_server.agent import RoostAgent
from runtime.a2a_server.mapping import agent_card, conversation_of, new_task_id
from runtime.errors import RoostError
from runtime.mcp_server.loopback import SameUserOnly

__all__ = [
    "SERVER_NAME",
    "ProtocolGate",
    "RoostContextBuilder",
    "RoostRequestHandler",
    "RoostTaskStore",
    "a2a_app",
    "card_of",
]

SERVER_NAME = "roost a2a serve"
"""The command, as refusals name it."""

_ENDED = frozenset(
    {
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_REJECTED,
    }
)
_LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1", "[::1]")

Scope = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Any, Any], Awaitable[None]]


def _version() -> str:
    try:
        return importlib.metadata.version("roost")
    except importlib.metadata.PackageNotFoundError:
        return "0"


async def card_of(agent: RoostAgent, url: str, description: str | None) -> AgentCard:
    """The project's card: its description, its commands and workflows as skills.

    The description is ``description``, else the README's first paragraph
    (``describe_project``), else a line naming the project.
    """
    tools = await agent.daemon.ask(lambda c: c.list_tools(agent.project_id))
    if description is None:
        readme = await agent.daemon.ask(lambda c: c.describe_project(agent.project_id))
        description = readme.get("description")
    text = description or f"The agent of the Roost project {agent.project_id}."
    return agent_card(
        project_id=agent.project_id, description=text, url=url, version=_version(), tools=tools
    )


class _TaskIds(IDGenerator):
    """Task ids ``CONTEXT.HEX12`` (``runtime.a2a_server.mapping.new_task_id``)."""

    def generate(self, context: IDGeneratorContext) -> str:
        return new_task_id(str(context.context_id))


class RoostContextBuilder(SimpleRequestContextBuilder):
    """Request contexts whose context id is chosen first, so the task id can carry it."""

    def __init__(self) -> None:
        super().__init__(task_id_generator=_TaskIds())

    async def build(
        self,
        context: ServerCallContext,
        params: SendMessageRequest | None = None,
        task_id: str | None = None,
        context_id: str | None = None,
        task: Task | None = None,
    ) -> Any:
        """The SDK's context, with a new context id when the message named none."""
        if not context_id and params is not None:
            context_id = params.message.context_id or str(uuid.uuid4())
        if context_id:
            try:
                conversation_of(context_id)
            except ValueError as e:
                raise InvalidParamsError(message=f"contextId {context_id!r}: {e}") from e
        return await super().build(context, params, task_id, context_id, task)


class RoostTaskStore(TaskStore):
    """The SDK's in-memory store for the tasks this server runs, the journal for the rest."""

    def __init__(self, agent: RoostAgent) -> None:
        self.agent = agent
        """Reads a task from the journal."""
        self.memory = InMemoryTaskStore()
        """The tasks of this server's run, as the SDK keeps them."""

    async def save(self, task: Task, context: ServerCallContext) -> None:
        """Keep the SDK's view of a task."""
        await self.memory.save(task, context)

    async def get(self, task_id: str, context: ServerCallContext) -> Task | None:
        """The SDK's view of a task this server started, else the journal's."""
        found: Task | None = await self.memory.get(task_id, context)
        if found is not None or task_id in self.agent.started:
            return found
        return await self.agent.journal_task(task_id)

    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> Any:
        """The tasks of this server's run."""
        listed: ListTasksResponse = await self.memory.list(params, context)
        return listed

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        """Forget the SDK's view of a task (the journal keeps the turn)."""
        await self.memory.delete(task_id, context)


class RoostRequestHandler(DefaultRequestHandler):
    """The SDK's handler; ``GetTask`` reads the journal, ``CancelTask`` reaches any turn."""

    def __init__(self, agent: RoostAgent, card: AgentCard) -> None:
        self.journal_store = RoostTaskStore(agent)
        """The task store (the SDK's memory, the journal behind it)."""
        super().__init__(
            agent_executor=agent,
            task_store=self.journal_store,
            agent_card=card,
            request_context_builder=RoostContextBuilder(),
        )
        self.agent = agent
        """The agent."""

    async def on_message_send(self, params: SendMessageRequest, context: ServerCallContext) -> Any:
        """``SendMessage`` of a new task (see :func:`_no_follow_up`)."""
        _no_follow_up(params)
        return await super().on_message_send(params, context)

    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Any, None]:
        """``SendStreamingMessage`` of a new task (see :func:`_no_follow_up`)."""
        _no_follow_up(params)
        async for event in super().on_message_send_stream(params, context):
            yield event

    async def on_get_task(self, params: GetTaskRequest, context: ServerCallContext) -> Task:
        """The task as the journal tells it (the SDK's view when the turn never started)."""
        task = await self.agent.journal_task(params.id)
        if task is None:
            task = await self.journal_store.memory.get(params.id, context)
        result: Task = apply_history_length(_found(task), params)
        return result

    async def on_cancel_task(self, params: CancelTaskRequest, context: ServerCallContext) -> Task:
        """``conversation.cancel``; through the SDK when this server runs the task."""
        if await self.journal_store.memory.get(params.id, context) is not None:
            cancelled: Task = await super().on_cancel_task(params, context)
            return cancelled
        task = _found(await self.agent.journal_task(params.id))
        if task.status.state in _ENDED:
            raise TaskNotCancelableError
        await self.agent.cancel_turn(params.id)
        after = await self.agent.journal_task(params.id)
        return after if after is not None else task


def _found(task: Task | None) -> Task:
    """The task found; ``TaskNotFoundError`` when neither the journal nor memory has it."""
    if task is None:
        raise TaskNotFoundError
    return task


def _no_follow_up(params: SendMessageRequest) -> None:
    """Refuse a message naming a task: a task is one turn, its input is ``roost approve``."""
    if params.message.task_id:
        raise UnsupportedOperationError(
            message=f"task {params.message.task_id}: a Roost task is one turn and takes no "
            "further input over A2A (a call awaiting approval is decided with `roost approve` "
            "or `roost reject`); send a new message, with the same contextId to continue "
            "the conversation"
        )


class ProtocolGate:
    """ASGI middleware: loopback Host and Origin, and ``a2a`` in ``protocol_allowlist``.

    A Host header naming anything but the loopback names (DNS rebinding) is ``421``; an
    Origin of another site (a web page posting to the port) is ``403``; then the daemon
    is asked (``check_protocol``), which journals ``security.protocol_denied`` when the
    project's allowlist lacks ``a2a``: ``403 protocol_denied``.
    """

    def __init__(self, app: ASGIApp, agent: RoostAgent) -> None:
        self.app = app
        self.agent = agent

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        """Refuse what may not reach the project's agent; pass the rest on."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        host = urlsplit("//" + headers.get("host", "")).hostname or ""
        origin = headers.get("origin")
        if host not in _LOOPBACK_NAMES:
            await _refuse(send, 421, "invalid_host", "the Host header must name loopback")
            return
        if origin is not None and (urlsplit(origin).hostname or "") not in _LOOPBACK_NAMES:
            await _refuse(send, 403, "invalid_origin", "requests from web pages are refused")
            return
        operation = f"{scope.get('method', 'GET')} {scope.get('path', '/')}"
        project = self.agent.project_id
        try:
            verdict = await self.agent.daemon.ask(
                lambda c: c.check_protocol(project, "a2a", operation)
            )
        except RoostError as e:
            await _refuse(send, 503, e.code, e.message)
            return
        if not verdict.get("allowed"):
            await _refuse(
                send,
                403,
                "protocol_denied",
                f"project {project} does not allow a2a (protocol_allowlist); the refusal is "
                "journaled as security.protocol_denied",
            )
            return
        await self.app(scope, receive, send)


async def _refuse(send: Any, status: int, code: str, message: str) -> None:
    body = json.dumps({"error": {"code": code, "message": message}}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json")],
        }
    )
    await send({"type": "http.response.body", "body": body})


def a2a_app(agent: RoostAgent, card: AgentCard, url: str, description: str | None) -> Any:
    """The ASGI app: the peer check, the gate, then the SDK's card and JSON-RPC routes."""
    handler = RoostRequestHandler(agent, card)

    async def current_card(_served: AgentCard) -> AgentCard:
        return await card_of(agent, url, description)

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await handler.aclose()

    routes = [
        *create_agent_card_routes(card, card_modifier=current_card),
        *create_jsonrpc_routes(handler, "/", enable_v0_3_compat=True),
    ]
    app = Starlette(routes=routes, lifespan=lifespan)
    return SameUserOnly(ProtocolGate(app, agent), name=SERVER_NAME)
