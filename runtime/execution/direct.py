"""The ToolRunner's decisions as plain code: a client's ``run_tool``, a crash, a dead run.

The ToolRunner actor (``actors/toolrunner.py``) runs the pipeline and does the I/O (worker
threads, messages); what a direct call is, what its record holds and what a tool that
raised records is decided here, so it is unit-tested without an actor system
(``tests/runtime/execution``). Which calls run inline is the tool's own fact
(``ToolSpec.inline``, read by ``ToolPipeline.runs_inline``).
"""

from __future__ import annotations

from events import catalog as ev
from events.envelope import NewEvent, new_call_id, new_correlation_id, new_event
from runtime.errors import RoostError
from runtime.execution.pipeline import Source
from runtime.guard.review.leftovers import ChangeReport
from runtime.guard.review.report import change_events
from runtime.guard.review.run_ledger import RunLabel
from runtime.tools.base import CallSpec
from runtime.wire.op_args import ToolRequest

__all__ = [
    "crashed",
    "direct_call",
    "direct_source",
    "project_record",
    "recorded",
    "recovered_record",
]


def direct_call(request: ToolRequest, conversation_id: str | None) -> CallSpec:
    """The call a ``run_tool`` request makes, under the correlation the gateway gave it.

    A request without that correlation did not come through the gateway: ``internal_error``.
    """
    return CallSpec(
        call_id=new_call_id(),
        name=request.name,
        args=request.args,
        conversation_id=conversation_id,
        correlation_id=_minted(request.meta.correlation_id),
    )


def _minted(correlation_id: str | None) -> str:
    if not correlation_id:
        raise RoostError(
            "run_tool reached the runtime without its correlation_id: the gateway mints it, "
            "so this request did not come through the gateway",
            reason="missing_correlation_id",
            op="run_tool",
        )
    return correlation_id


def direct_source(request: ToolRequest) -> Source:
    """Who made a ``run_tool`` call: ``mcp`` when ``roost mcp serve`` did, else ``run_tool``."""
    return request.meta.source


def recorded(call: CallSpec, events: list[ev.Event], source: Source) -> list[ev.Event]:
    """A direct run's record: ``tool.requested`` (by ``source``), the decision, the rest."""
    requested = ev.ToolRequested(
        call_id=call.call_id, name=call.name, args=dict(call.args), source=source
    )
    out: list[ev.Event] = [requested]
    started = False
    for payload in events:
        out.append(payload)
        if isinstance(payload, ev.PolicyAllowed) and not started:
            out.append(ev.ToolStarted(call_id=call.call_id, name=call.name))
            started = True
    return out


def crashed(call: CallSpec, error: Exception) -> list[ev.Event]:
    """The terminal event of a call whose tool raised instead of returning."""
    reason = {"code": "tool_crashed", "message": str(error)}
    return [ev.ToolFailed(call_id=call.call_id, name=call.name, reason=reason)]


def project_record(
    project_id: str, correlation_id: str, events: list[ev.Event], at: str
) -> list[NewEvent]:
    """The batch of a direct run that names no conversation: project-level events."""
    return [
        new_event(p, project_id=project_id, at=at, correlation_id=correlation_id) for p in events
    ]


def recovered_record(
    project_id: str, label: RunLabel, report: ChangeReport, at: str
) -> list[NewEvent]:
    """The events of a dead run's review (``recovered: true``), at project level.

    They name the call's conversation in their payload (the incident report of that
    conversation shows them) but are not in its stream: its actor did not make them.
    Empty when the run changed nothing. A fresh correlation: the runtime records it on its
    own, at the start after the stop or crash that cut the run.
    """
    payloads = change_events(
        report,
        tool=label.tool,
        call_id=label.call_id,
        recovered=True,
        conversation_id=label.conversation_id,
    )
    correlation = new_correlation_id()
    return [
        new_event(p, project_id=project_id, at=at, correlation_id=correlation) for p in payloads
    ]
