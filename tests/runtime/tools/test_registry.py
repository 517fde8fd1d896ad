"""The tool registry: built-in and generated tools, filtering by allow/deny lists, assets."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import pytest

from events import catalog as ev
from events.project_history import project_problems
from runtime.errors import AssetLoadFailedError, RoostError
from runtime.option_table import RuntimeOptions
from runtime.policy.options import validate_options
from runtime.tools.base import ToolContext, ToolSpec
from runtime.tools.registry import ToolRegistry, list_rule, paired
from tests.events.test_projections import Journal

BUILTINS = [
    "asset.get",
    "asset.list",
    "asset.search",
    "command.run",
    "fs.edit",
    "fs.list",
    "fs.read",
    "fs.search",
    "fs.write",
    "http.fetch",
]


def write_asset(root: Path, kind: str, key: str, text: str) -> None:
    folder = root / ".roost" / kind
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{key}.md").write_text(text)


COMMAND = """---
description: Say hello
input_schema: {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
argv: ["echo", "hello", "{{name}}"]
---
"""

WORKFLOW = """---
description: Read a file
input_schema: {"type": "object", "properties": {"p": {"type": "string"}}, "required": ["p"]}
steps: [{"tool": "fs.read", "args": {"path": "{{p}}"}}]
---
"""


@pytest.fixture
def root(tmp_path: Path) -> Path:
    write_asset(tmp_path, "commands", "hello", COMMAND)
    write_asset(tmp_path, "workflows", "peek", WORKFLOW)
    write_asset(tmp_path, "skills", "notes", "# Notes\n\nSome notes.\n")
    write_asset(tmp_path, "commands", "broken", "---\nargv: not a list\n---\n")
    return tmp_path


def registry(root: Path, **options: Any) -> ToolRegistry:
    return ToolRegistry.for_project(str(root), validate_options(options))


def reg_options(**options: Any) -> dict[str, Any]:
    return validate_options(options)


def test_the_registry_holds_every_builtin_tool_and_the_generated_asset_tools(root: Path) -> None:
    names = [spec.name for spec in registry(root).specs()]

    assert names == sorted([*BUILTINS, "command.run.hello", "workflow.run.peek"])


def test_get_returns_the_spec_and_a_callable_implementation(root: Path) -> None:
    entry = registry(root).get("fs.read")

    assert entry is not None
    spec, fn = entry
    assert spec.name == "fs.read"
    assert spec.read_only is True
    assert callable(fn)


def test_get_of_an_unknown_tool_returns_none(root: Path) -> None:
    assert registry(root).get("fs.delete") is None


def test_generated_command_tools_run_commands_and_workflows_inherit_their_steps_flags(
    root: Path,
) -> None:
    reg = registry(root)
    command = reg.get("command.run.hello")
    workflow = reg.get("workflow.run.peek")

    assert command is not None and command[0].runs_commands is True
    assert workflow is not None and workflow[0].read_only is True
    assert workflow[0].writes is False


def test_deny_tools_hides_a_tool_from_the_visible_list(root: Path) -> None:
    names = [spec.name for spec in registry(root).visible(reg_options(deny_tools=["fs.write"]))]

    assert "fs.write" not in names
    assert "fs.read" in names


def test_allow_tools_shows_only_the_listed_tools(root: Path) -> None:
    options = reg_options(allow_tools=["fs.read", "asset.list"])

    names = [spec.name for spec in registry(root).visible(options)]

    assert names == ["asset.list", "fs.read"]


def test_allow_and_deny_entries_may_be_globs(root: Path) -> None:
    options = reg_options(allow_tools=["fs.*"], deny_tools=["fs.w*"])

    names = [spec.name for spec in registry(root).visible(options)]

    assert names == ["fs.edit", "fs.list", "fs.read", "fs.search"]


def test_deny_tools_wins_over_allow_tools() -> None:
    options = RuntimeOptions.of({"allow_tools": ["fs.read"], "deny_tools": ["fs.read"]})

    assert list_rule("fs.read", options) == "deny_tools"
    assert list_rule("fs.list", options) == "allow_tools"
    every = RuntimeOptions.of({"allow_tools": None, "deny_tools": []})
    assert list_rule("fs.list", every) is None


def test_model_tools_offer_name_description_and_schema_of_visible_tools_only(root: Path) -> None:
    options = reg_options(allow_tools=["fs.read"])

    tools = registry(root).model_tools(options)

    assert len(tools) == 1
    assert sorted(tools[0]) == ["description", "input_schema", "name"]
    assert tools[0]["name"] == "fs.read"
    assert tools[0]["input_schema"]["required"] == ["path"]


def test_list_tools_carries_the_safety_metadata(root: Path) -> None:
    options = reg_options(allow_tools=["command.run"])

    (entry,) = registry(root).list_tools(options)

    assert entry["name"] == "command.run"
    assert entry["runs_commands"] is True
    assert entry["writes"] is False
    assert entry["network_capable"] is False
    assert entry["read_only"] is False


def test_the_asset_summary_counts_valid_assets_and_lists_the_invalid_ones(root: Path) -> None:
    summary = registry(root).asset_summary()

    assert summary["generation"] == 1
    assert summary["counts"] == {"commands": 1, "skills": 1, "workflows": 1}
    assert [(e["type"], e["key"]) for e in summary["errors"]] == [("commands", "broken")]


def test_the_catalog_is_the_one_the_generated_tools_were_built_from(root: Path) -> None:
    reg = registry(root)

    asset = reg.catalog.get("commands", "hello")

    assert asset is not None
    assert asset.argv == ["echo", "hello", "{{name}}"]


def test_strict_asset_loading_refuses_a_project_with_an_invalid_asset(root: Path) -> None:
    with pytest.raises(AssetLoadFailedError) as exc:
        registry(root, strict_asset_loading=True)

    assert exc.value.details["key"] == "broken"


def test_a_project_without_assets_has_only_the_builtin_tools(tmp_path: Path) -> None:
    reg = registry(tmp_path)

    assert [spec.name for spec in reg.specs()] == BUILTINS
    assert reg.asset_summary()["counts"] == {"commands": 0, "skills": 0, "workflows": 0}


def test_a_tool_module_that_fails_to_import_is_reported_and_the_others_still_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import runtime.tools.registry as registry_module

    modules = (*registry_module.BUILTIN_MODULES, "runtime.tools.not_written_yet")
    monkeypatch.setattr(registry_module, "BUILTIN_MODULES", modules)

    reg = registry(tmp_path)

    assert list(reg.import_errors) == ["runtime.tools.not_written_yet"]
    assert reg.import_errors["runtime.tools.not_written_yet"].startswith("ModuleNotFoundError")
    assert reg.get("fs.read") is not None


def test_a_tool_module_that_fails_to_import_is_a_project_problem_until_the_next_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import runtime.tools.registry as registry_module

    modules = (*registry_module.BUILTIN_MODULES, "runtime.tools.not_written_yet")
    monkeypatch.setattr(registry_module, "BUILTIN_MODULES", modules)
    summary = registry(tmp_path).asset_summary()
    journal = Journal()
    loaded = ev.ProjectAssetsLoaded(counts=summary["counts"], errors=summary["errors"])
    journal.add(loaded, conversation_id=None, correlation_id="corr-p")

    problems = project_problems(journal.events, "p1")

    assert summary["errors"] == [
        {
            "type": "tool_module",
            "key": "runtime.tools.not_written_yet",
            "reason": "import_failed: ModuleNotFoundError: No module named "
            "'runtime.tools.not_written_yet'",
        }
    ]
    assert [(p["kind"], p["subject"], p["resolved"]) for p in problems] == [
        ("tool_module_failed", "tool_module runtime.tools.not_written_yet", False)
    ]


MISSPELT_MODULE = """
from runtime.tools.base import ToolSpec

SPECS = [ToolSpec(name="fs.move", description="Move a file.", input_schema={"type": "object"})]
TOOLS = {"fs.mvoe": lambda ctx, args: {}}
"""


def test_a_tools_key_that_is_not_its_specs_name_fails_the_registry_loudly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import runtime.tools.registry as registry_module

    (tmp_path / "misspelt_tools_module.py").write_text(MISSPELT_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    modules = (*registry_module.BUILTIN_MODULES, "misspelt_tools_module")
    monkeypatch.setattr(registry_module, "BUILTIN_MODULES", modules)

    with pytest.raises(RoostError) as caught:
        registry(tmp_path)

    assert caught.value.details == {
        "reason": "tool_spec_mismatch",
        "source": "misspelt_tools_module",
        "without_function": ["fs.move"],
        "without_spec": ["fs.mvoe"],
        "declared_twice": [],
    }


def test_two_specs_of_one_name_fail_the_registry_loudly() -> None:
    spec = ToolSpec(name="demo.echo", description="Echo.", input_schema={"type": "object"})

    with pytest.raises(RoostError, match=r"names declared twice: \['demo.echo'\]"):
        paired("demo", [spec, spec], {"demo.echo": lambda ctx, args: {}})


def test_every_builtin_tool_declares_its_path_arguments(tmp_path: Path) -> None:
    declared = {spec.name: spec.path_args for spec in registry(tmp_path).specs()}

    assert sorted(declared) == BUILTINS
    assert [name for name, path_args in declared.items() if path_args is None] == []
    assert (declared["fs.read"], declared["command.run"], declared["http.fetch"]) == (
        ("path",),
        ("cwd",),
        (),
    )


def test_a_registry_can_be_built_from_explicit_tools() -> None:
    spec = ToolSpec(name="demo.echo", description="Echo.", input_schema={"type": "object"})
    reg = ToolRegistry({"demo.echo": (spec, lambda ctx, args: dict(args))})

    assert reg.specs() == [spec]
    assert reg.asset_summary() == {
        "generation": 1,
        "counts": {"commands": 0, "skills": 0, "workflows": 0},
        "errors": [],
    }


def test_a_pickled_registry_keeps_its_specs_and_its_asset_version(root: Path) -> None:
    original = registry(root)
    write_asset(
        root,
        "workflows",
        "peek",
        WORKFLOW.replace('"fs.read"', '"fs.list"'),
    )
    copy = pickle.loads(pickle.dumps(original))

    assert copy.specs() == original.specs()
    entry = copy.get("workflow.run.peek")
    assert entry is not None
    plan = entry[1](ToolContext(root=str(root), options=reg_options()), {"p": "a.txt"})
    assert plan == {"workflow": "peek", "steps": [{"tool": "fs.read", "args": {"path": "a.txt"}}]}
