"""What every tool implementation shares: its spec, the context it runs in, the registry.

A tool is a plain function ``fn(ctx, args) -> dict`` that returns its ``result`` and raises
:class:`runtime.errors.ToolError` to fail. It never appends events itself: signals it
wants recorded (a sandbox exception used, processes killed, ...) go into ``ctx.signals``
and the ToolRunner appends them with the call's correlation.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, NotRequired, TypedDict

import msgspec

from events.catalog import Event
from runtime.option_table import RuntimeOptions

__all__ = [
    "Built",
    "CallSpec",
    "LoadProblem",
    "ToolContext",
    "ToolFn",
    "ToolKind",
    "ToolSpec",
    "remote_tools",
]

ToolKind = Literal["read", "write", "command", "network", "asset", "workflow"]
"""What ``tool.completed`` reports as a call's ``kind``."""


class ToolSpec(msgspec.Struct, frozen=True, kw_only=True):
    """A tool's public description, as ``list_tools`` returns it, and the facts callers need.

    Whatever the policy or the runner needs to know about a tool is declared here, by the
    tool, never guessed from its name: which arguments are paths and which are data,
    whether it runs inline, what kind of call it is.
    """

    name: str
    """Dotted tool name, e.g. ``fs.read``."""
    description: str
    """One sentence for the model and for people."""
    input_schema: Mapping[str, Any]
    """JSON Schema of the arguments (``type: object``, ``additionalProperties: false``)."""
    read_only: bool = False
    """Never changes anything."""
    writes: bool = False
    """May change files in the workspace."""
    network_capable: bool = False
    """May reach the network."""
    runs_commands: bool = False
    """Runs processes."""
    kills_on_cancel: bool = False
    """Kills its processes when cancelled and answers with what it killed (``command.run``
    and command assets): the runner waits for that answer rather than giving up on the
    call a grace after the cancel (MCP stdio calls and workflows get the grace)."""
    cold_start_s: float = 0.0
    """Seconds it may spend starting a long-lived process (an MCP stdio server) before its
    call's own timeout starts; it then enforces that timeout itself."""
    path_args: tuple[str, ...] | None = None
    """The arguments whose values are paths (a string or a list of strings), each checked
    against the workspace by the policy. ``None``: not declared (an MCP tool, a command or
    workflow asset's arguments): the policy then takes every argument named like a path
    (``runtime.guard.paths.arguments.PATH_KEYS``) as one."""
    data_args: tuple[str, ...] = ()
    """The arguments whose values are data (a file's content, a search pattern, a request
    body): never searched for paths, so ``dest=/usr/local`` in a script is not one."""
    inline: bool = False
    """Takes milliseconds: a ``sync`` call is waited on by the ToolRunner's own thread, not
    handed to one of its workers (and a hosted conversation folds a read-only one at once)."""
    kind: ToolKind | None = None
    """The call's ``kind`` in ``tool.completed``; ``workflow`` also makes the runner run the
    plan the tool returns. ``None``: from the flags (``command``, ``network``, ``write``,
    ``read``)."""


@dataclass
class ToolContext:
    """Everything a tool call may use; built by the ToolRunner for one call."""

    root: str
    """The project root (absolute, resolved)."""
    options: Mapping[str, Any]
    """The project's normalized runtime options (SPEC section 5 keys)."""
    call_id: str = "call-local"
    """The call being run."""
    project_id: str = ""
    """The project the call belongs to (names a run's durable record)."""
    conversation_id: str | None = None
    """The conversation the call belongs to, if any."""
    timeout_s: float = 30.0
    """Seconds the call may run."""
    signals: list[Event] = field(default_factory=list)
    """Signal payloads the tool wants recorded with the call."""
    cancelled: threading.Event = field(default_factory=threading.Event)
    """Set when the call is cancelled; long tools poll it."""
    started_at: float = field(default_factory=time.monotonic)
    """Monotonic start time."""

    def remaining_s(self) -> float:
        """Seconds left before the call's timeout (never below zero)."""
        return max(0.0, self.timeout_s - (time.monotonic() - self.started_at))

    @functools.cached_property
    def settings(self) -> RuntimeOptions:
        """``options`` typed, each option its default when absent (one table for both)."""
        return RuntimeOptions.of(self.options)


class LoadProblem(TypedDict):
    """Something a project's tools were not built from, as ``project.assets_loaded`` lists it.

    An invalid asset, a workflow with an unknown step tool, an MCP server or tool or an
    A2A agent left out, a built-in tool module that failed to import.
    """

    type: str
    """``skills``, ``commands``, ``workflows``, ``mcp_server``, ``mcp_tool``, ``a2a_agent``
    or ``tool_module``."""
    key: str
    """The asset key, server, ``server/tool``, agent or module."""
    reason: str | None
    """Why (a reason code, with a detail after ``:`` for remote and module problems)."""
    step: NotRequired[int]
    """A workflow's first step naming no tool."""
    step_tool: NotRequired[str]
    """The tool that step names."""
    exit_status: NotRequired[object]
    """How an MCP server's process ended."""
    stderr_tail: NotRequired[str]
    """The last lines it wrote to stderr (bounded, redacted)."""
    hint: NotRequired[str]
    """What to do about it, when Roost can tell."""


ToolFn = Callable[[ToolContext, Mapping[str, Any]], Mapping[str, object]]
"""A tool implementation: ``(ctx, args) -> result``; raises ``ToolError`` to fail. The
arguments come from a model (any JSON object); the result is the tool's own JSON shape
(a ``TypedDict`` beside each tool)."""


class CallSpec(msgspec.Struct, frozen=True, kw_only=True):
    """A tool call as the Policy and the ToolRunner see it."""

    call_id: str
    """The call."""
    name: str
    """Tool name."""
    args: Mapping[str, Any]
    """Arguments."""
    run_mode: str = "sync"
    """``sync`` or ``async``."""
    conversation_id: str | None = None
    """The conversation, when there is one."""
    correlation_id: str = ""
    """The turn's correlation."""
    causation_id: str | None = None
    """The event that led to this step."""


Built = tuple[list[ToolSpec], dict[str, ToolFn], list[LoadProblem]]
"""What a remote tool builder gives: ``(specs, fns, errors)``."""


def remote_tools(
    entries: Sequence[Mapping[str, Any]],
    protocol: str,
    allowlist: Sequence[str],
    problem: tuple[str, str],
    build: Callable[[], Built],
) -> Built:
    """The tools ``build`` makes of remote ``entries`` (MCP servers, A2A agents), if any.

    None without entries; none either when ``protocol`` is not in ``allowlist``, each entry
    then a ``protocol_not_allowed`` problem: ``problem`` is its ``(type, what was not done)``.
    """
    if not entries:
        return [], {}, []
    if protocol not in allowlist:
        kind, undone = problem
        reason = f"protocol_not_allowed: {protocol} is not in protocol_allowlist; {undone}"
        return [], {}, [{"type": kind, "key": str(e["name"]), "reason": reason} for e in entries]
    return build()
