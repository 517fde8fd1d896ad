"""A small A2A agent for the ``a2a_agents`` tests, built on the SDK's own server classes.

``python a2a_fixture_server.py MARKER_DIR PORT [INTERFACE_URL] [--no-streaming] [--rest]``
serves the agent card at
``/.well-known/agent-card.json`` and JSON-RPC at ``/`` on 127.0.0.1:PORT (an
``AgentExecutor`` behind the SDK's ``DefaultRequestHandler``, its Starlette routes under
uvicorn). The card advertises ``INTERFACE_URL`` as the JSON-RPC endpoint when given (a test
of where the client connects), ``http://127.0.0.1:PORT/`` otherwise, and streaming unless
``--no-streaming``. With ``--rest`` the agent speaks the HTTP+JSON binding (the SDK's REST
routes under ``/rest``) instead of JSON-RPC.

What the agent does depends on the message text:

- ``slow SECONDS``: works that long (cancellable), then completes;
- ``big N``: streams N artifact chunks of 1000 bytes, then works on for a minute;
- ``die``: exits the process in the middle of the task;
- ``ask``: asks for more input (``input-required``);
- anything else: completes with an artifact ``echo: TEXT``; a message that continues a
  context gets ``echo #N: TEXT`` (N the messages seen in that context).

Every JSON-RPC request appends ``rpc METHOD`` to ``MARKER_DIR/requests.log``, every card
fetch ``card``, a slow task ``start TASK_ID`` once it works, and every cancel the agent
receives ``cancel TASK_ID``, so a test can prove a request was (or was never) made and that
a remote task was cancelled.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import uvicorn
from a2a.helpers.proto_helpers import new_text_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import (
    create_agent_card_routes,
    create_jsonrpc_routes,
    create_rest_routes,
)
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Task,
    TaskState,
    TaskStatus,
)
from starlette.applications import Starlette

_ARGS = [a for a in sys.argv[1:] if not a.startswith("--")]
MARKERS = _ARGS[0]
PORT = int(_ARGS[1])
REST = "--rest" in sys.argv
STREAMING = "--no-streaming" not in sys.argv
INTERFACE = _ARGS[2] if len(_ARGS) > 2 else f"http://127.0.0.1:{PORT}/" + ("rest" if REST else "")
_SEEN: dict[str, int] = {}


def _mark(line: str) -> None:
    with open(os.path.join(MARKERS, "requests.log"), "a", encoding="utf-8") as f:
        f.write(line + "\n")


class FixtureAgent(AgentExecutor):
    """Echoes, works slowly, asks for input or dies, as the message text says."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        text = context.get_user_input().strip()
        task_id, context_id = str(context.task_id), str(context.context_id)
        if context.current_task is None:
            await event_queue.enqueue_event(
                Task(
                    id=task_id,
                    context_id=context_id,
                    status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
                    history=[context.message] if context.message else [],
                )
            )
        updater = TaskUpdater(event_queue, task_id, context_id)
        await updater.start_work()
        if text == "die":
            await asyncio.sleep(0.5)
            os._exit(3)
        if text == "ask":
            question = new_text_message("Which colour?", context_id=context_id, task_id=task_id)
            await updater.requires_input(question)
            return
        if text.startswith("big "):  # chunks of 1000 bytes, then works on
            for index in range(int(text.split()[1])):
                await updater.add_artifact(
                    [new_text_part("b" * 1000)], artifact_id="big", name="big", append=index > 0
                )
            await asyncio.sleep(60)
        if text.startswith("slow "):
            await asyncio.sleep(1.0)  # the caller has read the task's id by now
            _mark(f"start {task_id}")
            await asyncio.sleep(float(text.split()[1]))
            text = "slept"
        _SEEN[context_id] = _SEEN.get(context_id, 0) + 1
        count = _SEEN[context_id]
        answer = f"echo: {text}" if count == 1 else f"echo #{count}: {text}"
        await updater.add_artifact([new_text_part(answer)], name="answer")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        _mark(f"cancel {context.task_id}")
        updater = TaskUpdater(event_queue, str(context.task_id), str(context.context_id))
        await updater.cancel()


CARD = AgentCard(
    name="Fixture agent",
    description="Answers with an echo of what it is sent.",
    version="1.0.0",
    supported_interfaces=[
        AgentInterface(
            url=INTERFACE,
            protocol_binding="HTTP+JSON" if REST else "JSONRPC",
            protocol_version="1.0",
        )
    ],
    capabilities=AgentCapabilities(streaming=STREAMING),
    default_input_modes=["text/plain"],
    default_output_modes=["text/plain"],
    skills=[
        AgentSkill(
            id="echo",
            name="Echo",
            description="Repeats the message back.",
            tags=["test"],
        )
    ],
)

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


class Recorder:
    """ASGI middleware that logs each card fetch and each JSON-RPC method."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if scope["method"] == "GET":
            _mark("card")
            await self.app(scope, receive, send)
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        try:
            method = json.loads(body).get("method", "?")
        except (ValueError, AttributeError):
            method = "?"
        if REST:
            method = "REST:" + str(scope["path"])
        _mark(f"rpc {method}")
        sent = False

        async def replay() -> dict[str, Any]:
            nonlocal sent
            if sent:
                return await receive()
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)


def main() -> None:
    handler = DefaultRequestHandler(
        agent_executor=FixtureAgent(), task_store=InMemoryTaskStore(), agent_card=CARD
    )
    served = (
        create_rest_routes(handler, path_prefix="/rest")
        if REST
        else create_jsonrpc_routes(handler, "/")
    )
    routes = [*create_agent_card_routes(CARD), *served]
    app = Recorder(Starlette(routes=routes))
    uvicorn.run(app, host="127.0.0.1", port=PORT, log_level="warning")


if __name__ == "__main__":
    main()
