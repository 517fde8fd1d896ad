"""The plain core of roost mcp serve: descriptors → MCP tools, results → MCP content, URIs."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import anyio
import mcp_types as types
import msgspec
import pytest

from runtime.errors import ProjectNotFoundError
from runtime.mcp_server.loopback import (
    SameUserOnly,
    decode_address,
    holder_refusal,
    peer_socket,
    peer_uid,
    socket_holders,
)
from runtime.mcp_server.translate import (
    AddressNotLoopbackError,
    UnknownResourceError,
    call_result,
    failure_result,
    incident_uri,
    mcp_tool,
    parse_http_address,
    parse_uri,
    reason_line,
    resource_templates,
    resources,
    timeline_uri,
)
from runtime.policy.options import validate_options
from runtime.tools.registry import ToolRegistry


def test_every_built_in_tool_becomes_an_mcp_tool_with_its_schema(tmp_path) -> None:
    options = validate_options({})
    listed = ToolRegistry.for_project(str(tmp_path), options).list_tools(options)
    tools = [mcp_tool(d) for d in listed]

    assert [t.name for t in tools] == [d["name"] for d in listed]
    for tool, descriptor in zip(tools, listed, strict=True):
        assert tool.input_schema == descriptor["input_schema"]
        assert tool.input_schema["type"] == "object"
        assert tool.description == descriptor["description"]
    wire = {t.name: t.model_dump(by_alias=True, exclude_none=True) for t in tools}
    assert wire["fs.read"]["inputSchema"]["required"] == ["path"]
    assert wire["fs.read"]["annotations"] == {
        "readOnlyHint": True,
        "destructiveHint": False,
        "openWorldHint": False,
    }
    assert wire["fs.write"]["annotations"]["destructiveHint"] is True
    assert wire["command.run"]["annotations"]["openWorldHint"] is True
    assert wire["http.fetch"]["annotations"]["openWorldHint"] is True


def test_a_descriptor_without_a_schema_gets_an_empty_object_schema() -> None:
    tool = mcp_tool({"name": "x.y", "description": ""})
    assert tool.input_schema == {"type": "object"}
    assert tool.description is None


def test_an_ok_result_is_the_tools_result_as_json_text_and_the_whole_dict_structured() -> None:
    result = {
        "status": "ok",
        "tool": "fs.read",
        "call_id": "call-1",
        "result": {"path": "a.txt", "content": "héllo [REDACTED:aws_key]\n"},
    }
    out = call_result(result)

    assert out.is_error is False
    [content] = out.content
    assert isinstance(content, types.TextContent)
    assert json.loads(content.text) == result["result"]
    assert "héllo" in content.text  # not escaped
    assert out.structured_content == result


def test_a_refusal_is_a_tool_error_that_names_the_code_and_the_reason() -> None:
    reason = {
        "code": "denied",
        "reason": "approval_required",
        "message": "fs.write needs approval (approval_mode is sensitive)",
    }
    result = {"status": "error", "tool": "fs.write", "call_id": "call-2", "reason": reason}
    out = call_result(result)

    assert out.is_error is True
    assert out.content[0].text == (  # type: ignore[union-attr]
        "denied: approval_required: fs.write needs approval (approval_mode is sensitive)"
    )
    assert out.structured_content == result
    wire = out.model_dump(by_alias=True, exclude_none=True)
    assert wire["isError"] is True
    assert wire["structuredContent"]["reason"]["reason"] == "approval_required"


@pytest.mark.parametrize(
    ("reason", "line"),
    [
        (
            {"code": "outside_root", "message": "path '/etc' is refused"},
            "outside_root: path '/etc' is refused",
        ),
        ({"code": "timeout"}, "timeout"),
        ({"message": "no code"}, "tool_error: no code"),
        ("not a dict", "tool_error: not a dict"),
    ],
)
def test_the_reason_line_of_each_shape(reason, line) -> None:
    assert reason_line(reason) == line


def test_a_call_the_daemon_could_not_take_is_a_tool_error_with_the_request_code() -> None:
    out = failure_result("fs.read", ProjectNotFoundError("no project 'p9'", project_id="p9"))
    assert out.is_error is True
    assert out.content[0].text == "project_not_found: no project 'p9'"  # type: ignore[union-attr]
    assert out.structured_content == {
        "status": "error",
        "tool": "fs.read",
        "reason": {"code": "project_not_found", "message": "no project 'p9'", "project_id": "p9"},
    }


def test_the_resources_list_the_conversations_then_each_timeline_and_incident() -> None:
    listed = resources("p1", ["c1", "mcp-0a1b2c3d4e5f"])
    assert [(r.uri, r.mime_type) for r in listed] == [
        ("roost://p1/conversations", "application/json"),
        ("roost://p1/conversations/c1/timeline", "application/json"),
        ("roost://p1/conversations/c1/incident", "text/markdown"),
        ("roost://p1/conversations/mcp-0a1b2c3d4e5f/timeline", "application/json"),
        ("roost://p1/conversations/mcp-0a1b2c3d4e5f/incident", "text/markdown"),
    ]
    templates = [t.uri_template for t in resource_templates("p1")]
    assert templates == [
        "roost://p1/conversations/{conversation}/timeline",
        "roost://p1/conversations/{conversation}/incident",
    ]


def test_a_uri_is_read_back_and_any_other_is_unknown() -> None:
    assert parse_uri("roost://p1/conversations", "p1") == ("conversations", None)
    assert parse_uri(timeline_uri("p1", "c1"), "p1") == ("timeline", "c1")
    assert parse_uri(incident_uri("p1", "c.2_x"), "p1") == ("incident", "c.2_x")
    for uri in (
        "roost://p2/conversations/c1/timeline",  # another project
        "roost://p1/conversations/c1/llm_context",
        "roost://p1/conversations//timeline",
        "roost://p1/conversations/c1/timeline/more",
        "roost://p1/conversations/c1?x=1/timeline",
        "file:///etc/passwd",
    ):
        with pytest.raises(UnknownResourceError) as info:
            parse_uri(uri, "p1")
        assert info.value.code == "unknown_resource"


@pytest.mark.parametrize(
    ("text", "address"),
    [
        ("127.0.0.1:8765", ("127.0.0.1", 8765)),
        ("127.1.2.3:80", ("127.1.2.3", 80)),
        ("localhost:0", ("127.0.0.1", 0)),
        ("LOCALHOST:9", ("127.0.0.1", 9)),
        ("[::1]:8765", ("::1", 8765)),
    ],
)
def test_a_loopback_address_is_accepted(text, address) -> None:
    assert parse_http_address(text) == address


@pytest.mark.parametrize(
    "text", ["0.0.0.0:8765", "[::]:8765", "192.168.1.10:80", "10.0.0.1:1", "example.com:80"]
)
def test_any_other_host_is_refused_with_a_stable_code(text) -> None:
    with pytest.raises(AddressNotLoopbackError) as info:
        parse_http_address(text)
    assert info.value.code == "address_not_loopback"
    assert "loopback" in info.value.message


@pytest.mark.parametrize("text", ["8765", "127.0.0.1", "127.0.0.1:x", ":8765", "::1:80", "h:70000"])
def test_text_of_another_shape_is_a_value_error(text) -> None:
    with pytest.raises(ValueError, match=r"HOST:PORT|brackets"):
        parse_http_address(text)


def test_the_structured_content_survives_the_wire(tmp_path) -> None:
    result = {"status": "ok", "tool": "fs.list", "result": {"entries": [{"name": "a"}]}}
    wire = call_result(result).model_dump_json(by_alias=True)
    back = types.CallToolResult.model_validate_json(wire)
    assert back.structured_content == msgspec.json.decode(msgspec.json.encode(result))


# --- the loopback peer check --------------------------------------------------------------

TCP = """\
  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 1 1
   1: 0100007F:D431 0100007F:1F90 01 00000000:00000000 00:00000000 00000000  1001        0 2 1
   2: 0100007F:1F90 0100007F:D431 01 00000000:00000000 00:00000000 00000000  1000        0 3 1
   3: garbage
"""
LOOPBACK6 = "00000000000000000000000001000000"
TCP6 = "\n".join(
    [
        "  sl  local_address remote_address st tx_queue rx_queue tr tm->when retrnsmt uid",
        f"   0: {LOOPBACK6}:D432 {LOOPBACK6}:1F91 01 00000000:00000000 00:00000000 00000000"
        "  1002        0 4 1",
    ]
)


def test_a_table_address_is_decoded_in_host_word_order() -> None:
    assert decode_address("0100007F:1F90", "little") == ("127.0.0.1", 8080)
    assert decode_address("7F000001:1F90", "big") == ("127.0.0.1", 8080)
    assert decode_address("00000000000000000000000001000000:0050", "little") == ("::1", 80)
    assert decode_address("0000000000000000FFFF00000100007F:0016", "little") == (
        "127.0.0.1",
        22,
    )


def test_the_peer_uid_is_the_owner_of_the_clients_end(tmp_path) -> None:
    tcp, tcp6 = tmp_path / "tcp", tmp_path / "tcp6"
    tcp.write_text(TCP)
    tcp6.write_text(TCP6)
    tables = [str(tcp), str(tcp6), str(tmp_path / "absent")]

    if sys.byteorder == "little":
        assert peer_uid(("127.0.0.1", 0xD431), ("127.0.0.1", 8080), tables) == 1001
        assert peer_uid(("::1", 0xD432), ("::1", 8081), tables) == 1002
    assert peer_uid(("127.0.0.1", 1), ("127.0.0.1", 8080), tables) is None


def test_a_request_is_refused_before_the_app_sees_it_unless_its_peer_passes(tmp_path) -> None:
    tcp = tmp_path / "tcp"
    tcp.write_text(TCP)
    reached: list[str] = []
    asked: list[tuple[int, int]] = []

    async def app(scope, receive, send) -> None:
        reached.append(scope["type"])

    def holders(inode: int, uid: int) -> str | None:
        asked.append((inode, uid))
        return "sandboxed" if inode == 3 else None

    def request(middleware: SameUserOnly, client: tuple[str, int]) -> list[dict]:
        sent: list[dict] = []

        async def send(message) -> None:
            sent.append(message)

        scope = {"type": "http", "client": client, "server": ("127.0.0.1", 8080)}
        anyio.run(middleware, scope, None, send)
        return sent

    if sys.byteorder != "little":
        pytest.skip("the table above is written in little-endian words")
    middleware = SameUserOnly(app, uid=1001, tables=[str(tcp)], holders=holders)
    assert request(middleware, ("127.0.0.1", 0xD431)) == []
    assert request(middleware, ("127.0.0.1", 0xD431)) == []
    assert reached == ["http", "http"]
    assert asked == [(2, 1001)]  # one look at the holders per socket

    other = SameUserOnly(app, uid=1000, tables=[str(tcp)], holders=holders)
    refused = request(other, ("127.0.0.1", 0xD431))
    assert refused[0]["status"] == 403
    assert refused[1]["body"].startswith(b"peer_not_allowed: ")
    assert refused[1]["body"].endswith(b"(check: other_uid)\n")
    unknown = request(middleware, ("127.0.0.1", 9))  # not in the table
    assert unknown[1]["body"].endswith(b"(check: unverifiable)\n")
    assert reached == ["http", "http"]

    anyio.run(middleware, {"type": "lifespan"}, None, None)
    assert reached[-1] == "lifespan"


def connected_child(env: dict[str, str]) -> tuple[subprocess.Popen[bytes], socket.socket, int]:
    """A child process connected to a loopback socket of ours: (child, our end, its inode)."""
    server = socket.create_server(("127.0.0.1", 0))
    host, port = server.getsockname()
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import socket, sys, time; s = socket.create_connection((sys.argv[1], "
            "int(sys.argv[2]))); s.recv(1)",
            host,
            str(port),
        ],
        env={**os.environ, **env},
    )
    ours, client = server.accept()
    server.close()
    found = peer_socket(client, (host, port))
    assert found is not None
    return child, ours, found[1]


@pytest.mark.parametrize(
    ("env", "refusal"), [({}, None), ({"ROOST_COMMAND_ID": "cmd-0123456789abcdef"}, "sandboxed")]
)
def test_the_holders_of_a_peer_socket_pass_the_daemons_peer_checks(env, refusal) -> None:
    child, ours, inode = connected_child(env)
    try:
        assert child.pid in socket_holders(inode)
        assert holder_refusal(inode, os.getuid()) == refusal
    finally:
        ours.close()
        child.wait(timeout=10)
    assert holder_refusal(inode, os.getuid()) == "gone"
