"""The tool-call pipeline: one decision per source, and run() for unattended callers."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import msgspec
import pytest

from events import catalog as ev
from runtime.execution.pipeline import ToolPipeline, offered_tools
from runtime.policy.decisions import decide, refused_every_call
from runtime.policy.options import validate_options
from runtime.tools.base import CallSpec, ToolContext, ToolSpec
from runtime.tools.registry import ToolRegistry

APPROVAL_REASON = {
    "code": "denied",
    "reason": "approval_required",
    "message": "fs.read needs approval (approval_mode is always); run it in a conversation "
    "to approve it",
}


@pytest.fixture
def root(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    (project / "a.txt").write_text("hello\n")
    return project


def write_workflow(root: Path, key: str, steps: list[dict[str, Any]]) -> None:
    folder = root / ".roost" / "workflows"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{key}.md").write_text(f"---\nsteps: {msgspec.json.encode(steps).decode()}\n---\n")


def pipeline_for(root: Path, **options: Any) -> ToolPipeline:
    normalized = validate_options(options)
    return ToolPipeline(
        "p1", str(root), normalized, ToolRegistry.for_project(str(root), normalized)
    )


def call(name: str, **args: Any) -> CallSpec:
    return CallSpec(call_id="call-1", name=name, args=args, conversation_id="c1")


def test_a_models_call_that_needs_approval_stays_ask(root: Path) -> None:
    verdict = pipeline_for(root, approval_mode="always").decide(
        call("fs.read", path="a.txt"), source="model"
    )

    assert verdict.outcome == "ask"
    assert verdict.events == [ev.ToolApprovalRequested(call_id="call-1")]


def test_a_run_tool_call_that_needs_approval_is_refused(root: Path) -> None:
    verdict = pipeline_for(root, approval_mode="always").decide(
        call("fs.read", path="a.txt"), source="run_tool"
    )

    assert verdict.outcome == "deny"
    assert verdict.events == [
        ev.PolicyDenied(
            tool="fs.read", reason="approval_required", source="policy", call_id="call-1"
        ),
        ev.ToolFailed(call_id="call-1", name="fs.read", reason=APPROVAL_REASON),
    ]


def test_an_mcp_call_that_needs_approval_is_refused_like_run_tool(root: Path) -> None:
    pipeline = pipeline_for(root, approval_mode="always")

    mcp = pipeline.decide(call("fs.read", path="a.txt"), source="mcp")

    assert mcp == pipeline.decide(call("fs.read", path="a.txt"), source="run_tool")


FLOW = ToolSpec(name="workflow.run.flow", description="A workflow.", input_schema={})


def test_a_workflow_step_that_needs_approval_is_allowed_as_workflow_approved(root: Path) -> None:
    verdict = pipeline_for(root, approval_mode="always").decide(
        call("fs.read", path="a.txt"), source="workflow", workflow=FLOW
    )

    assert verdict.outcome == "allow"
    assert verdict.events == [
        ev.ToolApprovalRequested(call_id="call-1"),
        ev.PolicyAllowed(
            tool="fs.read", reason="workflow_approved", source="policy", call_id="call-1"
        ),
    ]


def test_a_step_that_needs_approval_is_refused_when_its_workflow_needed_none(
    root: Path,
) -> None:
    harmless = ToolSpec(
        name="workflow.run.flow", description="A workflow.", input_schema={}, read_only=True
    )
    verdict = pipeline_for(root, approval_mode="sensitive").decide(
        call("fs.write", path="b.txt", content="x"), source="workflow", workflow=harmless
    )

    assert verdict.outcome == "deny"
    assert verdict.events[-2] == ev.PolicyDenied(
        tool="fs.write", reason="approval_required", source="policy", call_id="call-1"
    )
    assert not (root / "b.txt").exists()


def test_a_workflow_is_as_sensitive_as_its_most_sensitive_step(root: Path) -> None:
    steps = [
        {"tool": "fs.read", "args": {"path": "a.txt"}},
        {"tool": "command.run", "args": {"command": "true"}},
    ]
    write_workflow(root, "mixed", steps)
    registry = pipeline_for(root).policy.registry
    entry = registry.get("workflow.run.mixed")

    assert entry is not None
    flags = (entry[0].read_only, entry[0].writes, entry[0].runs_commands)
    assert flags == (False, False, True)
    assert registry.unavailable == {}


def test_a_workflow_naming_no_tool_is_unavailable_and_refused_before_any_step(
    root: Path,
) -> None:
    steps = [{"tool": "fs.read", "args": {"path": "a.txt"}}, {"tool": "mcp.gone.tool"}]
    write_workflow(root, "gone", steps)
    pipeline = pipeline_for(root)

    verdict = pipeline.decide(call("workflow.run.gone"), source="model")

    assert verdict.outcome == "deny"
    [denied, failed] = verdict.events
    assert denied == ev.PolicyDenied(
        tool="workflow.run.gone", reason="unknown_step_tool", source="policy", call_id="call-1"
    )
    assert isinstance(failed, ev.ToolFailed)
    assert {k: v for k, v in failed.reason.items() if k != "message"} == {
        "code": "denied",
        "reason": "unknown_step_tool",
        "step": 1,
        "step_tool": "mcp.gone.tool",
    }
    spec = pipeline.policy.registry.get("workflow.run.gone")
    assert spec is not None and (spec[0].writes, spec[0].runs_commands) == (True, True)
    offered = offered_tools(pipeline.policy.registry, pipeline.policy.options, "model")
    assert "workflow.run.gone" not in [s.name for s in offered]


def test_a_workflow_step_may_not_run_a_workflow(root: Path) -> None:
    write_workflow(root, "peek", [{"tool": "fs.read", "args": {"path": "a.txt"}}])

    verdict = pipeline_for(root).decide(call("workflow.run.peek"), source="workflow")

    assert verdict.outcome == "deny"
    assert verdict.events == [
        ev.ToolFailed(
            call_id="call-1",
            name="workflow.run.peek",
            reason={
                "code": "denied",
                "message": "a workflow step cannot run another workflow",
                "reason": "nested_workflow",
            },
        )
    ]


def test_a_model_may_run_a_workflow(root: Path) -> None:
    write_workflow(root, "peek", [{"tool": "fs.read", "args": {"path": "a.txt"}}])

    verdict = pipeline_for(root).decide(call("workflow.run.peek"), source="model")

    assert verdict.outcome == "allow"


def test_a_decision_without_approval_is_the_policys_for_every_source(root: Path) -> None:
    pipeline = pipeline_for(root)
    outside = call("fs.read", path="../outside.txt")
    expected = decide(outside, pipeline.policy)

    verdicts = [pipeline.decide(outside, source=s) for s in ("model", "run_tool", "workflow")]

    assert expected.outcome == "deny"
    assert verdicts == [expected, expected, expected]


@pytest.mark.parametrize("source", ["model", "workflow"])
def test_run_serves_only_callers_with_nobody_to_approve(root: Path, source: Any) -> None:
    with pytest.raises(ValueError, match=r"^run\(\) serves \['mcp', 'run_tool'\], not '\w+'$"):
        pipeline_for(root).run(call("fs.read", path="a.txt"), threading.Event(), source=source)


def test_an_mcp_call_runs_through_the_whole_pipeline_in_one_call(root: Path) -> None:
    events, result = pipeline_for(root).run(
        call("fs.read", path="a.txt"), threading.Event(), source="mcp"
    )

    assert [type(e) for e in events] == [ev.PolicyAllowed, ev.ToolCompleted]
    assert (result["status"], result["tool"], result["result"]["content"]) == (
        "ok",
        "fs.read",
        "hello\n",
    )


def test_a_refused_call_is_never_admitted_nor_run(root: Path) -> None:
    ran: list[str] = []

    def spy(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
        ran.append(ctx.call_id)
        return {}

    options = validate_options({"deny_tools": ["test.spy"]})
    spec = ToolSpec(name="test.spy", description="spy", input_schema={"type": "object"})
    pipeline = ToolPipeline("p1", str(root), options, ToolRegistry({"test.spy": (spec, spy)}))

    events, result = pipeline.run(call("test.spy"), threading.Event(), source="run_tool")

    assert (result["reason"]["code"], result["reason"]["rule"]) == ("denied", "deny_tools")
    assert [type(e) for e in events] == [ev.PolicyDenied, ev.ToolFailed]
    assert ran == []
    assert pipeline.statistics().in_flight == 0


def test_a_run_releases_its_quota_when_the_tool_raises(root: Path) -> None:
    def boom(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
        raise RuntimeError("boom")

    spec = ToolSpec(name="test.boom", description="boom", input_schema={"type": "object"})
    pipeline = ToolPipeline(
        "p1", str(root), validate_options({}), ToolRegistry({"test.boom": (spec, boom)})
    )

    _, result = pipeline.run(call("test.boom"), threading.Event(), source="run_tool")

    assert result["reason"]["code"] == "tool_error"
    assert pipeline.statistics().in_flight == 0


# --- offered_tools: what list_tools gives a source ---------------------------------------


def offered(root: Path, source: Any, **options: Any) -> list[str]:
    normalized = validate_options(options)
    registry = ToolRegistry.for_project(str(root), normalized)
    return [spec.name for spec in offered_tools(registry, normalized, source)]


def test_without_approval_every_source_is_offered_the_visible_tools(root: Path) -> None:
    normalized = validate_options({})
    registry = ToolRegistry.for_project(str(root), normalized)
    visible = [spec.name for spec in registry.visible(normalized)]

    assert "fs.write" in visible
    assert offered(root, "mcp") == offered(root, "model") == visible


def test_an_unattended_source_is_not_offered_the_tools_approval_mode_always_asks_about(
    root: Path,
) -> None:
    model = offered(root, "model", approval_mode="sensitive")
    mcp = offered(root, "mcp", approval_mode="sensitive")

    assert {"fs.write", "command.run", "http.fetch"} <= set(model)
    assert {"fs.read", "fs.list"} <= set(mcp)
    assert set(model) - set(mcp) >= {"fs.write", "command.run", "http.fetch"}
    assert offered(root, "run_tool", approval_mode="sensitive") == mcp
    assert offered(root, "mcp", approval_mode="always") == []
    assert offered(root, "workflow", approval_mode="always") == offered(root, "model")


def test_a_tool_the_lists_deny_is_offered_to_nobody(root: Path) -> None:
    for source in ("model", "run_tool", "mcp"):
        names = offered(root, source, deny_tools=["fs.*"])
        assert names and not [n for n in names if n.startswith("fs.")]
    assert offered(root, "mcp", allow_tools=["fs.read"]) == ["fs.read"]


def test_a_protocol_tool_is_offered_only_when_its_protocol_is_allowed() -> None:
    spec = ToolSpec(name="mcp.ext.echo", description="echo", input_schema={"type": "object"})
    registry = ToolRegistry({spec.name: (spec, lambda ctx, args: {})})

    closed = validate_options({"protocol_allowlist": []})
    opened = validate_options({"protocol_allowlist": ["mcp"]})

    assert refused_every_call(spec, closed, unattended=False) == "protocol_not_allowed"
    assert offered_tools(registry, closed, "model") == []
    assert offered_tools(registry, opened, "model") == [spec]


def test_what_is_not_offered_is_what_the_pipeline_refuses(root: Path) -> None:
    pipeline = pipeline_for(root, approval_mode="sensitive")
    assert "fs.write" not in offered(root, "mcp", approval_mode="sensitive")

    _, result = pipeline.run(
        call("fs.write", path="b.txt", content="x"), threading.Event(), source="mcp"
    )

    assert result["status"] == "error"
    assert result["reason"]["reason"] == "approval_required"
    assert not (root / "b.txt").exists()


def test_strict_loading_refuses_a_workflow_naming_no_tool(root: Path) -> None:
    from runtime.errors import AssetLoadFailedError

    write_workflow(root, "gone", [{"tool": "mcp.gone.tool"}])

    with pytest.raises(AssetLoadFailedError) as caught:
        pipeline_for(root, strict_asset_loading=True)
    assert caught.value.details["reason"] == "unknown_step_tool"
    assert caught.value.details["key"] == "gone"


def test_a_sync_call_runs_inline_when_its_tool_declares_it(root: Path) -> None:
    quick = ToolSpec(
        name="demo.quick", description="Quick.", input_schema={"type": "object"}, inline=True
    )
    tools = ToolRegistry.for_project(str(root), validate_options({}))
    entries = {spec.name: tools.get(spec.name) for spec in tools.specs()}
    entries["demo.quick"] = (quick, lambda ctx, args: {})
    pipeline = ToolPipeline(
        "p1", str(root), validate_options({}), ToolRegistry({k: v for k, v in entries.items() if v})
    )

    def inline(name: str, run_mode: str = "sync") -> bool:
        return pipeline.runs_inline(CallSpec(call_id="c", name=name, args={}, run_mode=run_mode))

    assert inline("demo.quick") and inline("fs.read") and inline("fs.write")
    assert inline("asset.list")
    assert not inline("demo.quick", "async")
    assert not inline("command.run")
    assert not inline("http.fetch")
    assert not inline("fs.no_such_tool")
