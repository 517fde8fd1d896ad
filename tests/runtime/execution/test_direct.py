"""A client's ``run_tool`` as plain code: its call, its record, a crash (no actor system)."""

from __future__ import annotations

import pytest

from events import catalog as ev
from runtime.errors import RoostError
from runtime.execution.direct import crashed, direct_call, project_record, recorded
from runtime.wire.op_args import ToolMeta, ToolRequest
from tests.runtime.calls import call_of


def _request(name: str) -> ToolRequest:
    return ToolRequest(name=name, meta=ToolMeta(correlation_id="corr-1"))


def test_a_direct_call_takes_the_correlation_the_gateway_gave_it() -> None:
    request = call_of("run_tool", request={"name": "fs.read", "meta": {}})
    call = direct_call(request.args.request, "c1")
    assert call.correlation_id == request.correlation()
    assert (call.name, call.args, call.conversation_id) == ("fs.read", {}, "c1")
    assert call.call_id.startswith("call-")


def test_a_direct_call_that_skipped_the_gateway_is_an_internal_error() -> None:
    with pytest.raises(RoostError) as caught:
        direct_call(ToolRequest(name="fs.read"), None)
    assert caught.value.code == "internal_error"
    assert caught.value.details["reason"] == "missing_correlation_id"


def test_the_record_starts_an_allowed_call_once_after_its_decision() -> None:
    call = direct_call(_request("fs.read"), None)
    events: list[ev.Event] = [
        ev.PolicyAllowed(tool="fs.read", call_id=call.call_id),
        ev.ToolCompleted(call_id=call.call_id, name="fs.read", result={}),
    ]
    types = [e.__struct_config__.tag for e in recorded(call, events, "run_tool")]
    assert types == ["tool.requested", "policy.allowed", "tool.started", "tool.completed"]


def test_a_refused_call_is_recorded_without_a_start() -> None:
    call = direct_call(_request("fs.read"), None)
    events: list[ev.Event] = [ev.PolicyDenied(tool="fs.read", reason="no", call_id=call.call_id)]
    types = [e.__struct_config__.tag for e in recorded(call, events, "run_tool")]
    assert types == ["tool.requested", "policy.denied"]


def test_a_tool_that_raised_fails_as_tool_crashed() -> None:
    call = direct_call(_request("fs.read"), None)
    (failed,) = crashed(call, ValueError("boom"))
    assert isinstance(failed, ev.ToolFailed)
    assert failed.reason == {"code": "tool_crashed", "message": "boom"}


def test_a_run_naming_no_conversation_is_recorded_at_project_level() -> None:
    call = direct_call(_request("fs.read"), None)
    batch = project_record("p1", "corr-1", crashed(call, ValueError("x")), "2026-01-01T00:00:00Z")
    assert [(e.project_id, e.conversation_id, e.correlation_id) for e in batch] == [
        ("p1", None, "corr-1")
    ]
