"""The plain core of ``roost mcp serve``: Roost's shapes to MCP's and back, no I/O.

- :func:`mcp_tool`: a ``list_tools`` descriptor (``{name, description, input_schema,
  read_only, writes, network_capable, runs_commands}``) → an MCP ``Tool`` whose
  ``inputSchema`` is the tool's JSON Schema and whose annotations are its safety flags.
- :func:`call_result`: a ``run_tool`` result dict (SPEC section 6) → an MCP
  ``CallToolResult``. ``status: ok``: the tool's (redacted) ``result`` as JSON text.
  ``status: error``: ``isError`` and the reason line ``CODE[: REASON]: MESSAGE`` (``denied:
  approval_required: ...``). Both carry the whole dict as structured content.
- The resources: ``roost://PROJECT/conversations`` (the project's conversations, JSON),
  ``roost://PROJECT/conversations/CONV/timeline`` (the incident timeline, JSON) and
  ``roost://PROJECT/conversations/CONV/incident`` (the incident report, Markdown);
  :func:`parse_uri` reads one back.
- :func:`parse_http_address`: ``--http HOST:PORT``, loopback only.
"""

from __future__ import annotations

import ipaddress
import json
import re
from typing import Any, Literal

import mcp_types as types

from runtime.errors import RoostError

__all__ = [
    "CONVERSATIONS_MIME",
    "INCIDENT_MIME",
    "TIMELINE_LIMIT",
    "TIMELINE_MIME",
    "AddressNotLoopbackError",
    "ResourceKind",
    "UnknownResourceError",
    "call_result",
    "conversations_uri",
    "failure_result",
    "incident_uri",
    "mcp_tool",
    "parse_http_address",
    "parse_uri",
    "reason_line",
    "resource_templates",
    "resources",
    "timeline_uri",
]

TIMELINE_LIMIT = 100
"""Entries of a timeline resource: the last 100, as ``roost timeline`` shows by default."""
CONVERSATIONS_MIME = "application/json"
"""The conversations resource's type."""
TIMELINE_MIME = "application/json"
"""A timeline resource's type (the ``incident_timeline`` object)."""
INCIDENT_MIME = "text/markdown"
"""An incident resource's type (the report ``roost incident`` prints)."""

ResourceKind = Literal["conversations", "timeline", "incident"]
"""What a ``roost://`` URI names."""

_CONVERSATION_PART = r"(?:/(?P<conversation>[^/?#]+)/(?P<kind>timeline|incident))?"
"""After a project's ``roost://PROJECT/conversations``: nothing, or one conversation's
timeline or incident."""
_KINDS: dict[str | None, ResourceKind] = {
    None: "conversations",
    "timeline": "timeline",
    "incident": "incident",
}


class AddressNotLoopbackError(RoostError):
    """``--http`` named an address that is not on the loopback interface."""

    code = "address_not_loopback"


class UnknownResourceError(RoostError):
    """A resource URI this server does not serve."""

    code = "unknown_resource"


# --- tools --------------------------------------------------------------------------------


def mcp_tool(descriptor: dict[str, Any], name: str | None = None) -> types.Tool:
    """The MCP tool for one ``list_tools`` descriptor (its JSON Schema as ``inputSchema``).

    ``name`` is the name listed (the MCP-safe one, ``runtime.mcp_server.names``); the
    Roost name is the tool's ``title`` and its ``_meta`` ``roost/name``.
    """
    roost_name = str(descriptor["name"])
    read_only = bool(descriptor.get("read_only"))
    writes = bool(descriptor.get("writes"))
    commands = bool(descriptor.get("runs_commands"))
    network = bool(descriptor.get("network_capable"))
    schema = descriptor.get("input_schema")
    return types.Tool(
        name=roost_name if name is None else name,
        title=roost_name,
        description=descriptor.get("description") or None,
        input_schema=dict(schema) if isinstance(schema, dict) else {"type": "object"},
        annotations=types.ToolAnnotations(
            read_only_hint=read_only,
            destructive_hint=(writes or commands) and not read_only,
            open_world_hint=network or commands,
        ),
        _meta={"roost/name": roost_name},
    )


def reason_line(reason: Any) -> str:
    """``CODE[: REASON]: MESSAGE`` of a failure's ``reason`` (``denied: approval_required: …``)."""
    if not isinstance(reason, dict):
        return f"tool_error: {reason}"
    parts = [str(reason.get("code") or "tool_error")]
    if isinstance(reason.get("reason"), str) and reason["reason"]:
        parts.append(reason["reason"])
    if reason.get("message"):
        parts.append(str(reason["message"]))
    return ": ".join(parts)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def call_result(result: dict[str, Any]) -> types.CallToolResult:
    """The MCP result of a ``run_tool`` result dict (SPEC section 6)."""
    if result.get("status") == "ok":
        return types.CallToolResult(
            content=[types.TextContent(text=_json(result.get("result")))],
            structured_content=result,
            is_error=False,
        )
    return types.CallToolResult(
        content=[types.TextContent(text=reason_line(result.get("reason")))],
        structured_content=result,
        is_error=True,
    )


def failure_result(name: str, error: RoostError) -> types.CallToolResult:
    """A tool error for a call the daemon could not take (a stopped project, no daemon)."""
    reason = {"code": error.code, "message": error.message, **error.details}
    return call_result({"status": "error", "tool": name, "reason": reason})


# --- resources ----------------------------------------------------------------------------


def conversations_uri(project_id: str) -> str:
    """The URI of the project's list of conversations."""
    return f"roost://{project_id}/conversations"


def timeline_uri(project_id: str, conversation_id: str) -> str:
    """The URI of a conversation's incident timeline."""
    return f"roost://{project_id}/conversations/{conversation_id}/timeline"


def incident_uri(project_id: str, conversation_id: str) -> str:
    """The URI of a conversation's incident report."""
    return f"roost://{project_id}/conversations/{conversation_id}/incident"


def resources(project_id: str, conversations: list[str]) -> list[types.Resource]:
    """The project's conversation list, then each conversation's timeline and incident."""
    out = [
        types.Resource(
            name="conversations",
            title=f"Conversations of {project_id}",
            uri=conversations_uri(project_id),
            description="The project's conversations (started, not stopped)",
            mime_type=CONVERSATIONS_MIME,
        )
    ]
    for conversation_id in conversations:
        out.append(
            types.Resource(
                name=f"{conversation_id}/timeline",
                title=f"Timeline of {project_id}/{conversation_id}",
                uri=timeline_uri(project_id, conversation_id),
                description=f"The incident timeline, last {TIMELINE_LIMIT} entries",
                mime_type=TIMELINE_MIME,
            )
        )
        out.append(
            types.Resource(
                name=f"{conversation_id}/incident",
                title=f"Incident report of {project_id}/{conversation_id}",
                uri=incident_uri(project_id, conversation_id),
                description="The incident report (roost incident)",
                mime_type=INCIDENT_MIME,
            )
        )
    return out


def resource_templates(project_id: str) -> list[types.ResourceTemplate]:
    """The timeline and incident templates of any conversation of the project."""
    return [
        types.ResourceTemplate(
            name="timeline",
            title="Conversation timeline",
            uri_template=timeline_uri(project_id, "{conversation}"),
            description=f"A conversation's incident timeline, last {TIMELINE_LIMIT} entries",
            mime_type=TIMELINE_MIME,
        ),
        types.ResourceTemplate(
            name="incident",
            title="Conversation incident report",
            uri_template=incident_uri(project_id, "{conversation}"),
            description="A conversation's incident report (Markdown)",
            mime_type=INCIDENT_MIME,
        ),
    ]


def parse_uri(uri: str, project_id: str) -> tuple[ResourceKind, str | None]:
    """``(kind, conversation)`` of a resource URI of ``project_id``.

    Raises :class:`UnknownResourceError` for any other URI (another project's too).
    """
    prefix = f"roost://{project_id}/conversations"
    found = re.fullmatch(re.escape(prefix) + _CONVERSATION_PART, uri)
    if found is not None:
        return _KINDS[found["kind"]], found["conversation"]
    raise UnknownResourceError(
        f"no resource {uri!r}: this server serves {prefix} and {prefix}/CONV/timeline|incident",
        uri=uri,
    )


# --- the HTTP address ---------------------------------------------------------------------


def parse_http_address(
    text: str, command: str = "roost mcp serve", reason: str = "runs the project's tools"
) -> tuple[str, int]:
    """``(host, port)`` of ``--http HOST:PORT``; the host must be a loopback address.

    ``HOST`` is ``localhost`` (bound as 127.0.0.1), an IPv4 loopback address (127.0.0.0/8)
    or ``[::1]``; ``PORT`` is 0 to 65535 (0: any free port). Raises ``ValueError`` for text
    of another shape and :class:`AddressNotLoopbackError` for another host.
    """
    host, sep, port_text = text.rpartition(":")
    if not sep or not host or not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ValueError(f"expected HOST:PORT (e.g. 127.0.0.1:8765), got {text!r}")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise ValueError(f"write an IPv6 address in brackets ([::1]:PORT), got {text!r}")
    if host.lower() == "localhost":
        return "127.0.0.1", int(port_text)
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        address = None
    if address is None or not address.is_loopback:
        raise AddressNotLoopbackError(
            f"--http {text}: {command} listens on the loopback interface only "
            f"(127.0.0.1, [::1] or localhost), since anyone who reaches it {reason}",
            address=text,
        )
    return str(address), int(port_text)
