"""The ToolRunner actor: quotas, running tools, caps, scans, via the tool-call pipeline.

It holds a :class:`runtime.execution.pipeline.ToolPipeline` built from the registry the
Project built; what a direct call is and records is ``runtime.execution.direct``'s. A
model's call arrives decided (``RunCall``): admit → execute → release. A
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
import threading
from collections.abc import Callable
from typing import Any

from thespian.actors import WakeupMessage

from actors.base import RoostActor, utc_now
from actors.dispatch import handles
from actors.messages import (
    AppendFailed,
    CallCancel,
    CallDone,
    DirectDone,
    JournalMoved,
    Reply,
    RunCall,
    RunDirect,
    SetupRunner,
)
from actors.workers import WorkDone, WorkerThreads
from events.catalog import Event
from events.envelope import format_at
from runtime.execution.direct import (
    crashed,
    direct_call,
    direct_source,
    project_record,
    recorded,
    recovered_record,
)
from runtime.tools.base import CallSpec

__all__ = ["ToolRunnerActor"]


class ToolRunnerActor(RoostActor):
    """Runs allowed calls and answers with their terminal events."""

    kind = "toolrunner"
    parent_kind = "project"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.core: Any = None
        self.project_id = ""
        self.cancels: dict[str, threading.Event] = {}
        self.workers = WorkerThreads(self)
        """Commands, fetches, workflows and ``async`` calls run on its threads."""

    @handles(SetupRunner)
    def _setup(self, message: SetupRunner, sender: Any) -> None:
        self.announce(sender, "toolrunner")
        from runtime.execution.pipeline import ToolPipeline  # noqa: PLC0415

        self.project_id = message.project_id
        self.journal = message.journal
        self.appends.alert_options = message.options
        self.core = ToolPipeline(
            message.project_id, message.root, message.options, message.registry
        )
        self._recover_dead_runs()

    @handles(RunCall)
    def _run_call(self, message: RunCall, sender: Any) -> None:
        self._run(message.call, sender)

    @handles(CallCancel)
    def _cancel(self, message: CallCancel, sender: Any) -> None:
        for call_id in message.call_ids:
            flag = self.cancels.get(call_id)
            if flag is not None:
                flag.set()

    @handles(WakeupMessage, WorkDone)
    def _finished(self, message: WakeupMessage | WorkDone, sender: Any) -> None:
        self._collect()

    @handles(JournalMoved)
    def _journal_moved(self, message: JournalMoved, sender: Any) -> None:
        self.journal = message.journal
        self.appends.resend()

    def _recover_dead_runs(self) -> None:
        """Review the roots of this project's runs that a stop or crash cut; record them."""
        from runtime.guard.review.leftovers import recover_runs  # noqa: PLC0415
        from runtime.guard.review.run_ledger import close_run  # noqa: PLC0415

        for record, report in recover_runs(self.project_id):
            batch = recovered_record(self.project_id, record.label, report, format_at(utc_now()))
            if not batch:
                close_run(record)
                continue

            def done(answer: Any, record: Any = record) -> None:
                if not isinstance(answer, AppendFailed):
                    close_run(record)

            self.append(batch, then=done)

    def on_exit(self) -> None:
        """Stopping: stop every call still running and every MCP server this runner started."""
        from runtime.tools.mcp_client.session import close_sessions  # noqa: PLC0415

        for flag in self.cancels.values():
            flag.set()
        close_sessions()

    def _run(self, call: CallSpec, sender: Any) -> None:
        refused = self.core.admit(call)
        if refused is not None:
            self.send(sender, CallDone(call_id=call.call_id, events=refused))
            return
        flag = self.cancels[call.call_id] = threading.Event()
        if self.core.runs_inline(call):
            try:
                events = self.core.execute(call, flag)
            finally:
                self._release(call.call_id)
            self.send(sender, CallDone(call_id=call.call_id, events=events))
            return

        def work() -> tuple[str, Callable[[], object]]:
            try:
                events = self.core.execute(call, flag)
            except Exception as e:
                events = crashed(call, e)
            done = CallDone(call_id=call.call_id, events=events)
            return call.call_id, functools.partial(self.send, sender, done)

        self.workers.start(work)

    @handles(RunDirect)
    def _direct(self, message: RunDirect, sender: Any) -> None:
        call = direct_call(message.request, message.conversation_id)
        correlation = call.correlation_id
        source = direct_source(message.request)
        flag = self.cancels[call.call_id] = threading.Event()

        def work() -> tuple[str, Callable[[], object]]:
            try:
                events, result = self.core.run(call, flag, source=source)
            except Exception as e:
                events = crashed(call, e)
                result = self.core.result_of(events, call)
            record = recorded(call, events, source)
            if message.conversation_id is not None:  # the conversation records it
                done = DirectDone(
                    events=record,
                    result=result,
                    correlation_id=correlation,
                    reply_to=message.reply_to,
                )
                return call.call_id, functools.partial(self.send, sender, done)
            record_it = functools.partial(
                self._record_direct, record, correlation, message.reply_to, result
            )
            return call.call_id, record_it

        self.workers.start(work)

    def _collect(self) -> None:
        """Release each finished call and carry out what its thread left to do."""
        for call_id, finish in self.workers.collect():
            self._release(call_id)
            finish()

    def _record_direct(
        self, events: list[Event], correlation: str, reply_to: Any, result: Any
    ) -> None:
        """Record a direct run no conversation records; answer the client after the commit."""
        batch = project_record(self.project_id, correlation, events, format_at(utc_now()))
        self.append(batch, then=functools.partial(self._answer_direct, reply_to, result))

    def _answer_direct(self, reply_to: Any, result: Any, answer: Any) -> None:
        if isinstance(answer, AppendFailed):
            self.send(reply_to, Reply(ok=False, error=answer.error))
        else:
            self.send(reply_to, Reply(ok=True, result=result))

    def _release(self, call_id: str) -> None:
        self.cancels.pop(call_id, None)
        if self.core is not None:
            self.core.release(call_id)
