"""Known secret values are masked in everything a call returns for the journal."""

from __future__ import annotations

import base64
import threading
from pathlib import Path
from typing import Any

import msgspec
import pytest

from events import catalog as ev
from runtime.errors import ToolError
from runtime.execution.pipeline import ToolPipeline
from runtime.guard.secrets.masking import SECRET_VALUE_MARKER
from runtime.policy.options import validate_options
from runtime.tools.base import CallSpec, ToolContext, ToolFn, ToolSpec
from runtime.tools.registry import ToolRegistry

VALUE = "Zq8Secret-Value_71x"
ENCODED = base64.b64encode(f"SERVICE_ACCESS={VALUE}\n".encode()).decode()
M = SECRET_VALUE_MARKER


def _leak(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    return {"stdout": ENCODED, "other": "plain words"}


def _fail(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    raise ToolError("tool_error", f"upstream said {VALUE[::-1]}", reason="upstream")


def _signal(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    path = f"made/{VALUE}"
    ctx.signals.append(
        ev.SecuritySandboxViolation(tool="x", path=path, reason="r", call_id=ctx.call_id)
    )
    return {"ok": True}


def _clean(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    return {"stdout": "nothing secret here"}


@pytest.fixture
def pipeline(tmp_path: Path) -> ToolPipeline:
    (tmp_path / ".env").write_text(f"SERVICE_ACCESS={VALUE}\n")
    options = validate_options({})
    base = ToolRegistry.for_project(str(tmp_path), options)
    tools: dict[str, tuple[ToolSpec, ToolFn]] = {}
    for name, fn in {
        "t.leak": _leak,
        "t.fail": _fail,
        "t.signal": _signal,
        "t.clean": _clean,
    }.items():
        schema = {"type": "object", "additionalProperties": True}
        tools[name] = (ToolSpec(name=name, description=name, input_schema=schema), fn)
    return ToolPipeline("p1", str(tmp_path), options, ToolRegistry(tools, base.catalog))


def run(pipeline: ToolPipeline, name: str) -> list[ev.Event]:
    call = CallSpec(call_id="call-1", name=name, args={}, conversation_id="c1")
    events = pipeline.execute(call, threading.Event())
    assert VALUE not in msgspec.json.encode(events).decode()
    return events


def test_a_result_is_masked_counted_and_signalled(pipeline: ToolPipeline) -> None:
    events = run(pipeline, "t.leak")

    assert events[0] == ev.SecuritySensitiveArtifactDetected(
        finding_count=1, finding_kinds=["secret_value"], tool="t.leak", call_id="call-1"
    )
    done = events[-1]
    assert isinstance(done, ev.ToolCompleted)
    assert M in done.result["result"]["stdout"]
    assert done.result["result"]["other"] == "plain words"
    assert done.result["sensitivity_findings_count"] == 1
    assert done.result["sensitivity_finding_kinds"] == ["secret_value"]
    assert done.risk_flags == ["sensitive_artifact_detected"]


def test_a_failure_reason_is_masked_and_signalled(pipeline: ToolPipeline) -> None:
    events = run(pipeline, "t.fail")

    assert [type(e) for e in events] == [ev.SecuritySensitiveArtifactDetected, ev.ToolFailed]
    failed = events[-1]
    assert isinstance(failed, ev.ToolFailed)
    assert failed.reason["message"] == f"upstream said {M}"


def test_a_signal_the_tool_recorded_is_masked(pipeline: ToolPipeline) -> None:
    events = run(pipeline, "t.signal")

    violation = events[0]
    assert isinstance(violation, ev.SecuritySandboxViolation)
    assert violation.path == f"made/{M}"
    done = events[-1]
    assert isinstance(done, ev.ToolCompleted)
    assert done.result["sensitivity_finding_kinds"] == ["secret_value"]


def test_a_clean_result_is_the_tools_own(pipeline: ToolPipeline) -> None:
    done = run(pipeline, "t.clean")[-1]

    assert isinstance(done, ev.ToolCompleted)
    assert done.result["result"] == {"stdout": "nothing secret here"}
    assert "sensitivity_finding_kinds" not in done.result
