"""External MCP servers' tools as Roost tools: ``mcp.<server>.<tool>``.

:func:`mcp_tools` runs when the project's registry is built (project start): with
``mcp`` in ``protocol_allowlist``, it lists every ``mcp_servers`` entry's tools
(:func:`runtime.tools.mcp_client.listing.list_servers`) and makes each one a tool named
:func:`tool_name` whose ``input_schema`` is the server's ``inputSchema``. A server that
cannot start, or a tool whose name or schema Roost cannot carry, is left out and named in
the errors (``{type: "mcp_server" | "mcp_tool", key, reason}``, shown in
``project.assets_loaded``; a server that exited adds ``exit_status``, ``stderr_tail`` and
maybe ``hint``, :mod:`runtime.tools.mcp_client.failure`); the project still starts.
Without ``mcp`` in ``protocol_allowlist`` no server is started and one error says so.

A call runs :func:`call_mcp_tool` (a partial, so the registry stays picklable) in the
process that runs tools, through :func:`runtime.tools.mcp_client.session.session_for`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any, Literal, NotRequired, TypedDict

from runtime.errors import ToolError
from runtime.guard.secrets.sources import project_sources
from runtime.guard.shapes.schema import check_schema
from runtime.option_table import RuntimeOptions
from runtime.tools.base import Built, LoadProblem, ToolContext, ToolFn, ToolSpec, remote_tools
from runtime.tools.mcp_client.listing import list_servers
from runtime.tools.mcp_client.session import COLD_START_S, session_for

__all__ = [
    "PREFIX",
    "TOOL_PATTERN",
    "McpToolResult",
    "call_mcp_tool",
    "mcp_tools",
    "split_tool_name",
    "tool_name",
]

PREFIX = "mcp."
"""Every external MCP tool's name starts with it."""

TOOL_PATTERN = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
"""An MCP tool name Roost carries (the MCP spec's character set, at most 128 characters)."""

_MAX_DESCRIPTION = 1024


def tool_name(server: str, tool: str) -> str:
    """The Roost name of ``tool`` on ``server``: ``mcp.<server>.<tool>``."""
    return f"{PREFIX}{server}.{tool}"


def split_tool_name(name: str) -> tuple[str, str] | None:
    """``(server, tool)`` of an ``mcp.<server>.<tool>`` name, or None (servers have no dots)."""
    if not name.startswith(PREFIX):
        return None
    server, dot, tool = name[len(PREFIX) :].partition(".")
    return (server, tool) if dot and server and tool else None


class McpToolResult(TypedDict):
    """What an ``mcp.<server>.<tool>`` tool returns."""

    content: list[dict[str, object]]
    """The server's content blocks, as the MCP SDK dumps them to JSON."""
    text: str
    """The text blocks' text, one per line."""
    structured_content: NotRequired[dict[str, object]]
    """The server's structured result, when it gave one."""


def call_mcp_tool(
    entry: Mapping[str, Any], tool: str, root: str, ctx: ToolContext, args: Mapping[str, Any]
) -> McpToolResult:
    """Call ``tool`` on server ``entry``; ``{content, structured_content}`` or ``ToolError``."""
    session = session_for(entry, root, ctx.options, project_id=ctx.project_id)
    result = session.call(
        tool,
        args,
        signals=ctx.signals,
        call_id=ctx.call_id,
        timeout_s=ctx.remaining_s(),
        cancelled=ctx.cancelled,
    )
    content: list[dict[str, object]] = [
        block.model_dump(mode="json", exclude_none=True) for block in result.content
    ]
    text = "\n".join(str(b.get("text", "")) for b in content if b.get("type") == "text")
    if result.is_error:
        raise ToolError(
            "tool_error",
            f"{tool_name(str(entry['name']), tool)} reported an error: {text[:500]}",
            kind="mcp_tool_error",
            server=str(entry["name"]),
            content=content,
        )
    out: McpToolResult = {"content": content, "text": text}
    if result.structured_content is not None:
        out["structured_content"] = result.structured_content
    return out


def _spec(entry: Mapping[str, Any], tool: Mapping[str, Any], name: str) -> ToolSpec:
    schema = dict(tool["input_schema"])
    check_schema(schema)  # ToolError invalid_tool_args when Roost cannot enforce it
    description = (
        str(tool.get("description") or "") or f"The {tool['name']} tool of {entry['name']}."
    )
    return ToolSpec(
        name=name,
        description=description[:_MAX_DESCRIPTION],
        input_schema=schema,
        runs_commands="command" in entry,
        network_capable="url" in entry,
        cold_start_s=COLD_START_S if "command" in entry else 0.0,
    )


_EXIT_FIELDS: tuple[Literal["exit_status", "stderr_tail", "hint"], ...] = (
    "exit_status",
    "stderr_tail",
    "hint",
)
"""What a server that could not be listed says of how it ended, copied when it says it."""


def mcp_tools(
    root: str, options: Mapping[str, Any]
) -> tuple[list[ToolSpec], dict[str, ToolFn], list[LoadProblem]]:
    """The tools of the project's ``mcp_servers``: ``(specs, fns, errors)`` (see module doc)."""
    settings = RuntimeOptions.of(options)
    servers: list[Mapping[str, Any]] = list(settings.mcp_servers)
    return remote_tools(
        servers,
        "mcp",
        settings.protocol_allowlist,
        ("mcp_server", "no server was started"),
        functools.partial(_server_tools, servers, root, options),
    )


def _server_tools(servers: list[Mapping[str, Any]], root: str, options: Mapping[str, Any]) -> Built:
    """The tools each server listed; a problem per server or tool left out."""
    # what a server says about itself is its output too: no known secret value in it
    listed, _ = project_sources(root, options).masker().mask(list_servers(servers, root, options))
    specs: list[ToolSpec] = []
    fns: dict[str, ToolFn] = {}
    errors: list[LoadProblem] = []
    for entry in servers:
        server = str(entry["name"])
        answer = listed.get(server) or {"error": {"message": "no answer"}}
        for path in answer.get("removed") or ():
            reason = f"sandbox_violation: the server created {path}; it was removed"
            errors.append({"type": "mcp_server", "key": server, "reason": reason})
        if "error" in answer:
            error = answer["error"]
            reason = f"{error.get('code', 'tool_error')}: {error.get('message', '')}"
            found: LoadProblem = {"type": "mcp_server", "key": server, "reason": reason}
            # how it ended, in its own words (bounded and redacted by failure.clean_tail)
            for field in _EXIT_FIELDS:
                if field in error:
                    found[field] = error[field]
            errors.append(found)
            continue
        for tool in answer.get("tools") or ():
            raw = str(tool.get("name", ""))
            if not TOOL_PATTERN.match(raw):
                errors.append(
                    {"type": "mcp_tool", "key": f"{server}/{raw[:64]}", "reason": "invalid_name"}
                )
                continue
            name = tool_name(server, raw)
            try:
                spec = _spec(entry, tool, name)
            except (ToolError, TypeError, ValueError) as e:
                errors.append({"type": "mcp_tool", "key": name, "reason": f"schema: {e}"})
                continue
            specs.append(spec)
            fns[name] = functools.partial(call_mcp_tool, dict(entry), raw, root)
    return specs, fns, errors
