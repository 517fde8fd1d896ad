"""The ``roost`` conversation commands, and what every client command shares.

Each ``cmd_*`` function takes the parsed arguments and returns the exit status; errors
are raised (``RoostError``) and turned into ``roost: <code>: <message>`` by
``runtime.cli.app``. With ``--json`` the result is printed as JSON on stdout, otherwise
as tables and ``key: value`` blocks (``runtime.cli.format``).

This module and what it imports load no daemon module (the ``thin-client`` contract in
``pyproject.toml``); ``daemon start|stop|status`` are in ``runtime.cli.daemonctl``.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from runtime.cli.format import (
    UsageError,
    dumps_json,
    kv_block,
    render,
    table,
)

if TYPE_CHECKING:
    from runtime.client.connection import Client

__all__ = [
    "EXIT_FAILURE",
    "EXIT_INTERRUPTED",
    "EXIT_NOT_RUNNING",
    "EXIT_OK",
    "EXIT_TIMEOUT",
    "EXIT_UNREACHABLE",
    "EXIT_USAGE",
    "cmd_approve",
    "cmd_cancel",
    "cmd_conversation_list",
    "cmd_conversation_start",
    "cmd_conversation_stop",
    "cmd_event",
    "cmd_reject",
    "cmd_resume",
    "cmd_run_tool",
    "cmd_send",
    "connect",
    "exit_status",
    "json_errors",
    "message_text",
    "print_error",
    "print_ids",
    "print_result",
    "turn_failure",
]

EXIT_OK = 0
"""Success."""
EXIT_FAILURE = 1
"""The request, the turn, the tool or the check failed."""
EXIT_USAGE = 2
"""The command line is wrong."""
EXIT_UNREACHABLE = 3
"""No daemon answers (``daemon_unreachable``; ``daemon status`` when none runs)."""
EXIT_NOT_RUNNING = EXIT_UNREACHABLE
"""``roost daemon status`` exit status when no daemon runs (as LSB init scripts do)."""
EXIT_TIMEOUT = 4
"""A ``timeout``: the request, or the turn ``--wait`` waited for, did not finish in time."""
EXIT_INTERRUPTED = 130
"""Ctrl-C (except for ``tail`` and ``logs --follow``, which stop with 0)."""

_EXIT_BY_CODE = {
    "daemon_unreachable": EXIT_UNREACHABLE,
    "timeout": EXIT_TIMEOUT,
    "usage": EXIT_USAGE,
}
_FAILED_TURNS = ("llm.failed", "budget.exceeded")


def exit_status(code: str) -> int:
    """The exit status of a failure with error ``code`` (1 unless the code has its own)."""
    return _EXIT_BY_CODE.get(code, EXIT_FAILURE)


Namespace = argparse.Namespace


_ERRORS = {"json": False}
"""How :func:`print_error` prints: as one JSON object (``--json``) or as one line."""


def json_errors(on: bool) -> None:
    """Print the errors of this run as JSON objects (``--json``), or as lines (``roost main``)."""
    _ERRORS["json"] = on


def print_error(
    code: str,
    message: str,
    details: Mapping[str, object] | None = None,
    status: int | None = None,
) -> None:
    """Print an error on stderr: ``roost: <code>: <message>``, its first line only.

    With ``--json`` (:func:`json_errors`), one JSON object on one line instead:
    ``{"code", "message", "details", "exit_status"}``, with the whole message and the
    ``details`` the daemon sent; ``exit_status`` defaults to :func:`exit_status` of ``code``.
    """
    if _ERRORS["json"]:
        import json  # noqa: PLC0415 - the client has loaded it by now; --version does not

        error = {
            "code": code,
            "message": message.strip() or code,
            "details": details or {},
            "exit_status": exit_status(code) if status is None else status,
        }
        print(json.dumps(error, default=str), file=sys.stderr, flush=True)
        return
    first = message.strip().splitlines()[0] if message.strip() else code
    print(f"roost: {code}: {first}", file=sys.stderr)


def print_result(ns: Namespace, value: Any, human: Callable[[Any], str] = render) -> None:
    """Print a command's result: JSON with ``--json``, else ``human(value)``."""
    text = dumps_json(value) if ns.json else human(value)
    print(text, flush=True)


_out = print_result


def connect(ns: Namespace) -> Client:
    """A client of the daemon on ``ns.home`` (``--home``), imported on first use."""
    # imported here: --help, --version and completion do not need the client
    from runtime.client.connection import Client  # noqa: PLC0415

    return Client.connect(ns.home)


def print_ids(ns: Namespace, rows: Sequence[Mapping[str, object]], key: str) -> bool:
    """With ``-q``: print the ids only (``docker ps -q``) and say so."""
    if not getattr(ns, "quiet", False):
        return False
    if ns.json:
        print(dumps_json([row.get(key) for row in rows]), flush=True)
    else:
        for row in rows:
            print(row.get(key), flush=True)
    return True


# --- conversations and events -----------------------------------------------------------


def cmd_conversation_start(ns: Namespace) -> int:
    """``roost conversation start PROJECT [--id ID]``."""
    with connect(ns) as c:
        conversation_id = c.start_conversation(ns.project, conversation_id=ns.id)
    result = {"project_id": ns.project, "conversation_id": conversation_id}
    _out(ns, result, lambda v: conversation_id)
    return 0


def cmd_conversation_stop(ns: Namespace) -> int:
    """``roost conversation stop PROJECT CONV``."""
    with connect(ns) as c:
        c.stop_conversation(ns.project, ns.conversation)
    result = {"project_id": ns.project, "conversation_id": ns.conversation, "stopped": True}
    _out(ns, result, lambda v: f"conversation {ns.conversation} stopped")
    return 0


def cmd_conversation_list(ns: Namespace) -> int:
    """``roost conversation list PROJECT [-q]``: CONVERSATION PROCESS ENTRIES LAST_EVENT AT.

    Read from the journal (the incident timeline), so passivated conversations stay asleep.
    """
    with connect(ns) as c:
        diagnostics = c.diagnostics(ns.project)
        active = set(diagnostics.get("active_conversations") or [])
        rows = []
        for conversation_id in diagnostics.get("conversations") or []:
            timeline = c.incident_timeline(ns.project, conversation_id, limit=1)
            last = timeline["entries"][-1] if timeline["entries"] else None
            rows.append(
                {
                    "conversation_id": conversation_id,
                    "process": "live" if conversation_id in active else "passivated",
                    "entries": timeline["total_entries"],
                    "last_event": last["type"] if last else None,
                    "last_at": last["at"] if last else None,
                }
            )
    if print_ids(ns, rows, "conversation_id"):
        return 0
    columns = [
        ("conversation_id", "CONVERSATION"),
        ("process", "PROCESS"),
        ("entries", "ENTRIES"),
        ("last_event", "LAST_EVENT"),
        ("last_at", "AT"),
    ]
    _out(ns, rows, lambda v: table(v, columns, empty="(no conversations)"))
    return 0


def turn_failure(ack: Mapping[str, object]) -> str | None:
    """Why the turn of a ``--wait`` ack failed (``llm.failed``, ``budget.exceeded``), or None."""
    outcome = ack.get("outcome")
    if outcome not in _FAILED_TURNS:
        return None
    from events.catalog import BudgetExceeded, LlmFailed, decode_data  # noqa: PLC0415

    match decode_data(str(outcome), ack.get("outcome_data") or {}):
        case BudgetExceeded(budget=budget, limit=limit, used=used):
            return f"budget.exceeded: {budget} (limit {limit}, used {used})"
        case LlmFailed(reason=reason, message=message) if reason:
            return f"llm.failed: {reason}: {message}" if message else f"llm.failed: {reason}"
    return f"{outcome}: unknown"


def _acked(ns: Namespace, ack: Mapping[str, object]) -> int:
    """Print an ack; a ``--wait`` whose turn failed exits 1 with ``turn_failed``."""
    _out(ns, ack, kv_block)
    failure = turn_failure(ack)
    if failure is not None:
        keys = ("correlation_id", "outcome", "outcome_data")
        print_error("turn_failed", failure, {k: ack.get(k) for k in keys})
        return EXIT_FAILURE
    return 0


def message_text(text: str | None, path: str | None) -> str:
    """The text of ``roost send``: TEXT, stdin (TEXT ``-``) or ``--file PATH``, as is.

    Raises ``UsageError`` (exit 2) for both or neither, and for a file or stdin that
    cannot be read as UTF-8.
    """
    if text is not None and path is not None:
        raise UsageError(
            "give the message as TEXT or with --file PATH, not both (see `roost send --help`)"
        )
    if text is None and path is None:
        raise UsageError(
            "a message is required: TEXT, - (read stdin) or --file PATH (see `roost send --help`)"
        )
    if path is None and text != "-":
        return str(text)
    where = "stdin" if path is None else f"--file {path}"
    try:
        if path is None:
            return sys.stdin.buffer.read().decode("utf-8")
        with open(path, "rb") as f:
            return f.read().decode("utf-8")
    except UnicodeDecodeError as e:
        raise UsageError(f"{where} is not UTF-8 text ({e.reason} at byte {e.start})") from e
    except OSError as e:
        raise UsageError(f"cannot read {where}: {e.strerror or e}") from e


def cmd_send(ns: Namespace) -> int:
    """``roost send PROJECT CONV (TEXT | - | --file PATH) [--wait] [--llm JSON] ...``."""
    text = message_text(ns.text, ns.file)
    with connect(ns) as c:
        ack = c.send_message(
            ns.project,
            ns.conversation,
            text,
            correlation_id=ns.correlation_id,
            wait=ns.wait,
            wait_timeout_s=ns.wait_timeout,
            llm=ns.llm,
        )
    return _acked(ns, ack)


def cmd_event(ns: Namespace) -> int:
    """``roost event PROJECT CONV --type TYPE [--data JSON]``."""
    event = {"type": ns.type, "data": ns.data, "correlation_id": ns.correlation_id}
    with connect(ns) as c:
        ack = c.send_event(
            ns.project, ns.conversation, event, wait=ns.wait, wait_timeout_s=ns.wait_timeout
        )
    return _acked(ns, ack)


def cmd_cancel(ns: Namespace) -> int:
    """``roost cancel PROJECT CONV [--correlation-id ID] [--reason TEXT]``."""
    with connect(ns) as c:
        result = c.cancel(ns.project, ns.conversation, ns.correlation_id, ns.reason)
    _out(ns, result)
    return 0


def cmd_resume(ns: Namespace) -> int:
    """``roost resume PROJECT CONV``."""
    with connect(ns) as c:
        result = c.resume(ns.project, ns.conversation)
    _out(ns, result)
    return 0


def cmd_approve(ns: Namespace) -> int:
    """``roost approve PROJECT CONV CALL_ID [--wait [--wait-timeout S]]``.

    With ``--wait``: print the turn's outcome and exit as ``send --wait`` does
    (``runtime.cli.waiting``).
    """
    deadline = time.monotonic() + ns.wait_timeout
    with connect(ns) as c:
        result = c.approve(ns.project, ns.conversation, ns.call_id)
        if ns.wait:
            from runtime.cli.waiting import wait_for_turn  # noqa: PLC0415 - with --wait only

            outcome = wait_for_turn(
                c, ns.project, ns.conversation, result, deadline=deadline, timeout_s=ns.wait_timeout
            )
            return _acked(ns, {"call_id": ns.call_id, **outcome})
    _out(ns, result)
    return 0


def cmd_reject(ns: Namespace) -> int:
    """``roost reject PROJECT CONV CALL_ID [--reason TEXT]``."""
    with connect(ns) as c:
        result = c.reject(ns.project, ns.conversation, ns.call_id, ns.reason)
    _out(ns, result)
    return 0


def cmd_run_tool(ns: Namespace) -> int:
    """``roost run-tool PROJECT NAME --args JSON``: exit 1 when the tool failed.

    A command tool (``command.run``, ``command.run.<key>``) whose command exited non-zero
    succeeded as a tool call (``status: ok``, the model reads ``exit_code``), but the CLI
    exits 1 with ``command_failed``, as ``docker exec`` passes a command's failure on.
    """
    meta = {"conversation_id": ns.conversation, "correlation_id": ns.correlation_id}
    request = {"name": ns.name, "args": ns.args, "meta": meta}
    with connect(ns) as c:
        result = c.run_tool(ns.project, request)
    _out(ns, result, kv_block)
    if result.get("status") == "error":
        reason = result.get("reason") or {}
        code = str(reason.get("code", "tool_failed"))
        message = str(reason.get("message") or f"{ns.name} failed")
        details = {k: v for k, v in reason.items() if k not in ("code", "message")}
        print_error(code, message, details, EXIT_FAILURE)
        return EXIT_FAILURE
    output = result.get("result")
    exit_code = output.get("exit_code") if isinstance(output, dict) else None
    if isinstance(exit_code, int) and exit_code != 0:
        hint = " (not found on the sandbox's PATH?)" if exit_code == 127 else ""
        print_error(
            "command_failed",
            f"{ns.name}: the command exited with status {exit_code}{hint}",
            {"tool": ns.name, "exit_code": exit_code},
        )
        return EXIT_FAILURE
    return 0
