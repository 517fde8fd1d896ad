"""The policy: decide one tool call, and say which events record the decision.

:func:`decide` is a plain function of a :class:`~runtime.tools.base.CallSpec` and a
:class:`PolicyContext`; it returns a :class:`Verdict` whose ``events`` the conversation
appends in order. Nothing here runs a tool; the only I/O is resolving path arguments
through :class:`runtime.guard.workspace.Workspace`. The order (SPEC section 6,
``docs/policy.md``):

1. **unknown tool** → ``invalid``: ``tool.failed {code: unknown_tool}``.
2. **schema** → ``invalid``: ``tool.failed {code: invalid_tool_args, kind, ...}``.
   An unavailable tool (:attr:`~runtime.tools.registry.ToolRegistry.unavailable`: a
   workflow with a step naming no tool) → ``deny``: ``policy.denied {reason:
   unknown_step_tool}``, ``tool.failed {code: denied, reason, step, step_tool}``.
3. **env controls** (tools that run commands and pass ``env``) → ``invalid``:
   ``security.env_denied``, ``tool.failed {code: env_vars_not_allowed | invalid_env_payload}``.
4. **policy rules**, the first refusal wins → ``deny``: the security signal, then
   ``policy.denied``, then ``tool.failed``:

   a. ``deny_tools`` / ``allow_tools`` → ``denied`` (no signal);
   b. protocol entry points (a tool named ``mcp.*`` / ``a2a.*``, or an ``mcp://`` /
      ``a2a://`` target) not in ``protocol_allowlist`` → ``security.protocol_denied``,
      ``network_protocol_denied``;
   c. the command blocklist (``command.run``, and ``command.run.<key>`` on its rendered
      argv) → ``security.command_blocked``, ``command_blocked``;
   d. every path argument (the spec's ``path_args``; for a spec that declares none, an MCP
      or asset tool's, the arguments named like paths) and every path found in the other
      arguments' text (not its ``data_args``) → ``security.sandbox_violation`` /
      ``outside_root``, ``security.sensitive_path_denied`` / ``sensitive_path_denied``,
      or ``not_a_regular_file``;
   e. network targets (network-capable tools and tools that run commands) →
      ``security.network_denied`` with ``network_denied``, ``network_endpoint_denied`` or
      ``network_protocol_denied``.
5. **approval**: ``approval_mode: always``, or ``sensitive`` and the tool writes, runs
   commands or reaches the network → ``ask``: ``tool.approval_requested`` only.
6. otherwise ``allow``: ``security.sandbox_exception_used`` per outside-root exception
   used, then ``policy.allowed`` (reason ``allowed`` or ``outside_root_exception``).
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property
from itertools import islice
from typing import Any, Literal

import msgspec

from events import catalog as ev
from runtime.errors import InvalidRootPathError, ToolError
from runtime.guard.commands.controls import blocked_signal, build_env, check_blocklist, env_signal
from runtime.guard.network.egress import NetworkPolicy, check_args, denial_error, first_denial
from runtime.guard.network.egress import signal_for as network_signal
from runtime.guard.network.targets import extract_targets, split_scheme
from runtime.guard.paths.arguments import extract_paths
from runtime.guard.shapes.schema import validate_args
from runtime.guard.workspace import Workspace, exception_signal
from runtime.guard.workspace import signal_for as path_signal
from runtime.option_table import RuntimeOptions
from runtime.tools.base import CallSpec, ToolSpec
from runtime.tools.registry import ToolRegistry, list_rule

__all__ = [
    "PROTOCOLS",
    "Outcome",
    "PolicyContext",
    "Verdict",
    "decide",
    "needs_approval",
    "refused_every_call",
]

Outcome = Literal["allow", "deny", "ask", "invalid"]
"""What :func:`decide` concluded."""

PROTOCOLS: tuple[str, ...] = ("a2a", "mcp")
"""Protocol entry points ``protocol_allowlist`` governs (tool-name prefix or URL scheme)."""


@dataclass(frozen=True)
class PolicyContext:
    """What the policy knows about the project a call belongs to."""

    project_id: str
    """The project."""
    root: str
    """The project root (absolute, resolved)."""
    options: Mapping[str, Any]
    """The normalized runtime options."""
    registry: ToolRegistry
    """The project's tools."""

    @cached_property
    def network(self) -> NetworkPolicy:
        """The egress rules, built once from the options."""
        return NetworkPolicy.from_options(self.options)

    @cached_property
    def settings(self) -> RuntimeOptions:
        """The options, typed (their defaults filled in), built once."""
        return RuntimeOptions.of(self.options)


class Verdict(msgspec.Struct, frozen=True, kw_only=True):
    """A decision and the event payloads that record it, in append order."""

    outcome: Outcome
    """``allow``, ``deny``, ``ask`` or ``invalid``."""
    events: list[ev.Event]
    """Signals, decision and (for ``deny``/``invalid``) the terminal ``tool.failed``."""


class _Refusal(Exception):
    """A rule refused the call: the signals to record and the error for ``tool.failed``."""

    def __init__(self, error: ToolError, signals: list[ev.Event]) -> None:
        super().__init__(error.message)
        self.error = error
        self.signals = signals


def _failed(call: CallSpec, reason: dict[str, Any]) -> ev.ToolFailed:
    return ev.ToolFailed(call_id=call.call_id, name=call.name, duration_ms=0, reason=reason)


def needs_approval(spec: ToolSpec, settings: RuntimeOptions) -> bool:
    """Whether ``approval_mode`` wants a person to approve calls of ``spec``."""
    mode = settings.approval_mode
    if mode == "always":
        return True
    return mode == "sensitive" and (spec.writes or spec.runs_commands or spec.network_capable)


def refused_every_call(
    spec: ToolSpec, options: Mapping[str, Any], *, unattended: bool
) -> str | None:
    """Why the policy refuses every call of ``spec``, whatever its arguments, or None.

    ``deny_tools`` / ``allow_tools`` (the rule's name); a protocol tool (``mcp.*``,
    ``a2a.*``) whose protocol is not in ``protocol_allowlist`` (``protocol_not_allowed``);
    and, for an ``unattended`` caller (nobody to approve), a tool ``approval_mode`` always
    asks about (``approval_required``). Every other rule depends on the arguments.
    """
    settings = RuntimeOptions.of(options)
    rule = list_rule(spec.name, settings)
    if rule is not None:
        return rule
    for applies, reason in _EVERY_CALL_RULES:
        if applies(spec, settings, unattended):
            return reason
    return None


def _protocol_refused(spec: ToolSpec, settings: RuntimeOptions) -> bool:
    """A protocol tool (``mcp.*``, ``a2a.*``) whose protocol ``protocol_allowlist`` lacks."""
    prefix = spec.name.split(".", 1)[0].lower()
    return prefix in PROTOCOLS and prefix not in settings.protocol_allowlist


_EVERY_CALL_RULES: tuple[tuple[Callable[[ToolSpec, RuntimeOptions, bool], bool], str], ...] = (
    (lambda spec, settings, unattended: _protocol_refused(spec, settings), "protocol_not_allowed"),
    (
        lambda spec, settings, unattended: unattended and needs_approval(spec, settings),
        "approval_required",
    ),
)
"""After the tool lists: what refuses every call of a tool, and the reason, in order."""


def decide(call: CallSpec, ctx: PolicyContext) -> Verdict:
    """Decide ``call``; see the module doc for the order and the events of each outcome."""
    entry = ctx.registry.get(call.name)
    if entry is None:
        reason = {
            "code": "unknown_tool",
            "message": (
                f"there is no tool named {call.name!r}; "
                f"`roost project tools {ctx.project_id}` lists the tools"
            ),
            "tool": call.name,
        }
        return Verdict(outcome="invalid", events=[_failed(call, reason)])
    spec = entry[0]
    try:
        validate_args(spec.input_schema, call.args)
    except ToolError as e:
        return Verdict(outcome="invalid", events=[_failed(call, e.reason())])
    unavailable = ctx.registry.unavailable.get(call.name)
    if unavailable is not None:
        return _unavailable(call, unavailable)
    if spec.runs_commands and "env" in call.args:
        try:
            build_env(call.args["env"], list(ctx.settings.tool_env_allowlist))
        except ToolError as e:
            signal = env_signal(e, call.name, call.call_id)
            return Verdict(outcome="invalid", events=[signal, _failed(call, e.reason())])
    exceptions: list[ev.Event] = []
    codes: list[str] = []
    try:
        _check_lists(call, ctx)
        _check_protocols(call, spec, ctx)
        command = _command_text(call, ctx)
        _check_blocklist(call, command)
        _check_paths(call, spec, ctx, exceptions, codes)
        _check_network(call, spec, ctx, command)
    except _Refusal as refusal:
        return _deny(call, refusal, codes)
    except ToolError as e:  # an argument the rules could not read (NUL in a path, ...)
        return Verdict(outcome="invalid", events=[_failed(call, e.reason())])
    if needs_approval(spec, ctx.settings):
        return Verdict(outcome="ask", events=[ev.ToolApprovalRequested(call_id=call.call_id)])
    allowed = ev.PolicyAllowed(
        tool=call.name,
        reason="outside_root_exception" if codes else "allowed",
        source="policy",
        call_id=call.call_id,
    )
    return Verdict(outcome="allow", events=[*exceptions, allowed])


def _unavailable(call: CallSpec, reason: Mapping[str, Any]) -> Verdict:
    step_tool = reason.get("step_tool")
    failure = {
        **reason,
        "message": f"{call.name} cannot run: step {reason.get('step')} calls {step_tool!r}, "
        "which is no tool of this project (a missing MCP server or tool, an invalid "
        "command asset, a typo); list_tools shows the tools",
    }
    denied = ev.PolicyDenied(
        tool=call.name, reason=str(reason["reason"]), source="policy", call_id=call.call_id
    )
    return Verdict(outcome="deny", events=[denied, _failed(call, failure)])


def _deny(call: CallSpec, refusal: _Refusal, codes: list[str]) -> Verdict:
    error = refusal.error
    denied = ev.PolicyDenied(
        tool=call.name,
        reason=error.code,
        source="policy",
        call_id=call.call_id,
        outside_root_exception_reason_codes=sorted(set(codes)),
    )
    return Verdict(outcome="deny", events=[*refusal.signals, denied, _failed(call, error.reason())])


# --- the rules ----------------------------------------------------------------------------


def _check_lists(call: CallSpec, ctx: PolicyContext) -> None:
    rule = list_rule(call.name, ctx.settings)
    if rule is None:
        return
    why = "is in deny_tools" if rule == "deny_tools" else "is not in allow_tools"
    error = ToolError(
        "denied",
        f"tool {call.name!r} {why}; change the project's {rule} to allow it",
        tool=call.name,
        rule=rule,
    )
    raise _Refusal(error, [])


def _protocol_of(scheme: str | None) -> str | None:
    base = (scheme or "").lower().split("+", 1)[0]
    return base if base in PROTOCOLS else None


def _check_protocols(call: CallSpec, spec: ToolSpec, ctx: PolicyContext) -> None:
    allowed = set(ctx.settings.protocol_allowlist)
    found: list[str] = []
    prefix = call.name.split(".", 1)[0].lower()
    if prefix in PROTOCOLS:
        found.append(prefix)
    if spec.network_capable or spec.runs_commands:
        for target in extract_targets(call.args):
            protocol = _protocol_of(split_scheme(target)[0])
            if protocol is not None:
                found.append(protocol)
    for protocol in found:
        if protocol not in allowed:
            error = ToolError(
                "network_protocol_denied",
                f"protocol {protocol!r} is not in protocol_allowlist; add it to let "
                f"{call.name!r} use it",
                protocol=protocol,
                reason="protocol_not_allowed",
            )
            signal = ev.SecurityProtocolDenied(protocol=protocol, operation=call.name)
            raise _Refusal(error, [signal])


def _command_text(call: CallSpec, ctx: PolicyContext) -> str | list[str] | None:
    """The command a call would run: ``command.run``'s argument or an asset's rendered argv."""
    if call.name == "command.run":
        command = call.args.get("command")
        if isinstance(command, str):
            return command
        if isinstance(command, list) and all(isinstance(c, str) for c in command):
            return list(command)
        return None
    if call.name.startswith("command.run."):
        from runtime.tools.asset_store import render_argv  # noqa: PLC0415 - only for asset commands

        asset = ctx.registry.catalog.get("commands", call.name.removeprefix("command.run."))
        if asset is None or not asset.valid:
            return None
        return render_argv(asset, call.args)
    return None


def _check_blocklist(call: CallSpec, command: str | list[str] | None) -> None:
    if command is None or not command:
        return
    pattern = check_blocklist(command)
    if pattern is None:
        return
    error = ToolError(
        "command_blocked",
        f"the command matches the blocklist pattern {pattern!r} and is never run",
        pattern=pattern,
    )
    raise _Refusal(error, [blocked_signal(pattern, call.call_id)])


def _paths(call: CallSpec, spec: ToolSpec) -> list[str]:
    """The paths in ``call``'s arguments (see the module doc, rule d).

    The spec's ``path_args`` and what the text of the others (not its ``data_args``)
    holds; when the spec declares none, every argument named like a path.
    """
    searched = {k: v for k, v in call.args.items() if k not in spec.data_args}
    return extract_paths(searched, path_keys=spec.path_args)


def _exception_codes(ws: Workspace, path: str) -> list[str]:
    """The outside-root exception a refused path would have used: its reason code, or none."""
    resolved = os.path.realpath(os.path.join(ws.root, path))
    if resolved == ws.root or resolved.startswith(ws.root.rstrip("/") + "/"):
        return []
    return list(islice((e.reason_code for e in ws.outside_allowlist if e.covers(resolved)), 1))


def _check_paths(
    call: CallSpec,
    spec: ToolSpec,
    ctx: PolicyContext,
    exceptions: list[ev.Event],
    codes: list[str],
) -> None:
    paths = _paths(call, spec)
    if not paths:
        return
    try:
        ws = Workspace(ctx.root, ctx.options)
    except InvalidRootPathError as e:
        error = ToolError("outside_root", str(e), reason="root_unavailable", root=ctx.root)
        raise _Refusal(error, []) from e
    with ws:
        for path in paths:
            try:
                decision = ws.check_path(path, write=spec.writes)
            except ToolError as e:
                if e.code == "invalid_tool_args":
                    raise
                if e.code == "sensitive_path_denied":
                    codes.extend(_exception_codes(ws, path))
                signal = path_signal(e, call.name, call.call_id)
                raise _Refusal(e, [signal] if signal is not None else []) from e
            used = exception_signal(decision, call.name, call.call_id)
            if used is not None and decision.exception_reason_code is not None:
                exceptions.append(used)
                codes.append(decision.exception_reason_code)


def _check_network(
    call: CallSpec, spec: ToolSpec, ctx: PolicyContext, command: str | list[str] | None
) -> None:
    if not (spec.network_capable or spec.runs_commands):
        return
    args: dict[str, Any] = dict(call.args)
    if isinstance(command, list):  # judged as one line, so `curl HOST` reads as a command
        key = "command" if call.name == "command.run" else "_rendered_command"
        args[key] = shlex.join(command)
    denial = first_denial(check_args(ctx.network, args))
    if denial is None:
        return
    error = denial_error(denial)
    raise _Refusal(error, [network_signal(denial, call.name, call.call_id)])
