"""The agent behind ``roost a2a serve``: A2A tasks run as turns of the daemon's conversations.

:class:`RoostAgent` is the SDK's ``AgentExecutor`` over :class:`runtime.client.Client`
connections (a :class:`~runtime.client.ClientPool`; the blocking client runs on worker
threads):

- ``execute``: start the context's conversation on demand (resume it when it was
  cancelled), send the message as ``user.message`` with the task id as correlation id,
  then follow the conversation's committed events (``subscribe``) and publish the task's
  updates with the SDK's ``TaskUpdater``: ``assistant.delta`` chunks and each assistant
  message as the ``response`` artifact, ``input-required`` while a call awaits approval
  (``roost approve`` / ``roost reject`` decide it; the task goes on), then ``completed``,
  ``failed`` or ``canceled`` when the turn ends.
- ``cancel``: ``conversation.cancel`` (correlated to the task); the turn's end, which the
  cancel commits, ends the task as ``canceled``.
- :meth:`RoostAgent.journal_task`: a task read back from the journal (``GetTask``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import anyio
import anyio.to_thread
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types import Message, Part, Task, TaskState, TaskStatus
from google.protobuf.json_format import MessageToDict

from events.view_types import TimelineEvent
from runtime.a2a_server.mapping import (
    RESPONSE_ARTIFACT,
    TaskProgress,
    agent_message,
    parse_task_id,
    task_from_entries,
)
from runtime.client import Client, ClientPool
from runtime.errors import ConversationAlreadyStartedError, ConversationNotFoundError, RoostError

__all__ = ["CANCEL_WAIT_S", "RoostAgent"]

CANCEL_WAIT_S = 60.0
"""How long ``cancel`` waits for the cancelled turn's end to reach the task."""


def _next_event(stream: Iterator[TimelineEvent]) -> TimelineEvent | None:
    return next(stream, None)


class RoostAgent(AgentExecutor):
    """The agent of one project: each A2A task is one turn of a conversation."""

    def __init__(self, daemon: ClientPool, project_id: str) -> None:
        self.daemon = daemon
        """The daemon's connections."""
        self.project_id = project_id
        """The project served."""
        self.started: set[str] = set()
        """The tasks this server started (the SDK keeps them; the journal has the others)."""
        self._running: dict[str, anyio.Event] = {}

    # --- the journal ------------------------------------------------------------------------

    async def journal_task(self, task_id: str) -> Task | None:
        """The task ``task_id`` as the journal tells it, or None when it has no such turn."""
        parsed = parse_task_id(task_id)
        if parsed is None:
            return None
        context_id, conversation = parsed
        try:
            timeline = await self.daemon.ask(
                lambda c: c.incident_timeline(
                    self.project_id, conversation, limit=500, correlation_id=task_id
                )
            )
            entries = list(timeline.get("entries") or [])
            if int(timeline.get("total_entries") or 0) > len(entries):  # a turn past 500
                entries = list(
                    await self.daemon.ask(
                        lambda c: c.get_projection(self.project_id, conversation, "timeline")
                    )
                )
        except ConversationNotFoundError:
            return None
        return task_from_entries(task_id, context_id, self.project_id, entries)

    async def cancel_turn(self, task_id: str) -> None:
        """``conversation.cancel`` in the task's conversation, correlated to the task."""
        parsed = parse_task_id(task_id)
        if parsed is None:
            return
        conversation = parsed[1]
        await self.daemon.ask(
            lambda c: c.cancel(
                self.project_id, conversation, correlation_id=task_id, reason="a2a CancelTask"
            )
        )

    # --- AgentExecutor ------------------------------------------------------------------------

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Run the message as one turn; publish the task's updates until the turn ends."""
        task_id, context_id = str(context.task_id), str(context.context_id)
        parsed = parse_task_id(task_id)
        updater = TaskUpdater(event_queue, task_id, context_id)
        conversation = f"a2a-{context_id}" if parsed is None else parsed[1]
        metadata = {"roost": {"project_id": self.project_id, "conversation_id": conversation}}
        task = Task(
            id=task_id,
            context_id=context_id,
            status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
            history=[context.message] if context.message is not None else [],
        )
        task.metadata.update(metadata)
        self.started.add(task_id)
        done = self._running[task_id] = anyio.Event()
        try:
            try:
                seq = await self._send(context, conversation, task_id)
            except RoostError as e:
                task.status.state = TaskState.TASK_STATE_FAILED
                task.status.message.CopyFrom(
                    agent_message(
                        f"{e.code}: {e.message}",
                        task_id=task_id,
                        context_id=context_id,
                        message_id=f"{task_id}:status",
                        metadata=None,
                    )
                )
                await event_queue.enqueue_event(task)
                return
            await event_queue.enqueue_event(task)
            await self._follow(updater, conversation, task_id, seq)
        finally:
            done.set()
            self._running.pop(task_id, None)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """``conversation.cancel``; the running turn then ends the task as ``canceled``."""
        task_id = str(context.task_id)
        await self.cancel_turn(task_id)
        running = self._running.get(task_id)
        if running is not None:
            with anyio.move_on_after(CANCEL_WAIT_S):
                await running.wait()
            return
        await TaskUpdater(event_queue, task_id, str(context.context_id)).cancel()

    # --- steps ----------------------------------------------------------------------------

    async def _send(self, context: RequestContext, conversation: str, task_id: str) -> int:
        """Start (or resume) the conversation and send the message; the ack's ``seq``."""
        project = self.project_id

        def started(client: Client) -> None:
            try:
                client.start_conversation(project, conversation)
            except ConversationAlreadyStartedError:
                status = client.get_projection(project, conversation, "diagnostics")
                if status.get("status") == "cancelled":
                    client.resume(project, conversation)

        await self.daemon.ask(started)
        data: dict[str, Any] = {"content": context.get_user_input()}
        llm = _directives(context)
        if llm is not None:
            data["llm"] = llm
        event = {"type": "user.message", "data": data, "correlation_id": task_id}
        ack = await self.daemon.ask(lambda c: c.send_event(project, conversation, event))
        return int(ack["seq"])

    async def _follow(
        self, updater: TaskUpdater, conversation: str, task_id: str, seq: int
    ) -> None:
        """Publish the turn's updates, from its ``user.message`` (``seq``) to its end."""
        turn = TaskProgress(project_id=self.project_id, conversation_id=conversation)
        stream = await self.daemon.ask(
            lambda c: c.subscribe(self.project_id, conversation, after_seq=seq - 1)
        )
        own_thread = anyio.CapacityLimiter(1)  # a turn may wait for approval for hours
        streaming = False
        try:
            while True:
                event = await anyio.to_thread.run_sync(
                    _next_event, stream, limiter=own_thread, abandon_on_cancel=True
                )  # on cancel, ``finally`` closes the stream, which ends the thread
                if event is None:
                    raise RoostError(f"the daemon ended the event stream of task {task_id}")
                if event.get("correlation_id") != task_id:
                    continue
                chunk, data = _ANSWER_CHUNKS.get(event["type"]), event.get("data") or {}
                if chunk is not None and data.get("content"):
                    await updater.add_artifact(
                        [Part(text=str(data["content"]))],
                        artifact_id=RESPONSE_ARTIFACT,
                        name="response",
                        append=streaming and chunk,
                    )
                    streaming = chunk
                state = turn.apply(event)
                if state is not None and await self._publish(updater, turn, state, event):
                    return
        finally:
            stream.close()

    async def _publish(
        self, updater: TaskUpdater, turn: TaskProgress, state: int, event: TimelineEvent
    ) -> bool:
        """Publish the task's new ``state``; True when it is the last."""
        text = turn.status_text()
        message = None
        if text:
            message = updater.new_agent_message(
                [Part(text=text)], metadata={"event_id": event.get("event_id")}
            )
        publish, last = _UPDATES[state]
        await publish(updater, message)
        return last


_ANSWER_CHUNKS: dict[str, bool] = {"assistant.delta": True, "assistant.message": False}
"""The events whose content goes to the ``response`` artifact, and whether it is a streamed
chunk: a delta appends to the chunks before it, a whole message replaces them."""

_UPDATES: dict[int, tuple[Callable[[TaskUpdater, Message | None], Awaitable[None]], bool]] = {
    TaskState.TASK_STATE_INPUT_REQUIRED: (TaskUpdater.requires_input, False),
    TaskState.TASK_STATE_WORKING: (TaskUpdater.start_work, False),
    TaskState.TASK_STATE_COMPLETED: (TaskUpdater.complete, True),
    TaskState.TASK_STATE_CANCELED: (TaskUpdater.cancel, True),
    TaskState.TASK_STATE_FAILED: (TaskUpdater.failed, True),
}
"""How each state a turn moves to (``TaskProgress.apply``) is published, and whether it is
the task's last."""


def _directives(context: RequestContext) -> dict[str, Any] | None:
    """``data.llm`` for the deterministic model, from the request's ``roost.llm`` metadata."""
    found: Any = None
    with contextlib.suppress(AttributeError, TypeError):
        found = (context.metadata.get("roost") or {}).get("llm")
    if found is None and context.message is not None:
        meta = MessageToDict(context.message.metadata)
        found = (meta.get("roost") or {}).get("llm") if isinstance(meta, dict) else None
    return found if isinstance(found, dict) else None
