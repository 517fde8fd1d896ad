"""The ToolRunner actor: quotas, running tools, caps, scans, via the tool-call pipeline.

It holds a :class:`runtime.execution.pipeline.ToolPipeline` built from the registry the
Project built. A model's call arrives decided (``RunCall``): admit → execute → release. A
client's ``run_tool`` (``RunDirect``) is the whole pipeline: ``run(call, cancelled,
source="run_tool")``, or ``source="mcp"`` when ``roost mcp serve`` made the call.

File and asset tools run inline (they take milliseconds). Commands, HTTP fetches,
workflows and ``async`` calls run on worker threads; while any is in flight the actor
polls for finished ones every few milliseconds (Thespian delivers no messages from
threads). A cancelled call's thread is told to stop; whatever it returns is still sent,
and the conversation, which already closed the call, records only its signals (the
processes the cancel killed).
"""

from __future__ import annotations

import functools
import queue
import threading
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from thespian.actors import WakeupMessage

from actors.base import RoostActor, utc_now
from actors.messages import (
    AppendFailed,
    CallCancel,
    CallDone,
    DirectDone,
    PeerUpdate,
    Reply,
    RunCall,
    RunDirect,
    SetupRunner,
)
from events import catalog as ev
from events.envelope import format_at, new_call_id, new_correlation_id, new_event
from runtime.tools.base import CallSpec

if TYPE_CHECKING:
    from runtime.execution.pipeline import Source

__all__ = ["ToolRunnerActor"]

_POLL = timedelta(milliseconds=5)
_INLINE_PREFIXES = ("fs.", "asset.")


class ToolRunnerActor(RoostActor):
    """Runs allowed calls and answers with their terminal events."""

    kind = "toolrunner"
    parent_kind = "project"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.core: Any = None
        self.project_id = ""
        self.cancels: dict[str, threading.Event] = {}
        self.done: queue.Queue[tuple[Any, Any]] = queue.Queue()
        self.in_threads = 0
        self.polling = False

    def handle(self, message: Any, sender: Any) -> None:
        """Configure, run, cancel, or collect finished threads."""
        if isinstance(message, SetupRunner):
            self.announce(sender, "toolrunner")
            from runtime.execution.pipeline import ToolPipeline  # noqa: PLC0415

            self.project_id = message.project_id
            self.journal = message.journal
            self.alert_options = message.options
            self.core = ToolPipeline(
                message.project_id, message.root, message.options, message.registry
            )
        elif isinstance(message, RunCall):
            self._run(message.call, sender)
        elif isinstance(message, RunDirect):
            self._direct(message, sender)
        elif isinstance(message, CallCancel):
            for call_id in message.call_ids:
                flag = self.cancels.get(call_id)
                if flag is not None:
                    flag.set()
        elif isinstance(message, WakeupMessage):
            self.polling = False
            self._collect()
        elif isinstance(message, PeerUpdate) and message.journal is not None:
            self.journal = message.journal  # the journal was restarted
            self.resend_appends()

    def _run(self, call: CallSpec, sender: Any) -> None:
        refused = self.core.admit(call)
        if refused is not None:
            self.send(sender, CallDone(call_id=call.call_id, events=refused))
            return
        flag = self.cancels[call.call_id] = threading.Event()
        if call.name.startswith(_INLINE_PREFIXES) and call.run_mode == "sync":
            try:
                events = self.core.execute(call, flag)
            finally:
                self._release(call.call_id)
            self.send(sender, CallDone(call_id=call.call_id, events=events))
            return

        def work() -> None:
            try:
                events = self.core.execute(call, flag)
            except Exception as e:
                events = _crashed(call, e)
            self.done.put((call.call_id, (sender, CallDone(call_id=call.call_id, events=events))))

        self._spawn(work)

    def _direct(self, message: RunDirect, sender: Any) -> None:
        request = message.request
        meta = request.get("meta") or {}
        correlation = meta.get("correlation_id") or new_correlation_id()
        call = CallSpec(
            call_id=new_call_id(),
            name=str(request.get("name", "")),
            args=request.get("args") or {},
            conversation_id=message.conversation_id,
            correlation_id=correlation,
        )
        source: Source = "mcp" if meta.get("source") == "mcp" else "run_tool"
        flag = self.cancels[call.call_id] = threading.Event()

        def work() -> None:
            try:
                events, result = self.core.run(call, flag, source=source)
            except Exception as e:
                events = _crashed(call, e)
                result = self.core.result_of(events, call)
            recorded = _with_request(call, events, source)
            if message.conversation_id is not None:
                done = DirectDone(
                    events=recorded,
                    result=result,
                    correlation_id=correlation,
                    reply_to=message.reply_to,
                )
                self.done.put((call.call_id, (sender, done)))
            else:
                self.done.put(
                    (call.call_id, ("journal", (recorded, correlation, message.reply_to, result)))
                )

        self._spawn(work)

    def _spawn(self, work: Any) -> None:
        self.in_threads += 1
        threading.Thread(target=work, daemon=True).start()
        if not self.polling:
            self.polling = True
            self.wakeupAfter(_POLL)

    def _collect(self) -> None:
        while True:
            try:
                call_id, (target, payload) = self.done.get_nowait()
            except queue.Empty:
                break
            self.in_threads -= 1
            self._release(call_id)
            if target == "journal":
                events, correlation, reply_to, result = payload
                batch = [
                    new_event(
                        p,
                        project_id=self.project_id,
                        at=format_at(utc_now()),
                        correlation_id=correlation,
                    )
                    for p in events
                ]
                self.append(
                    batch,
                    then=functools.partial(self._answer_direct, reply_to, result),
                )
            else:
                self.send(target, payload)
        if self.in_threads > 0 and not self.polling:
            self.polling = True
            self.wakeupAfter(_POLL)

    def _answer_direct(self, reply_to: Any, result: Any, answer: Any) -> None:
        if isinstance(answer, AppendFailed):
            self.send(reply_to, Reply(ok=False, error=answer.error))
        else:
            self.send(reply_to, Reply(ok=True, result=result))

    def _release(self, call_id: str) -> None:
        self.cancels.pop(call_id, None)
        if self.core is not None:
            self.core.release(call_id)


def _with_request(call: CallSpec, events: list[ev.Event], source: str) -> list[ev.Event]:
    """A direct run's record: ``tool.requested`` (by ``source``), the decision, the rest."""
    requested = ev.ToolRequested(
        call_id=call.call_id, name=call.name, args=call.args, source=source
    )
    out: list[ev.Event] = [requested]
    started = False
    for payload in events:
        out.append(payload)
        if isinstance(payload, ev.PolicyAllowed) and not started:
            out.append(ev.ToolStarted(call_id=call.call_id, name=call.name))
            started = True
    return out


def _crashed(call: CallSpec, error: Exception) -> list[ev.Event]:
    """The terminal event of a call whose tool raised instead of returning."""
    reason = {"code": "tool_crashed", "message": str(error)}
    return [ev.ToolFailed(call_id=call.call_id, name=call.name, reason=reason)]
