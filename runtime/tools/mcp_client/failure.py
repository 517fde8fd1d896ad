"""Why an MCP server did not start, in words an operator can act on.

The SDK reports a server that died before it answered as an ``ExceptionGroup`` of its task
group ("unhandled errors in a TaskGroup (1 sub-exception)"):
:func:`runtime.tools.sdk_loop.root_cause` finds the error inside. :func:`start_failure`
turns it, with the server's exit status and the tail of its stderr
(:meth:`runtime.guard.sandbox.server_process.ServerProcess.exit_report`), into the ``ToolError``
that the tool listing at project start (``project.assets_loaded``'s ``errors``),
``diagnostics`` and ``roost project start`` show, and that a call meeting the same failure
fails with. The stderr tail is the server's own output: secrets in known shapes are
redacted, control characters replaced and its length bounded (:func:`clean_tail`).
:func:`hint_for` recognizes two common causes in it (a Python without a module the server
imports, a command the sandbox cannot find) and says how to fix them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from runtime.errors import ToolError
from runtime.guard.secrets.redaction import redact_text
from runtime.tools.sdk_loop import root_cause

__all__ = ["MAX_TAIL_CHARS", "clean_tail", "hint_for", "start_failure"]

MAX_TAIL_CHARS = 1500
"""Most characters of a server's stderr tail carried in an error (its last ones)."""

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_MISSING_MODULE = re.compile(r"ModuleNotFoundError: No module named '([\w.]+)'")
_NOT_FOUND = re.compile(r"execvp (\S+): No such file or directory")
_Hint = Callable[[re.Match[str], list[str]], str]


def clean_tail(text: str, limit: int = MAX_TAIL_CHARS) -> str:
    """``text``'s end, at most ``limit`` characters from a line start, safe to show."""
    text = redact_text(_CONTROL.sub("?", text.replace("\r\n", "\n"))).strip()
    if len(text) <= limit:
        return text
    cut = text[-limit:]
    newline = cut.find("\n")
    return "..." + (cut[newline:] if 0 <= newline < limit // 2 else cut)


def _missing_module(found: re.Match[str], argv: list[str]) -> str:
    return (
        f"the Python that runs the server ({argv[0] if argv else '?'}) has no module "
        f"'{found.group(1)}'; give the server a Python that has it, in a place the sandbox "
        "shows (not $HOME): a virtualenv named in command_read_paths, e.g. "
        '"command": ["/opt/mcp-venv/bin/python", ...] with '
        '"command_read_paths": ["/opt/mcp-venv"]'
    )


def _no_program(found: re.Match[str], argv: list[str]) -> str:
    return (
        f"the sandbox has no program {found.group(1)}; name one the system or the "
        "project root provides (a path relative to the root, or an absolute system path)"
    )


_HINTS: tuple[tuple[re.Pattern[str], Callable[[re.Match[str]], bool], _Hint], ...] = (
    # a package's missing part (a dotted name) is not this
    (_MISSING_MODULE, lambda found: "." not in found.group(1), _missing_module),
    (_NOT_FOUND, lambda found: True, _no_program),
)
"""What a stderr tail may show and how to fix it: ``(pattern, applies, hint)``, in order."""


def hint_for(tail: str, argv: list[str]) -> str:
    """How to fix what the stderr ``tail`` shows, or ``""`` when it shows nothing known."""
    for pattern, applies, hint in _HINTS:
        found = pattern.search(tail)
        if found and applies(found):
            return hint(found, argv)
    return ""


def _how(report: Mapping[str, Any]) -> str:
    status = report.get("exit_status")
    if status is None:
        return "did not answer and was stopped" if report else "failed"
    if isinstance(status, int) and status < 0:
        return f"was killed by signal {-status} before it answered"
    return f"exited with status {status} before it answered"


def start_failure(
    server: str, error: BaseException, report: Mapping[str, Any], argv: list[str]
) -> ToolError:
    """The error of server ``server`` that failed to start with ``error``.

    ``report`` is :meth:`~runtime.guard.sandbox.server_process.ServerProcess.exit_report`'s
    (``{}`` for an HTTP server or a process that was not started). The message names how
    the server ended and its last stderr line; the details carry ``exit_status``,
    ``stderr_tail`` and ``hint``.
    """
    cause = root_cause(error)
    if isinstance(cause, ToolError):  # already says what (confinement, egress policy)
        return cause
    tail = clean_tail(str(report.get("stderr_tail") or ""))
    last = next((line for line in reversed(tail.splitlines()) if line.strip()), "")
    text = f"{type(cause).__name__}: {cause}"
    if len(text) > 200:
        text = text[:197] + "..."
    message = f"MCP server {server} {_how(report)} ({text})"
    if last:
        message += f"; stderr: {last if len(last) <= 400 else last[:397] + '...'}"
    details: dict[str, object] = {"kind": "mcp_server_unavailable", "server": server}
    if report:
        details.update(exit_status=report.get("exit_status"), stderr_tail=tail)
    hint = hint_for(tail, argv)
    if hint:
        message += f"; {hint}"
        details["hint"] = hint
    return ToolError("tool_error", message, **details)
