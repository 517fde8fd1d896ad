"""The asset tools: asset.list/search/get, the catalog cache, command.run.* and workflow.run.*."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from runtime.tools.asset import TOOLS, asset_tools, catalog_for
from runtime.tools.asset_store import load_assets
from runtime.tools.command import SPECS as COMMAND_SPECS
from runtime.tools.fs import SPECS as FS_SPECS
from tests.runtime.asset_helpers import ECHO, GIT_LOG, TRIAGE, cmd, ctx_for, tool_error, write


@pytest.fixture
def project(tmp_path: Path) -> Path:
    write(tmp_path, "commands", "git-log.md", GIT_LOG)
    write(tmp_path, "commands", "broken.md", cmd("description: oops"))
    write(tmp_path, "workflows", "triage.md", TRIAGE)
    write(tmp_path, "skills", "review.md", "# Review\nCheck the git log too.\n")
    return tmp_path


def test_asset_list_shows_every_asset_of_a_type_with_validity_and_tool(project):
    result = TOOLS["asset.list"](ctx_for(project), {"type": "commands"})
    assert result == {
        "type": "commands",
        "generation": 1,
        "count": 2,
        "assets": [
            {"key": "broken", "description": "", "valid": False, "reason": "missing_argv"},
            {
                "key": "git-log",
                "description": "Show recent commits",
                "valid": True,
                "tool": "command.run.git-log",
            },
        ],
    }


def test_asset_search_returns_the_matches(project):
    result = TOOLS["asset.search"](ctx_for(project), {"type": "skills", "query": "GIT LOG"})
    assert result == {
        "type": "skills",
        "query": "GIT LOG",
        "count": 1,
        "assets": [{"key": "review", "description": "Review", "valid": True}],
    }


def test_asset_get_returns_a_valid_workflow_in_full(project):
    result = TOOLS["asset.get"](ctx_for(project), {"type": "workflows", "key": "triage"})
    assert result["valid"] is True
    assert result["tool"] == "workflow.run.triage"
    assert result["body"] == "Triage steps.\n"
    assert result["path"] == ".roost/workflows/triage.md"
    assert result["steps"][1] == {"tool": "command.run.git-log", "args": {"count": 3}}
    assert sorted(result) == [
        "body", "description", "input_schema", "key", "path", "steps", "tool", "type", "valid"
    ]  # fmt: skip


def test_asset_get_of_an_invalid_asset_returns_its_preview(project):
    result = TOOLS["asset.get"](ctx_for(project), {"type": "commands", "key": "broken"})
    assert result == {
        "type": "commands",
        "key": "broken",
        "valid": False,
        "reason": "missing_argv",
        "detail": "a command needs 'argv: [\"program\", ...]'",
        "path": ".roost/commands/broken.md",
        "body": cmd("description: oops"),
    }


def test_asset_get_of_an_unknown_key_fails_with_asset_not_found(project):
    err = tool_error(TOOLS["asset.get"], ctx_for(project), {"type": "skills", "key": "nope"})
    assert err.reason() == {
        "code": "tool_error",
        "message": "no skills asset named 'nope'; asset.list {type: 'skills'} shows the keys",
        "reason": "asset_not_found",
        "type": "skills",
        "key": "nope",
    }


def test_asset_list_refuses_an_unknown_type(project):
    err = tool_error(TOOLS["asset.list"], ctx_for(project), {"type": "plugins"})
    assert (err.code, err.details["reason"]) == ("invalid_tool_args", "not_in_enum")


def test_the_catalog_is_cached_until_a_file_changes(project):
    first = catalog_for(str(project))
    assert catalog_for(str(project)) is first
    write(project, "skills", "new.md", "new skill")
    second = catalog_for(str(project))
    assert (second.generation, second.counts()["skills"]) == (first.generation + 1, 2)
    path = project / ".roost" / "skills" / "new.md"
    stat = path.stat()
    path.write_text("changed, same mtime")
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    third = catalog_for(str(project))
    assert third.get("skills", "new").body == "changed, same mtime"


# --- generated tools ----------------------------------------------------------------------


def test_asset_tools_builds_one_tool_per_valid_command_and_workflow(project):
    known = {s.name: s for s in [*FS_SPECS, *COMMAND_SPECS]}
    specs, fns = asset_tools(load_assets(str(project)), known)
    assert [s.name for s in specs] == ["command.run.git-log", "workflow.run.triage"]
    assert sorted(fns) == ["command.run.git-log", "workflow.run.triage"]
    command, workflow = specs
    assert (command.runs_commands, command.read_only, command.description) == (
        True,
        False,
        "Show recent commits",
    )
    assert command.input_schema == load_assets(str(project)).get("commands", "git-log").input_schema
    flags = (workflow.read_only, workflow.writes, workflow.runs_commands, workflow.network_capable)
    assert flags == (False, False, True, False)


def test_a_workflow_of_read_only_steps_is_read_only(tmp_path):
    steps = 'steps: [{"tool": "fs.read", "args": {"path": "a"}}, {"tool": "asset.list"}]'
    write(tmp_path, "workflows", "look.md", cmd(steps))
    known = {s.name: s for s in FS_SPECS}
    known["asset.list"] = known["fs.read"]
    specs, _ = asset_tools(load_assets(str(tmp_path)), known)
    assert specs[0].read_only is True
    specs, _ = asset_tools(load_assets(str(tmp_path)))
    assert specs[0].read_only is False


def test_workflow_run_returns_the_rendered_plan(project):
    _, fns = asset_tools(load_assets(str(project)))
    plan = fns["workflow.run.triage"](ctx_for(project), {"path": "src/app.py"})
    assert plan == {
        "workflow": "triage",
        "steps": [
            {"tool": "fs.read", "args": {"path": "src/app.py", "limit": 10}},
            {"tool": "command.run.git-log", "args": {"count": 3}},
        ],
    }


def test_workflow_run_refuses_inputs_the_schema_refuses(project):
    _, fns = asset_tools(load_assets(str(project)))
    err = tool_error(fns["workflow.run.triage"], ctx_for(project), {"limit": 2})
    assert (err.details["kind"], err.details["keys"]) == ("missing_required_args", ["path"])


def test_command_run_asset_runs_the_rendered_argv_through_command_run(tmp_path):
    write(tmp_path, "commands", "echo.md", ECHO)
    _, fns = asset_tools(load_assets(str(tmp_path)))
    result = fns["command.run.echo"](ctx_for(tmp_path), {"msg": "a; rm -rf /"})
    assert (result["exit_code"], result["stdout"], result["stderr"]) == (0, "a; rm -rf /\n", "")
    assert result["argv"] == ["echo", "a; rm -rf /"]


def test_command_run_asset_with_a_missing_input_runs_nothing(tmp_path):
    write(tmp_path, "commands", "echo.md", ECHO)
    _, fns = asset_tools(load_assets(str(tmp_path)))
    err = tool_error(fns["command.run.echo"], ctx_for(tmp_path), {})
    assert (err.code, err.details["kind"]) == ("invalid_tool_args", "missing_required_args")
