"""``mcp_servers``: option validation, tool names, confinement argv, URL checks; no daemon."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from runtime.errors import InvalidRuntimeOptError, ToolError
from runtime.guard.sandbox.layers import probe_layers
from runtime.option_table import RuntimeOptions
from runtime.policy.mcp_servers import PROBLEMS
from runtime.policy.options import validate_options
from runtime.tools.mcp_client.connection import check_url, stdio_spec
from runtime.tools.mcp_client.tools import mcp_tools, split_tool_name, tool_name


def _problem(servers: Any) -> tuple[str, int | None]:
    with pytest.raises(InvalidRuntimeOptError) as caught:
        validate_options({"mcp_servers": servers})
    error = caught.value
    assert error.key == "mcp_servers" and error.reason == "invalid_entry"
    assert error.details["problem"] in PROBLEMS
    return error.details["problem"], error.details.get("index")


def test_valid_entries_are_normalized_and_sorted_by_name() -> None:
    options = validate_options(
        {
            "mcp_servers": [
                {"name": "web", "url": " https://mcp.example.com/mcp "},
                {"name": "fx", "command": ["python3", "server.py"], "env": {"B": "2", "A": "1"}},
            ]
        }
    )
    assert options["mcp_servers"] == [
        {"name": "fx", "command": ["python3", "server.py"], "env": {"A": "1", "B": "2"}},
        {"name": "web", "url": "https://mcp.example.com/mcp"},
    ]
    assert RuntimeOptions.of(options).mcp_servers[0]["name"] == "fx"
    assert validate_options({})["mcp_servers"] == []


@pytest.mark.parametrize(
    ("servers", "problem", "index"),
    [
        ({"name": "fx"}, "expected_list", None),
        (["fx"], "expected_object", 0),
        ([{"name": "fx", "command": ["a"], "cwd": "/"}], "unknown_field", 0),
        ([{"name": "Fx", "command": ["a"]}], "invalid_name", 0),
        ([{"name": "a.b", "command": ["a"]}], "invalid_name", 0),
        ([{"name": "", "command": ["a"]}], "invalid_name", 0),
        ([{"command": ["a"]}], "invalid_name", 0),
        (
            [{"name": "fx", "command": ["a"]}, {"name": "fx", "url": "http://h/"}],
            "duplicate_name",
            1,
        ),
        ([{"name": "fx", "command": ["a"], "url": "http://h/"}], "command_and_url", 0),
        ([{"name": "fx"}], "no_command_or_url", 0),
        ([{"name": "fx", "command": "python3 server.py"}], "invalid_command", 0),
        ([{"name": "fx", "command": []}], "invalid_command", 0),
        ([{"name": "fx", "command": ["a", ""]}], "invalid_command", 0),
        ([{"name": "fx", "url": "ftp://h/mcp"}], "url_scheme_not_http", 0),
        ([{"name": "fx", "url": "unix:///run/x.sock"}], "url_scheme_not_http", 0),
        ([{"name": "fx", "url": "http:///mcp"}], "invalid_url", 0),
        ([{"name": "fx", "url": 5}], "invalid_url", 0),
        ([{"name": "fx", "command": ["a"], "env": {"A": 1}}], "invalid_env", 0),
        ([{"name": "fx", "url": "http://h/", "env": {}}], "env_with_url", 0),
    ],
)
def test_bad_entries_are_refused_with_a_stable_problem(
    servers: Any, problem: str, index: int | None
) -> None:
    assert _problem(servers) == (problem, index)


def test_tool_names_map_both_ways() -> None:
    assert tool_name("fx", "echo") == "mcp.fx.echo"
    assert split_tool_name("mcp.fx.echo") == ("fx", "echo")
    assert split_tool_name("mcp.fx.ns.tool") == ("fx", "ns.tool")  # server names have no dots
    assert split_tool_name("mcp.fx") is None
    assert split_tool_name("fs.read") is None


def test_without_mcp_in_the_protocol_allowlist_nothing_is_started(tmp_path: Path) -> None:
    marker = tmp_path / "started"
    command = [sys.executable, "-c", f"open({str(marker)!r}, 'w')"]
    options = validate_options(
        {"mcp_servers": [{"name": "fx", "command": command}], "protocol_allowlist": ["a2a"]}
    )
    specs, fns, errors = mcp_tools(str(tmp_path), options)
    assert (specs, fns) == ([], {})
    assert [(e["type"], e["key"]) for e in errors] == [("mcp_server", "fx")]
    assert errors[0]["reason"].startswith("protocol_not_allowed")
    assert not marker.exists()


@pytest.mark.slow
def test_a_server_that_cannot_start_leaves_an_error_not_a_failure(tmp_path: Path) -> None:
    options = validate_options({"mcp_servers": [{"name": "gone", "command": ["/nonexistent/x"]}]})
    specs, _, errors = mcp_tools(str(tmp_path), options)
    assert specs == []
    assert [(e["type"], e["key"]) for e in errors] == [("mcp_server", "gone")]


@pytest.mark.skipif(
    not probe_layers()["mount_isolation"]["available"], reason="bubblewrap is not usable here"
)
@pytest.mark.parametrize("egress", ["deny", "allow"])
def test_a_stdio_server_runs_inside_bubblewrap_with_a_cleared_env(
    tmp_path: Path, egress: str
) -> None:
    options = validate_options(
        {
            "network_egress_policy": egress,
            "tool_env_allowlist": ["FX_*"],
            "mcp_servers": [{"name": "fx", "command": ["srv", "--x"], "env": {"FX_A": "1"}}],
        }
    )
    entry = options["mcp_servers"][0]
    spec = stdio_spec(entry, str(tmp_path), options, str(tmp_path / "home"))
    assert spec.argv == ["srv", "--x"]
    assert spec.allow_network == (egress == "allow")
    assert spec.view.writable == (str(tmp_path), str(tmp_path / "home"))
    assert spec.env["FX_A"] == "1" and spec.env["HOME"] == str(tmp_path / "home")
    assert "ROOST_HOME" not in spec.env


def test_env_keys_outside_the_allowlist_refuse_the_start(tmp_path: Path) -> None:
    options = validate_options(
        {"mcp_servers": [{"name": "fx", "command": ["srv"], "env": {"SECRET": "x"}}]}
    )
    with pytest.raises(ToolError) as caught:
        stdio_spec(options["mcp_servers"][0], str(tmp_path), options, str(tmp_path))
    assert caught.value.code in ("env_vars_not_allowed", "isolation_unavailable")


@pytest.mark.parametrize(
    ("url", "extra", "code"),
    [
        ("http://127.0.0.1:9/mcp", {}, "network_endpoint_denied"),
        (
            "http://169.254.169.254/mcp",
            {"network_egress_policy": "allow"},
            "network_endpoint_denied",
        ),
        ("http://mcp.example.com/mcp", {}, "network_denied"),
        (
            "https://mcp.example.com/mcp",
            {"network_allowed_schemes": ["http"]},
            "network_protocol_denied",
        ),
    ],
)
def test_http_urls_pass_the_egress_policy_first(url: str, extra: dict[str, Any], code: str) -> None:
    with pytest.raises(ToolError) as caught:
        check_url(url, validate_options(extra))
    assert caught.value.code == code


def test_an_allowlisted_loopback_url_passes() -> None:
    check_url("http://127.0.0.1:9/mcp", validate_options({"network_allowlist": ["127.0.0.1"]}))


DESCRIBING_SERVER = """
import sys
from mcp.server.mcpserver import MCPServer

server = MCPServer("describing")
with open(sys.argv[1], encoding="utf-8") as f:
    said = f.read()


@server.tool(description="Reads: " + said)
def told() -> str:
    return "x"


server.run()
"""


@pytest.mark.skipif(
    not probe_layers()["mount_isolation"]["available"], reason="bubblewrap is not usable here"
)
@pytest.mark.slow
def test_a_known_secret_value_in_a_servers_tool_listing_is_masked(tmp_path: Path) -> None:
    value = "Lst9Secret-Value_30k"
    (tmp_path / ".env").write_text(f"SERVICE_ACCESS={value}\n")
    (tmp_path / "said.txt").write_text(value[::-1])
    (tmp_path / "server.py").write_text(DESCRIBING_SERVER)
    command = [sys.executable, str(tmp_path / "server.py"), str(tmp_path / "said.txt")]
    options = validate_options({"mcp_servers": [{"name": "fx", "command": command}]})

    specs, _, errors = mcp_tools(str(tmp_path), options)

    assert errors == []
    assert [s.description for s in specs] == ["Reads: [REDACTED:secret_value]"]
