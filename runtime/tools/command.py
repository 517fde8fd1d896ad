"""The ``command.run`` tool: run a shell command or an argv inside the command sandbox.

Order of checks: the argument shapes, the non-bypassable blocklist (``command_blocked``
plus ``security.command_blocked``), the environment (``env_vars_not_allowed`` /
``invalid_env_payload`` plus ``security.env_denied``), the working directory (inside the
root), then the run (``runtime.guard.sandbox.run.run_command``) with the call's remaining time and
the project's egress policy. A non-zero exit is a normal result, not a failure; a
timeout fails with ``timeout`` and a cancellation with ``conversation_cancelled``, and
whenever processes had to be killed a ``tool.child_processes_terminated`` signal says how
many and why (``timeout``, ``cancel``, or ``completed`` for background leftovers); a run
the cancel stopped always has one, with ``count`` 0 when the cancel came before the command
had a process of its own.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Mapping
from typing import Any, Literal

import msgspec

from events.catalog import ToolChildProcessesTerminated
from runtime.errors import ToolError
from runtime.guard.commands.controls import blocked_signal, build_env, check_blocklist, env_signal
from runtime.guard.review.report import change_events
from runtime.guard.review.run_ledger import RunLabel
from runtime.guard.sandbox.layers import View, probe_layers, require_confinement
from runtime.guard.sandbox.run import CommandResult, Limits, run_command
from runtime.option_table import RuntimeOptions
from runtime.tools.base import ToolContext, ToolFn, ToolSpec
from runtime.tools.results import CommandOutput

__all__ = [
    "SPECS",
    "TOOL",
    "TOOLS",
    "command_run",
    "command_view",
]

TOOL = "command.run"
"""The tool's name."""

SPECS: list[ToolSpec] = [
    ToolSpec(
        name=TOOL,
        description=(
            "Run a command in the project root, without network unless the project allows "
            "egress; returns the exit code and the (capped) stdout and stderr."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "command": {
                    "description": (
                        "A shell command line (run with /bin/sh -c) or a list of strings "
                        "(program and arguments, run directly)."
                    ),
                    "oneOf": [
                        {"type": "string", "minLength": 1},
                        {"type": "array", "items": {"type": "string"}, "minItems": 1},
                    ],
                },
                "cwd": {
                    "type": "string",
                    "description": "Working directory, relative to the project root.",
                },
                "timeout_ms": {
                    "type": "integer",
                    "minimum": 1,
                    "description": "Timeout in milliseconds (capped by the call's timeout).",
                },
                "env": {
                    "type": "object",
                    "additionalProperties": {"type": "string"},
                    "description": "Extra environment variables (only tool_env_allowlist keys).",
                },
            },
            "required": ["command"],
            "additionalProperties": False,
        },
        runs_commands=True,
        kills_on_cancel=True,
        path_args=("cwd",),
    )
]
"""The ``command.run`` spec."""


def _bad_arg(name: str, expected: str, value: object) -> ToolError:
    return ToolError(
        "invalid_tool_args",
        f"argument {name!r} must be {expected}, got {value!r}"[:300],
        kind="invalid_type",
        arg=name,
    )


def _command(args: Mapping[str, Any]) -> str | list[str]:
    value = args.get("command")
    if isinstance(value, str) and value.strip():
        if "\x00" in value:
            raise _bad_arg("command", "a string without NUL bytes", value)
        return value
    if (
        isinstance(value, list)
        and value
        and all(isinstance(v, str) and "\x00" not in v for v in value)
        and value[0]
    ):
        return list(value)
    raise _bad_arg("command", "a non-empty string or list of strings", value)


def _cwd(root: str, value: Any) -> str:
    """Resolve ``cwd`` (relative to the root) and require it to stay inside the root.

    TODO(runtime/guard/workspace.py): use the workspace confinement (openat2 / O_NOFOLLOW
    walk, ``outside_root_allowlist``) once it is wired in; this is a realpath check.
    """
    real_root = os.path.realpath(root)
    if value is None:
        return real_root
    if not isinstance(value, str) or "\x00" in value:
        raise _bad_arg("cwd", "a path string without NUL bytes", value)
    resolved = os.path.realpath(os.path.join(real_root, value))
    if os.path.commonpath([resolved, real_root]) != real_root:
        raise ToolError(
            "outside_root",
            f"cwd {value!r} resolves outside the project root; use a directory inside it",
            path=value,
        )
    if not os.path.isdir(resolved):
        raise ToolError(
            "invalid_tool_args",
            f"cwd {value!r} is not a directory inside the project root",
            kind="invalid_type",
            arg="cwd",
            reason="not_a_directory",
        )
    return resolved


def _timeout_s(ctx: ToolContext, value: Any) -> float:
    remaining = ctx.remaining_s()
    if value is None:
        return remaining
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise _bad_arg("timeout_ms", "a positive integer", value)
    return min(value / 1000, remaining)


def _encoded_len(value: Any) -> int:
    return len(msgspec.json.encode(value))


def _trim(text: str, max_bytes: int) -> str:
    """Cut ``text`` so that its JSON encoding (quotes excluded) fits in ``max_bytes``."""
    cut = text[:max_bytes]  # every character encodes to at least one byte
    while cut and (over := _encoded_len(cut) - 2 - max_bytes) > 0:
        cut = cut[: len(cut) - over]
    return cut


_Stream = Literal["stdout", "stderr"]
_STREAMS: tuple[_Stream, _Stream] = ("stdout", "stderr")
_TRUNCATED: dict[_Stream, Literal["stdout_truncated", "stderr_truncated"]] = {
    "stdout": "stdout_truncated",
    "stderr": "stderr_truncated",
}


def _fit(result: CommandOutput, max_bytes: int) -> CommandOutput:
    """Trim stdout and stderr (fairly: each keeps at least half the room it needs)."""
    if _encoded_len(result) <= max_bytes:
        return result
    room = max(0, max_bytes - _encoded_len({**result, "stdout": "", "stderr": ""}) - 16)
    sizes = {key: _encoded_len(result[key]) - 2 for key in _STREAMS}
    small, large = sorted(sizes, key=lambda key: sizes[key])
    shares = {small: min(sizes[small], room // 2)}
    shares[large] = room - shares[small]
    for key, share in shares.items():
        _cap(result, key, sizes[key], share)
    return result


def _cap(result: CommandOutput, key: _Stream, size: int, room: int) -> None:
    """Trim one stream of ``size`` bytes (its JSON, quotes excluded) to ``room`` and say so."""
    if size > room:
        result[key] = _trim(result[key], room)
        result[_TRUNCATED[key]] = True


def command_run(ctx: ToolContext, args: Mapping[str, Any], tool: str = TOOL) -> CommandOutput:
    """Run ``args["command"]``; return ``{exit_code, stdout, stderr, ..., duration_ms}``.

    ``tool`` names the tool in the run's record and events (an asset command's own name).
    """
    command = _command(args)
    pattern = check_blocklist(command)
    if pattern:
        ctx.signals.append(blocked_signal(pattern, ctx.call_id))
        raise ToolError(
            "command_blocked",
            f"the command matches the blocklist pattern {pattern!r} and is never run",
            pattern=pattern,
        )
    require_confinement(probe_layers())
    home = tempfile.mkdtemp(prefix="roost-home-")
    try:
        try:
            env = build_env(args.get("env"), ctx.settings.tool_env_allowlist, home=home)
        except ToolError as e:
            ctx.signals.append(env_signal(e, TOOL, ctx.call_id))
            raise
        cwd = _cwd(ctx.root, args.get("cwd"))
        timeout_s = _timeout_s(ctx, args.get("timeout_ms"))
        max_bytes = ctx.settings.tool_max_output_bytes
        result = run_command(
            command,
            cwd=cwd,
            env=env,
            timeout_s=timeout_s,
            allow_network=ctx.settings.network_egress_policy == "allow",
            cancel=ctx.cancelled,
            max_output_bytes=max_bytes,
            limits=Limits(
                max_processes=ctx.settings.tool_max_processes,
                memory_bytes=ctx.settings.tool_max_memory_bytes,
                cpu_cores=ctx.settings.tool_cpu_cores,
            ),
            view=command_view(ctx.settings, os.path.realpath(ctx.root), home, cwd),
            label=RunLabel(
                project_id=ctx.project_id or "local",
                call_id=ctx.call_id,
                tool=tool,
                conversation_id=ctx.conversation_id,
            ),
            root=os.path.realpath(ctx.root),
        )
    finally:
        shutil.rmtree(home, ignore_errors=True)
    return _outcome(ctx, result, timeout_s, max_bytes, tool)


def command_view(settings: RuntimeOptions, root: str, home: str, cwd: str) -> View:
    """Build what a command of this project sees (``runtime.guard.sandbox.view``).

    The root and the scratch home writable, the project's extra read paths and sockets,
    its sensitive names hidden, its ``/tmp`` sized.
    """
    return View(
        writable=(root, home),
        cwd=cwd,
        read_only=settings.command_read_paths,
        sockets=settings.command_socket_allowlist,
        sensitive_deny=settings.sensitive_path_denylist,
        sensitive_allow=settings.sensitive_path_allowlist,
        tmpfs_bytes=settings.tool_tmpfs_bytes,
    )


_STOPPED: dict[str, Callable[[int, int], ToolError]] = {
    "timeout": lambda timeout_ms, killed: ToolError(
        "timeout",
        f"command.run did not finish within {timeout_ms} ms; its processes were killed",
        timeout_ms=timeout_ms,
        killed_processes=killed,
    ),
    "cancel": lambda timeout_ms, killed: ToolError(
        "conversation_cancelled",
        "command.run was cancelled; its processes were killed",
        killed_processes=killed,
    ),
}
"""The error of a run that was stopped, by why (its time limit, and the processes killed)."""


def _outcome(
    ctx: ToolContext, result: CommandResult, timeout_s: float, max_bytes: int, tool: str
) -> CommandOutput:
    ctx.signals.extend(change_events(result.changes, tool=tool, call_id=ctx.call_id))
    reason = "timeout" if result.timed_out else "cancel" if result.cancelled else "completed"
    # A cancel that stopped the run is always recorded, even one that found nothing to kill
    # (it came before the spawn, or while the sandbox's own processes were the only ones).
    if result.killed_processes or reason == "cancel":
        ctx.signals.append(
            ToolChildProcessesTerminated(
                call_id=ctx.call_id, reason=reason, count=result.killed_processes
            )
        )
    if reason in _STOPPED:
        raise _STOPPED[reason](round(timeout_s * 1000), result.killed_processes)
    output: CommandOutput = {
        "exit_code": result.exit_code,
        "stdout": result.stdout,
        "stderr": result.stderr,
        "stdout_truncated": result.stdout_truncated,
        "stderr_truncated": result.stderr_truncated,
        "duration_ms": result.duration_ms,
    }
    if result.killed_by:
        output["killed_by"] = result.killed_by
    fitted = _fit(output, max_bytes)
    # Each stream is one artifact of the result: keep it under the per-artifact cap too,
    # so a chatty command is truncated rather than failed with artifact_too_large.
    artifact_max = ctx.settings.tool_max_artifact_bytes
    for key in _STREAMS:
        _cap(fitted, key, _encoded_len(fitted[key]) - 2, artifact_max - 2)
    return fitted


TOOLS: dict[str, ToolFn] = {TOOL: command_run}
"""The ``command.run`` implementation by name."""
