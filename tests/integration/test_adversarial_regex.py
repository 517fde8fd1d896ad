"""Catastrophic regexes through the real daemon: fs.search, fs.list globs, asset schemas.

With Python's ``re`` each of these patterns backtracks for longer than the test would
wait, holding the GIL of the project's ToolRunner. Matched with RE2 they answer at once:
the tests assert the answers (the matching lines, the refusal codes), never a duration.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime.client import Client
from runtime.errors import AssetLoadFailedError
from tests.integration.adversarial_helpers import (
    Call,
    Sentinel,
    World,
    daemon_world,
    first,
    recorded,
    start_projects,
)
from tests.integration.conftest import make_root

P, C = "rx", "c"
LONG = "a" * 50_000
"""A run of ``a`` on which ``(a+)+$`` and its kin backtrack exponentially in ``re``."""


def _workflow(pattern: str) -> str:
    schema = {
        "type": "object",
        "properties": {"tag": {"type": "string", "pattern": pattern}},
        "required": ["tag"],
    }
    steps = [{"tool": "fs.search", "args": {"pattern": "short", "path": "long.txt"}}]
    return (
        f"---\ndescription: Find a tag\ninput_schema: {json.dumps(schema)}\n"
        f"steps: {json.dumps(steps)}\n---\n"
    )


def _prepare(root: Path) -> None:
    (root / "long.txt").write_text(f"{LONG}!\n{LONG}\nshort\n")
    (root / ("a" * 200)).write_text("")
    (root / ("a" * 199 + "b")).write_text("")
    workflows = root / ".roost" / "workflows"
    workflows.mkdir(parents=True)
    (workflows / "find-tag.md").write_text(_workflow("^(a+)+$"))
    (workflows / "bad-tag.md").write_text(_workflow("^(?=a)"))


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The module's directory."""
    return tmp_path_factory.mktemp("adv-regex")


@pytest.fixture(scope="module")
def world(base: Path) -> Iterator[World]:
    """One daemon, one project with the files and assets above.

    Its 10 s tool timeout leaves room for a busy machine; a backtracking regex would take
    far longer.
    """
    with daemon_world(
        base,
        Sentinel(base / "sentinel"),
        lambda client, _: start_projects(
            client, base, {P: {"tool_timeout_ms": 10000}}, (C,), _prepare
        ),
    ) as running:
        yield running


def _run(client: Client, name: str, **args: Any) -> dict[str, Any]:
    return Call(P, C, name, args).run(client)


@pytest.mark.parametrize(
    ("pattern", "lines"),
    [
        (r"(?:a|a)+$", [2]),
        (r"(a+)+$", [2]),
        (r"(a|aa)+$", [2]),
        (r"(.*a){20}", [1, 2]),
    ],
)
def test_a_catastrophic_search_regex_gives_the_right_lines(
    world: World, pattern: str, lines: list[int]
) -> None:
    result = _run(world.client, "fs.search", pattern=pattern, regex=True, path="long.txt")
    assert result["status"] == "ok", result
    found = result["result"]
    assert [(m["path"], m["line"]) for m in found["matches"]] == [("long.txt", n) for n in lines]
    assert (found["truncated"], found["files_scanned"]) == (False, 1)


def test_other_calls_of_the_project_are_answered_while_searches_run(world: World) -> None:
    outcomes: dict[str, Any] = {}
    daemon = world.daemon
    assert daemon is not None

    def search(pattern: str) -> None:
        with daemon.client(timeout_s=60) as client:
            outcomes[pattern] = _run(
                client, "fs.search", pattern=pattern, regex=True, path="long.txt"
            )

    patterns = [r"(?:a|a)+$", r"(a+)+$", r"(a|aa)+$"]
    threads = [threading.Thread(target=search, args=(p,)) for p in patterns]
    for thread in threads:
        thread.start()
    listed = _run(world.client, "fs.list", glob="long.*")
    for thread in threads:
        thread.join(timeout=60)
    assert listed["status"] == "ok", listed
    assert listed["result"]["entries"] == [{"path": "long.txt", "type": "file"}]
    for pattern in patterns:
        found = outcomes[pattern]["result"]
        assert [m["line"] for m in found["matches"]] == [2], pattern


@pytest.mark.parametrize(
    ("pattern", "reason"),
    [
        (r"(\w+)\1", "unsupported_regex"),
        (r"(?P<q>a)(?P=q)", "unsupported_regex"),
        (r"a(?=!)", "unsupported_regex"),
        (r"a(?!!)", "unsupported_regex"),
        (r"(?<=a)!", "unsupported_regex"),
        (r"(?<!b)!", "unsupported_regex"),
        (r"(unclosed", "invalid_regex"),
        (r".{1000}", "regex_too_complex"),
    ],
)
def test_a_regex_re2_cannot_run_is_refused_with_its_reason(
    world: World, pattern: str, reason: str
) -> None:
    call = Call(P, C, "fs.search", {"pattern": pattern, "regex": True})
    result = call.run(world.client)
    assert result["status"] == "error", result
    got = {k: result["reason"].get(k) for k in ("code", "kind", "reason")}
    assert got == {"code": "invalid_tool_args", "kind": "invalid_type", "reason": reason}
    assert first(recorded(world.client, call), "tool.failed")["reason"]["reason"] == reason


def test_a_backtracking_glob_lists_the_right_names(world: World) -> None:
    result = _run(world.client, "fs.list", glob="*a*a*a*a*a*a*a*a*a*a*b")
    assert result["status"] == "ok", result
    assert result["result"]["entries"] == [{"path": "a" * 199 + "b", "type": "file"}]


def test_a_catastrophic_schema_pattern_refuses_a_long_input_at_once(world: World) -> None:
    result = _run(world.client, "workflow.run.find-tag", tag=LONG + "!")
    assert result["status"] == "error", result
    got = {k: result["reason"].get(k) for k in ("code", "kind", "key", "reason")}
    assert got == {
        "code": "invalid_tool_args",
        "kind": "invalid_type",
        "key": "tag",
        "reason": "pattern_mismatch",
    }


def test_a_catastrophic_schema_pattern_accepts_a_long_matching_input(world: World) -> None:
    result = _run(world.client, "workflow.run.find-tag", tag=LONG)
    assert result["status"] == "ok", result


def test_an_asset_whose_schema_pattern_re2_cannot_run_is_a_preview(world: World) -> None:
    result = _run(world.client, "asset.get", type="workflows", key="bad-tag")
    assert result["status"] == "ok", result
    got = result["result"]
    assert (got["valid"], got["reason"]) == (False, "invalid_input_schema")
    assert got["detail"].startswith("input_schema is not usable: 'properties.tag.pattern' ")
    assert got["detail"].endswith("[unsupported_regex]")
    tools = {t["name"] for t in world.client.list_tools(P)}
    assert ("workflow.run.find-tag" in tools, "workflow.run.bad-tag" in tools) == (True, False)


def test_strict_loading_refuses_to_start_a_project_with_that_asset(
    world: World, base: Path
) -> None:
    root = Path(make_root(base / "strict"))
    _prepare(root)
    with pytest.raises(AssetLoadFailedError) as caught:
        world.client.start_project(
            str(root), project_id="rx-strict", options={"strict_asset_loading": True}
        )
    assert caught.value.details == {
        "type": "workflows",
        "key": "bad-tag",
        "reason": "invalid_input_schema",
        "path": ".roost/workflows/bad-tag.md",
    }
