"""MCP-safe tool names: every name a client could refuse is mapped, collision-free."""

from __future__ import annotations

import random
import re

from runtime.mcp_server.names import SAFE_NAME, hashed_name, name_map, plain_name
from runtime.mcp_server.translate import mcp_tool
from runtime.policy.options import validate_options
from runtime.tools.registry import ToolRegistry

STRICTEST = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
"""Claude Desktop's pattern (and the OpenAI function-name pattern)."""


def assert_safe_and_unique(mapped: dict[str, str]) -> None:
    assert all(STRICTEST.fullmatch(s) and SAFE_NAME.fullmatch(s) for s in mapped.values())
    assert len(set(mapped.values())) == len(mapped)


def test_dots_become_underscores_and_safe_names_stay() -> None:
    names = ["fs.read", "command.run", "command.run.build", "mcp.docs.search", "plain_name"]
    assert name_map(names) == {
        "fs.read": "fs_read",
        "command.run": "command_run",
        "command.run.build": "command_run_build",
        "mcp.docs.search": "mcp_docs_search",
        "plain_name": "plain_name",
    }


def test_every_built_in_tool_gets_a_name_the_strictest_client_accepts(tmp_path) -> None:
    options = validate_options({})
    listed = ToolRegistry.for_project(str(tmp_path), options).list_tools(options)
    mapped = name_map(d["name"] for d in listed)
    assert_safe_and_unique(mapped)
    assert mapped["fs.read"] == "fs_read"
    tool = mcp_tool(listed[0], mapped[listed[0]["name"]])
    assert (tool.name, tool.title) == (mapped[listed[0]["name"]], listed[0]["name"])
    assert tool.model_dump(by_alias=True)["_meta"] == {"roost/name": listed[0]["name"]}


def test_colliding_names_are_all_hashed_whatever_the_order() -> None:
    names = ["mcp.a_b.c", "mcp.a.b_c", "mcp.x.y"]
    mapped = name_map(names)
    assert mapped["mcp.x.y"] == "mcp_x_y"
    assert mapped["mcp.a_b.c"] == hashed_name("mcp.a_b.c")
    assert mapped["mcp.a.b_c"] == hashed_name("mcp.a.b_c")
    assert re.fullmatch(r"mcp_a_b_c_[0-9a-f]{8}", mapped["mcp.a.b_c"])
    assert_safe_and_unique(mapped)
    assert name_map(reversed(names)) == mapped


def test_a_name_that_is_safe_already_keeps_it_against_a_dotted_twin() -> None:
    mapped = name_map(["mcp_a_b", "mcp.a.b"])
    assert mapped == {"mcp_a_b": "mcp_a_b", "mcp.a.b": hashed_name("mcp.a.b")}


def test_long_names_and_other_characters_are_cut_deterministically() -> None:
    long = "mcp.server." + "x" * 120
    odd = "mcp.s.tool/with:odd chars"
    digit = "9lives.tool"
    mapped = name_map([long, odd, digit])
    assert_safe_and_unique(mapped)
    assert len(mapped[long]) == 64
    assert mapped[long] == hashed_name(long) == name_map([long])[long]
    assert mapped[long].startswith("mcp_server_xxx")
    assert mapped[odd] == "mcp_s_tool_with_odd_chars"
    assert mapped[digit] == hashed_name(digit)
    assert mapped[digit].startswith("t_9lives_tool_")


def test_a_hashed_name_that_is_taken_gets_another_one() -> None:
    taken = hashed_name("mcp.a.b")
    mapped = name_map([taken, "mcp.a.b", "mcp_a_b"])
    assert mapped[taken] == taken
    assert mapped["mcp.a.b"] == hashed_name("mcp.a.b", salt=1)
    assert_safe_and_unique(mapped)


def test_random_name_sets_map_collision_free() -> None:
    rng = random.Random(19)
    alphabet = "ab_.-9Z/"
    for _ in range(300):
        names = {
            "mcp." + "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 90)))
            for _ in range(rng.randint(1, 30))
        }
        mapped = name_map(names)
        assert set(mapped) == names
        assert_safe_and_unique(mapped)
        assert all(s == n or s not in names for n, s in mapped.items())  # never another's name


def test_plain_name_keeps_letters_digits_underscores_and_dashes() -> None:
    assert plain_name("a.b-c_d/e") == "a_b-c_d_e"
