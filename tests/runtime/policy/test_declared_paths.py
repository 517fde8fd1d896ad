"""Path arguments a tool declares on its spec, and the name heuristics for those it does not.

A new tool ``fs.move`` whose arguments are ``from`` / ``to``: its spec names them in
``path_args``, so the policy checks both ends, whatever they are called. A spec that
declares nothing (an MCP tool's, an asset's) is read by the names of its arguments.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import pytest

from events import catalog as ev
from runtime.execution.pipeline import ToolPipeline
from runtime.policy.decisions import PolicyContext, Verdict, decide
from runtime.policy.options import validate_options
from runtime.tools.base import CallSpec, ToolContext, ToolSpec
from runtime.tools.registry import ToolRegistry

_MOVE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"from": {"type": "string"}, "to": {"type": "string"}},
    "required": ["from", "to"],
    "additionalProperties": False,
}

MOVE = ToolSpec(
    name="fs.move",
    description="Move a file.",
    input_schema=_MOVE_SCHEMA,
    writes=True,
    path_args=("from", "to"),
    inline=True,
)
"""A built-in-style tool: it declares its path arguments."""

UNDECLARED_MOVE = ToolSpec(
    name="mcp.files.move",
    description="Move a file (an MCP server's tool: its spec declares no path arguments).",
    input_schema=_MOVE_SCHEMA,
    writes=True,
)


def fs_move(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    """Moves without a workspace check of its own: the policy is what stops it."""
    os.replace(os.path.join(ctx.root, args["from"]), os.path.join(ctx.root, args["to"]))
    return {"moved": args["from"], "to": args["to"]}


def _spec(
    name: str,
    properties: list[str],
    path_args: tuple[str, ...] | None,
    data_args: tuple[str, ...] = (),
) -> ToolSpec:
    schema = {"type": "object", "properties": {p: {"type": "string"} for p in properties}}
    return ToolSpec(
        name=name,
        description="A test tool.",
        input_schema=schema,
        path_args=path_args,
        data_args=data_args,
    )


@pytest.fixture
def root(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    (project / "a.txt").write_text("hello\n")
    (tmp_path / "outside").mkdir()
    return project


def registry(*specs: ToolSpec) -> ToolRegistry:
    return ToolRegistry({spec.name: (spec, fs_move) for spec in specs})


def decide_in(root: Path, reg: ToolRegistry, name: str, **args: Any) -> Verdict:
    options = validate_options({"protocol_allowlist": ["mcp"]})
    ctx = PolicyContext(project_id="p1", root=str(root), options=options, registry=reg)
    return decide(CallSpec(call_id="call-1", name=name, args=args), ctx)


def test_a_move_outside_the_root_is_denied_by_the_policy_when_the_spec_declares_its_paths(
    root: Path,
) -> None:
    options = validate_options({})
    pipeline = ToolPipeline("p1", str(root), options, registry(MOVE))
    call = CallSpec(call_id="call-1", name="fs.move", args={"from": "a.txt", "to": "../outside/a"})

    events, result = pipeline.run(call, threading.Event(), source="run_tool")

    assert [type(e) for e in events] == [
        ev.SecuritySandboxViolation,
        ev.PolicyDenied,
        ev.ToolFailed,
    ]
    denied = events[1]
    assert isinstance(denied, ev.PolicyDenied)
    assert (denied.tool, denied.reason) == ("fs.move", "outside_root")
    assert (result["status"], result["reason"]["code"]) == ("error", "outside_root")
    assert (root / "a.txt").read_text() == "hello\n"
    assert not (root.parent / "outside" / "a").exists()


def test_the_source_of_a_declared_move_is_checked_too(root: Path) -> None:
    verdict = decide_in(root, registry(MOVE), "fs.move", **{"from": "/etc/hostname", "to": "b"})

    assert verdict.outcome == "deny"
    last = verdict.events[-1]
    assert isinstance(last, ev.ToolFailed)
    assert (last.reason["code"], last.reason["reason"]) == ("outside_root", "absolute_outside")


def test_a_declared_move_inside_the_root_is_allowed_and_runs(root: Path) -> None:
    pipeline = ToolPipeline("p1", str(root), validate_options({}), registry(MOVE))
    call = CallSpec(call_id="call-1", name="fs.move", args={"from": "a.txt", "to": "b.txt"})

    events, result = pipeline.run(call, threading.Event(), source="run_tool")

    assert [type(e) for e in events] == [ev.PolicyAllowed, ev.ToolCompleted]
    assert result["status"] == "ok"
    assert (root / "b.txt").read_text() == "hello\n"


def test_an_undeclared_spec_is_read_by_its_argument_names(root: Path) -> None:
    reg = registry(UNDECLARED_MOVE)

    by_from_to = decide_in(root, reg, "mcp.files.move", **{"from": "a.txt", "to": "/etc/x"})

    # ``from`` / ``to`` are no path names: an undeclared tool must confine itself.
    assert by_from_to.outcome == "allow"


def test_the_name_heuristics_apply_to_undeclared_specs_only(root: Path) -> None:
    undeclared = _spec("mcp.files.copy", ["source", "target"], None)
    declared = _spec("demo.copy", ["source", "target"], ("target",))
    args = {"source": "/etc/hostname", "target": "copy.txt"}

    heuristic = decide_in(root, registry(undeclared), "mcp.files.copy", **args)
    by_declaration = decide_in(root, registry(declared), "demo.copy", **args)

    assert heuristic.outcome == "deny"
    assert isinstance(heuristic.events[-1], ev.ToolFailed)
    assert heuristic.events[-1].reason["code"] == "outside_root"
    # Declared: ``source`` is not a path argument, so its name does not make it one.
    assert by_declaration.outcome == "allow"


def test_paths_in_the_text_of_a_declared_specs_other_arguments_are_still_checked(
    root: Path,
) -> None:
    reg = registry(_spec("demo.run", ["script", "note"], (), data_args=("note",)))

    in_text = decide_in(root, reg, "demo.run", script="tool path=../../etc/passwd")
    in_data = decide_in(root, reg, "demo.run", note="install dest=/usr/local")

    assert in_text.outcome == "deny"
    assert in_data.outcome == "allow"
