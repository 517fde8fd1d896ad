"""Project assets: parsing each kind, invalid assets, strict mode, templating."""

from __future__ import annotations

import os

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.errors import AssetLoadFailedError
from runtime.tools.asset_store import (
    MAX_ASSET_BYTES,
    Asset,
    AssetCatalog,
    load_assets,
    render_argv,
    render_step_args,
)
from tests.runtime.asset_helpers import ECHO, GIT_LOG, TRIAGE, cmd, only, tool_error, write

# --- parsing each kind --------------------------------------------------------------------


def test_a_skill_without_frontmatter_takes_its_description_from_the_first_line(tmp_path):
    write(tmp_path, "skills", "review.md", "\n## Code review\n\nLook for bugs.\n")
    asset = only(tmp_path)
    assert (asset.type, asset.key, asset.valid, asset.reason) == ("skills", "review", True, None)
    assert asset.description == "Code review"
    assert asset.body == "\n## Code review\n\nLook for bugs.\n"
    assert asset.path == ".roost/skills/review.md"
    assert (asset.input_schema, asset.argv, asset.steps) == (None, None, None)


def test_a_skill_description_comes_from_its_frontmatter(tmp_path):
    write(tmp_path, "skills", "review.md", "---\ndescription: 'Review code'\n---\nBody\n")
    asset = only(tmp_path)
    assert (asset.description, asset.body) == ("Review code", "Body\n")


def test_a_command_parses_its_schema_and_argv_template(tmp_path):
    write(tmp_path, "commands", "git-log.md", GIT_LOG)
    asset = only(tmp_path)
    assert asset.valid
    assert asset.description == "Show recent commits"
    assert asset.argv == ["git", "log", "-n", "{{count}}", "--format=%h {{count}}"]
    assert asset.input_schema == {
        "type": "object",
        "properties": {"count": {"type": "integer", "default": 5}},
    }
    assert asset.body == "# Git log\n\nPrints the last commits.\n"


def test_a_workflow_parses_multi_line_json_schema_and_steps(tmp_path):
    write(tmp_path, "workflows", "triage.md", TRIAGE)
    asset = only(tmp_path)
    assert asset.valid
    assert asset.input_schema["required"] == ["path"]
    assert asset.steps == [
        {"tool": "fs.read", "args": {"path": "{{path}}", "limit": "{{limit}}"}},
        {"tool": "command.run.git-log", "args": {"count": 3}},
    ]


def test_a_command_without_input_schema_takes_no_inputs(tmp_path):
    write(tmp_path, "commands", "status.md", '---\nargv: ["git", "status"]\n---\n')
    asset = only(tmp_path)
    assert asset.input_schema == {"type": "object", "properties": {}, "additionalProperties": False}
    err = tool_error(render_argv, asset, {"x": 1})
    assert (err.details["kind"], err.details["keys"]) == ("unexpected_args", ["x"])


def test_a_project_without_a_roost_directory_has_an_empty_catalog(tmp_path):
    catalog = load_assets(str(tmp_path))
    assert catalog.assets == []
    assert catalog.counts() == {"commands": 0, "skills": 0, "workflows": 0}
    assert catalog.errors() == []


def test_the_catalog_is_sorted_by_type_then_key_and_ignores_other_files(tmp_path):
    write(tmp_path, "workflows", "b.md", TRIAGE)
    write(tmp_path, "skills", "z.md", "z")
    write(tmp_path, "skills", "a.md", "a")
    write(tmp_path, "skills", "notes.txt", "not an asset")
    write(tmp_path, "skills", ".hidden.md", "editor leftovers")
    write(tmp_path, "commands", "c.md", GIT_LOG)
    (tmp_path / ".roost" / "skills" / "sub.md").mkdir()
    catalog = load_assets(str(tmp_path), generation=7)
    assert [(a.type, a.key) for a in catalog.assets] == [
        ("commands", "c"),
        ("skills", "a"),
        ("skills", "sub"),
        ("skills", "z"),
        ("workflows", "b"),
    ]
    assert catalog.generation == 7
    assert catalog.counts() == {"commands": 1, "skills": 2, "workflows": 1}
    assert catalog.errors() == [{"type": "skills", "key": "sub", "reason": "not_a_regular_file"}]


# --- invalid assets -----------------------------------------------------------------------


SCHEMA_X = 'input_schema: {"type": "object", "properties": {"x": {"type": "string"}}}'


@pytest.mark.parametrize(
    ("kind", "text", "reason"),
    [
        ("commands", cmd("description: no argv"), "missing_argv"),
        ("commands", cmd('argv: "git log"'), "invalid_argv"),
        ("commands", cmd("argv: []"), "invalid_argv"),
        ("commands", cmd('argv: ["", "x"]'), "invalid_argv"),
        ("commands", cmd('argv: ["git", 1]'), "invalid_argv"),
        ("commands", cmd('argv: ["echo", "{{name}}"]'), "unknown_placeholder"),
        ("commands", cmd(f'{SCHEMA_X}\nargv: ["echo", "{{{{ x"]'), "invalid_placeholder"),
        ("commands", cmd('input_schema: {"oneOf": []}\nargv: ["ls"]'), "invalid_input_schema"),
        (
            "commands",
            cmd('input_schema: {"type": "string"}\nargv: ["ls"]'),
            "invalid_input_schema",
        ),
        ("commands", cmd('input_schema: ["x"]\nargv: ["ls"]'), "invalid_input_schema"),
        (
            "commands",
            cmd(
                'input_schema: {"type": "object", "properties": '
                '{"n": {"type": "integer", "default": "five"}}}\nargv: ["ls"]'
            ),
            "invalid_input_schema",
        ),
        ("commands", cmd('description: ["a"]\nargv: ["ls"]'), "invalid_description"),
        ("commands", cmd("argv: [oops"), "invalid_frontmatter"),
        ("workflows", cmd("description: nothing to do"), "missing_steps"),
        ("workflows", cmd('steps: {"tool": "fs.read"}'), "invalid_steps"),
        ("workflows", cmd("steps: []"), "invalid_steps"),
        ("workflows", cmd('steps: ["fs.read"]'), "invalid_steps"),
        ("workflows", cmd('steps: [{"args": {}}]'), "invalid_steps"),
        ("workflows", cmd('steps: [{"tool": "fs.read", "args": []}]'), "invalid_steps"),
        ("workflows", cmd('steps: [{"tool": "fs.read", "when": "x"}]'), "invalid_steps"),
        ("workflows", cmd('steps: [{"tool": "workflow.run.other"}]'), "invalid_steps"),
        ("workflows", cmd('steps: [{"tool": "fs read"}]'), "invalid_steps"),
        (
            "workflows",
            cmd('steps: [{"tool": "fs.read", "args": {"path": ["{{missing}}"]}}]'),
            "unknown_placeholder",
        ),
        ("skills", "---\ntitle\n---\n", "invalid_frontmatter"),
        ("skills", "---\ndescription: x\n", "unterminated_frontmatter"),
    ],
)
def test_an_invalid_asset_degrades_to_a_preview_with_its_reason(tmp_path, kind, text, reason):
    write(tmp_path, kind, "thing.md", text)
    asset = only(tmp_path)
    assert (asset.key, asset.valid, asset.reason) == ("thing", False, reason)
    assert asset.body == text
    assert asset.detail
    assert load_assets(str(tmp_path)).errors() == [{"type": kind, "key": "thing", "reason": reason}]


@pytest.mark.parametrize("name", ["Upper.md", "a.b.md", "-dash.md", "x" * 65 + ".md", "sp ace.md"])
def test_a_file_name_that_is_not_a_valid_key_is_invalid(tmp_path, name: str):
    write(tmp_path, "skills", name, "fine text")
    asset = only(tmp_path)
    assert (asset.key, asset.valid, asset.reason) == (name[:-3], False, "invalid_key")


def test_a_file_name_that_is_not_utf8_is_reported_printably(tmp_path):
    (tmp_path / ".roost" / "skills").mkdir(parents=True)
    path = os.path.join(os.fsencode(tmp_path), b".roost", b"skills", b"bad\xff\n.md")
    with open(path, "wb") as f:
        f.write(b"text")
    asset = only(tmp_path)
    assert (asset.key, asset.reason) == ("bad\ufffd\ufffd", "invalid_key")
    assert asset.path == ".roost/skills/bad\ufffd\ufffd.md"
    assert msgspec.json.decode(msgspec.json.encode(asset))["key"] == "bad\ufffd\ufffd"


def test_a_file_that_is_not_utf8_is_invalid_with_a_readable_preview(tmp_path):
    write(tmp_path, "skills", "bin.md", b"ok \xff\xfe end")
    asset = only(tmp_path)
    assert (asset.valid, asset.reason, asset.body) == (
        False,
        "invalid_encoding",
        "ok \ufffd\ufffd end",
    )


def test_a_file_larger_than_the_cap_is_invalid_as_too_large(tmp_path):
    write(tmp_path, "skills", "big.md", "a" * (MAX_ASSET_BYTES + 1))
    asset = only(tmp_path)
    assert (asset.valid, asset.reason, asset.body) == (False, "too_large", "a" * 2000)


def test_a_file_exactly_at_the_cap_is_parsed(tmp_path):
    write(tmp_path, "skills", "big.md", "a" * MAX_ASSET_BYTES)
    assert only(tmp_path).valid


def test_a_fifo_is_not_a_regular_file_and_is_not_waited_on(tmp_path):
    (tmp_path / ".roost" / "skills").mkdir(parents=True)
    os.mkfifo(tmp_path / ".roost" / "skills" / "pipe.md")
    asset = only(tmp_path)
    assert (asset.valid, asset.reason) == (False, "not_a_regular_file")


def test_a_symlinked_asset_pointing_outside_the_root_is_not_read(tmp_path):
    root = tmp_path / "root"
    secret = tmp_path / "outside.md"
    secret.write_text("---\ndescription: TOP SECRET\n---\nTOP SECRET\n")
    (root / ".roost" / "skills").mkdir(parents=True)
    (root / ".roost" / "skills" / "leak.md").symlink_to(secret)
    asset = only(root)
    assert (asset.key, asset.valid, asset.reason) == ("leak", False, "symlink")
    assert (asset.body, asset.description) == ("", "")


def test_a_symlink_inside_the_root_is_not_followed_either(tmp_path):
    write(tmp_path, "skills", "real.md", "real")
    (tmp_path / ".roost" / "skills" / "alias.md").symlink_to("real.md")
    reasons = {a.key: a.reason for a in load_assets(str(tmp_path)).assets}
    assert reasons == {"alias": "symlink", "real": None}


@pytest.mark.parametrize("link", [".roost", ".roost/skills"])
def test_a_symlinked_directory_is_skipped(tmp_path, link: str):
    outside = tmp_path / "outside"
    write(outside, "skills", "x.md", "outside")
    root = tmp_path / "root"
    (root / link).parent.mkdir(parents=True)
    (root / link).symlink_to(outside / link, target_is_directory=True)
    assert load_assets(str(root)).assets == []


# --- schema patterns (RE2) ----------------------------------------------------------------


def _tag_command(pattern: str, default: str | None = None) -> str:
    tag: dict[str, object] = {"type": "string", "pattern": pattern}
    if default is not None:
        tag["default"] = default
    schema = {"type": "object", "properties": {"tag": tag}}
    return cmd(
        f'input_schema: {msgspec.json.encode(schema).decode()}\nargv: ["echo", "{{{{tag}}}}"]'
    )


def test_a_catastrophic_schema_pattern_is_matched_in_linear_time(tmp_path):
    write(tmp_path, "commands", "tag.md", _tag_command("^(a+)+$"))
    asset = only(tmp_path)
    assert asset.valid
    assert render_argv(asset, {"tag": "a" * 50_000}) == ["echo", "a" * 50_000]
    err = tool_error(render_argv, asset, {"tag": "a" * 50_000 + "!"})
    assert (err.code, err.details["key"], err.details["reason"]) == (
        "invalid_tool_args",
        "tag",
        "pattern_mismatch",
    )


def test_a_default_checked_against_a_catastrophic_pattern_at_load_does_not_hang(tmp_path):
    write(tmp_path, "commands", "tag.md", _tag_command("^(a|aa)+$", default="a" * 50_000 + "!"))
    asset = only(tmp_path)
    assert (asset.valid, asset.reason) == (False, "invalid_input_schema")
    assert asset.detail is not None and "must match the pattern '^(a|aa)+$'" in asset.detail


@pytest.mark.parametrize(
    ("pattern", "reason"),
    [
        (r"^(\w)\1$", "unsupported_regex"),
        ("^(?=a)", "unsupported_regex"),
        ("^(?<!a)b", "unsupported_regex"),
        ("^(", "invalid_regex"),
        ("^a{1001}$", "regex_too_complex"),
    ],
)
def test_a_schema_pattern_re2_cannot_run_makes_the_asset_invalid(tmp_path, pattern, reason):
    write(tmp_path, "commands", "tag.md", _tag_command(pattern))
    asset = only(tmp_path)
    assert (asset.valid, asset.reason) == (False, "invalid_input_schema")
    assert asset.detail is not None
    assert asset.detail.startswith("input_schema is not usable: 'properties.tag.pattern' ")
    assert asset.detail.endswith(f"[{reason}]")


def test_strict_loading_refuses_a_schema_pattern_re2_cannot_run(tmp_path):
    write(tmp_path, "commands", "tag.md", _tag_command("^(?=a)"))
    with pytest.raises(AssetLoadFailedError) as exc:
        load_assets(str(tmp_path), strict=True)
    assert exc.value.details == {
        "type": "commands",
        "key": "tag",
        "reason": "invalid_input_schema",
        "path": ".roost/commands/tag.md",
    }


# --- strict mode --------------------------------------------------------------------------


def test_strict_loading_raises_for_the_first_invalid_asset_with_its_reason(tmp_path):
    write(tmp_path, "skills", "ok.md", "fine")
    write(tmp_path, "workflows", "a.md", cmd("steps: 3"))
    write(tmp_path, "commands", "b.md", cmd("description: none"))
    with pytest.raises(AssetLoadFailedError) as exc:
        load_assets(str(tmp_path), strict=True)
    err = exc.value
    assert err.code == "asset_load_failed"
    assert err.details == {
        "type": "commands",
        "key": "b",
        "reason": "missing_argv",
        "path": ".roost/commands/b.md",
    }
    assert err.message.startswith("asset .roost/commands/b.md is invalid (missing_argv): ")


def test_strict_loading_of_valid_assets_returns_the_catalog(tmp_path):
    write(tmp_path, "commands", "git-log.md", GIT_LOG)
    assert load_assets(str(tmp_path), strict=True).counts()["commands"] == 1


# --- catalog queries ----------------------------------------------------------------------


def test_search_puts_key_matches_first_then_sorts_by_key(tmp_path):
    write(tmp_path, "skills", "alpha.md", "mentions Deploy in the body")
    write(tmp_path, "skills", "deploy.md", "how to ship")
    write(tmp_path, "skills", "beta.md", "---\ndescription: Deploy helper\n---\n")
    write(tmp_path, "skills", "gamma.md", "unrelated")
    catalog = load_assets(str(tmp_path))
    assert [a.key for a in catalog.search("skills", "DEPLOY")] == ["deploy", "alpha", "beta"]
    assert catalog.search("commands", "deploy") == []


def test_get_finds_an_asset_by_type_and_key_only(tmp_path):
    write(tmp_path, "skills", "same.md", "a skill")
    write(tmp_path, "commands", "same.md", cmd('argv: ["true"]'))
    catalog = load_assets(str(tmp_path))
    assert catalog.get("commands", "same").argv == ["true"]
    assert catalog.get("skills", "same").body == "a skill"
    assert catalog.get("workflows", "same") is None
    assert AssetCatalog().get("skills", "same") is None


# --- templating ---------------------------------------------------------------------------


def test_a_hostile_input_stays_one_argv_element(tmp_path):
    write(tmp_path, "commands", "echo.md", ECHO)
    assert render_argv(only(tmp_path), {"msg": "a; rm -rf /"}) == ["echo", "a; rm -rf /"]


def test_placeholders_substitute_inside_an_element_and_defaults_apply(tmp_path):
    write(tmp_path, "commands", "git-log.md", GIT_LOG)
    asset = only(tmp_path)
    assert render_argv(asset, {}) == ["git", "log", "-n", "5", "--format=%h 5"]
    assert render_argv(asset, {"count": 12}) == ["git", "log", "-n", "12", "--format=%h 12"]


def test_a_substituted_value_is_never_templated_again(tmp_path):
    write(tmp_path, "commands", "echo.md", ECHO)
    assert render_argv(only(tmp_path), {"msg": "{{msg}} $(id)"}) == ["echo", "{{msg}} $(id)"]


def test_a_missing_required_input_fails_as_invalid_tool_args(tmp_path):
    write(tmp_path, "commands", "echo.md", ECHO)
    err = tool_error(render_argv, only(tmp_path), {})
    assert (err.code, err.details["kind"], err.details["keys"]) == (
        "invalid_tool_args",
        "missing_required_args",
        ["msg"],
    )


def test_an_input_of_the_wrong_type_fails_as_invalid_type(tmp_path):
    write(tmp_path, "commands", "echo.md", ECHO)
    err = tool_error(render_argv, only(tmp_path), {"msg": 5})
    assert (err.code, err.details["kind"], err.details["key"]) == (
        "invalid_tool_args",
        "invalid_type",
        "msg",
    )


@settings(max_examples=100)
@given(st.text())
def test_any_input_string_becomes_exactly_one_argv_element(text: str):
    asset = Asset(
        type="commands",
        key="echo",
        input_schema={"type": "object", "properties": {"msg": {"type": "string"}}},
        argv=["echo", "{{msg}}", "--"],
    )
    assert render_argv(asset, {"msg": text}) == ["echo", text, "--"]


def test_step_args_keep_the_type_of_a_whole_placeholder_and_render_nested_strings():
    args = {
        "limit": "{{n}}",
        "path": "src/{{name}}.py",
        "nested": [{"{{name}}": ["{{ n }}", "n={{n}}"]}],
        "fixed": 3,
    }
    assert render_step_args(args, {"n": 7, "name": "main"}) == {
        "limit": 7,
        "path": "src/main.py",
        "nested": [{"{{name}}": [7, "n=7"]}],
        "fixed": 3,
    }


def test_a_step_placeholder_without_an_input_fails_as_missing():
    err = tool_error(render_step_args, {"path": "{{path}}", "x": "a{{y}}"}, {})
    assert (err.details["kind"], err.details["keys"]) == ("missing_required_args", ["path"])


def test_past_the_per_type_cap_the_rest_of_a_directory_is_one_invalid_entry(tmp_path, monkeypatch):
    import runtime.tools.asset_store as store

    monkeypatch.setattr(store, "MAX_ASSETS_PER_TYPE", 3)
    skills = tmp_path / ".roost" / "skills"
    skills.mkdir(parents=True)
    for index in range(5):
        (skills / f"s{index}.md").write_text(f"# Skill {index}\n")

    catalog = load_assets(str(tmp_path))

    assert [a.key for a in catalog.assets if a.valid] == ["s0", "s1", "s2"]
    assert catalog.errors() == [{"type": "skills", "key": "+2", "reason": "too_many_assets"}]


def test_past_the_catalog_byte_budget_files_are_not_read(tmp_path, monkeypatch):
    import runtime.tools.asset_store as store

    monkeypatch.setattr(store, "MAX_CATALOG_BYTES", 100)
    skills = tmp_path / ".roost" / "skills"
    skills.mkdir(parents=True)
    (skills / "a.md").write_text("# A\n" + "x" * 120)
    (skills / "b.md").write_text("# B\n")

    catalog = load_assets(str(tmp_path))

    assert catalog.get("skills", "a").valid
    assert catalog.get("skills", "b").reason == "too_large"
