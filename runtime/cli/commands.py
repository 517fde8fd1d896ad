"""What each ``roost`` client command does: call the client and print.

Each ``cmd_*`` function takes the parsed arguments and returns the exit status; errors
are raised (``RoostError``) and turned into ``roost: <code>: <message>`` by
``runtime.cli.app``. With ``--json`` the result is printed as JSON on stdout, otherwise
as tables and ``key: value`` blocks (``runtime.cli.format``).

This module and what it imports load no daemon module (the ``thin-client`` contract in
``pyproject.toml``); ``daemon start|stop|status`` are in ``runtime.cli.daemonctl``.

Why this module is long: one short ``cmd_*`` function per ``roost`` command, each a call and
its output; they share the client set-up and the output helpers, and other commands are
added as separate modules.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from runtime.cli.format import (
    cell,
    dumps_json,
    event_line,
    kv_block,
    render,
    seal_lines,
    table,
)
from runtime.cli.querying import offline_args, query
from runtime.errors import RoostError

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
    "cmd_incident",
    "cmd_project_diagnostics",
    "cmd_project_list",
    "cmd_project_start",
    "cmd_project_stop",
    "cmd_project_tools",
    "cmd_projection",
    "cmd_reject",
    "cmd_resume",
    "cmd_run_tool",
    "cmd_send",
    "cmd_tail",
    "cmd_timeline",
    "cmd_verify",
    "exit_status",
    "json_errors",
    "message_text",
    "print_error",
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


class UsageError(RoostError):
    """A combination of options the parser cannot refuse by itself (exit 2)."""

    code = "usage"


_ERRORS = {"json": False}
"""How :func:`print_error` prints: as one JSON object (``--json``) or as one line."""


def json_errors(on: bool) -> None:
    """Print the errors of this run as JSON objects (``--json``), or as lines (``roost main``)."""
    _ERRORS["json"] = on


def print_error(
    code: str, message: str, details: dict[str, Any] | None = None, status: int | None = None
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


def _client(ns: Namespace) -> Client:
    # imported here: --help, --version and completion do not need the client
    from runtime.client.connection import Client  # noqa: PLC0415

    return Client.connect(ns.home)


# --- projects ---------------------------------------------------------------------------


def cmd_project_start(ns: Namespace) -> int:
    """``roost project start ROOT [--id ID] [--opt K=V ...] [--options-file FILE]``.

    An MCP server of the project that did not start is one ``mcp_server_failed`` line on
    stderr (its exit status, last stderr line and fix); the project runs, exit 1.
    """
    from runtime.policy import options as roost_options  # noqa: PLC0415 - this command only

    from_file = roost_options.load_options_file(ns.options_file) if ns.options_file else None
    pairs = roost_options.parse_opt_pairs(ns.opt or [])
    options = roost_options.merge_options(from_file, pairs)
    with _client(ns) as c:
        project_id = c.start_project(ns.root, project_id=ns.id, options=options)
        health = c.diagnostics(project_id).get("health") or {}
        rows = c.list_projects()
    problems: dict[str, Any] = dict(health.get("problems") or {})
    result: dict[str, Any] = {"project_id": project_id}
    if problems:
        result["problems"] = problems
    root = next((r.get("root") for r in rows if r.get("project_id") == project_id), None)
    shared = sorted(r["project_id"] for r in rows if r.get("root") == root) if root else []
    if len(shared) > 1:  # the same root under two ids: allowed, but said (docs/cli.md)
        result["shared_root_with"] = others = [p for p in shared if p != project_id]
        print(
            f"roost: warning: {root} is also the root of running project(s) "
            f"{', '.join(others)}: their tools read and write the same files; "
            f"`roost project stop {others[0]}` if that is not meant",
            file=sys.stderr,
        )
    _out(ns, result, lambda v: project_id)
    for problem in problems.values():  # the project runs, without these servers' tools
        print_error("mcp_server_failed", _server_problem(problem))
    return EXIT_FAILURE if problems else 0


def _server_problem(problem: dict[str, Any]) -> str:
    """One line: the server, how it ended, its last stderr line, the fix when known."""
    reason = str(problem.get("reason") or "")
    code, _, message = reason.partition(": ")
    return (message or reason or code).replace("\n", " ")


def cmd_project_stop(ns: Namespace) -> int:
    """``roost project stop ID``."""
    with _client(ns) as c:
        c.stop_project(ns.project)
    _out(ns, {"project_id": ns.project, "stopped": True}, lambda v: f"project {ns.project} stopped")
    return 0


def _ids(ns: Namespace, rows: list[dict[str, Any]], key: str) -> bool:
    """With ``-q``: print the ids only (``docker ps -q``) and say so."""
    if not getattr(ns, "quiet", False):
        return False
    if ns.json:
        print(dumps_json([row.get(key) for row in rows]), flush=True)
    else:
        for row in rows:
            print(row.get(key), flush=True)
    return True


def cmd_project_list(ns: Namespace) -> int:
    """``roost project list [--all] [-q]``: PROJECT ROOT CONVERSATIONS STARTED.

    With ``--all``, every project the journal knows (no daemon needed), with its STATE.
    """
    if getattr(ns, "all", False):
        projects = query(
            ns.home,
            lambda c: c.list_projects(all=True),
            lambda views, journal: [  # no daemon: what it would restore when it starts
                {**p, "state": "restorable"} if p["state"] == "running" else p
                for p in views.journal_projects(journal)
            ],
        )
    else:
        with _client(ns) as c:
            projects = c.list_projects()
    if _ids(ns, projects, "project_id"):
        return 0
    columns = [
        ("project_id", "PROJECT"),
        *([("state", "STATE")] if getattr(ns, "all", False) else []),
        ("root", "ROOT"),
        ("conversation_count", "CONVERSATIONS"),
        ("started_at", "STARTED"),
    ]
    _out(ns, projects, lambda v: table(v, columns, empty="(no projects)"))
    return 0


def cmd_project_diagnostics(ns: Namespace) -> int:
    """``roost project diagnostics ID``."""
    with _client(ns) as c:
        diagnostics = c.diagnostics(ns.project)
    _out(ns, diagnostics, kv_block)
    return 0


def _tools_table(tools: list[dict[str, Any]]) -> str:
    flag_names = (
        ("read_only", "ro"),
        ("writes", "writes"),
        ("network_capable", "net"),
        ("runs_commands", "cmd"),
    )
    rows = [
        {
            "name": t.get("name"),
            "flags": ",".join(short for key, short in flag_names if t.get(key)) or None,
            "description": t.get("description"),
        }
        for t in tools
    ]
    columns = [("name", "NAME"), ("flags", "FLAGS"), ("description", "DESCRIPTION")]
    return table(rows, columns, empty="(no tools)")


def cmd_project_tools(ns: Namespace) -> int:
    """``roost project tools ID``: NAME FLAGS DESCRIPTION."""
    with _client(ns) as c:
        tools = c.list_tools(ns.project)
    _out(ns, tools, _tools_table)
    return 0


# --- conversations and events -----------------------------------------------------------


def cmd_conversation_start(ns: Namespace) -> int:
    """``roost conversation start PROJECT [--id ID]``."""
    with _client(ns) as c:
        conversation_id = c.start_conversation(ns.project, conversation_id=ns.id)
    result = {"project_id": ns.project, "conversation_id": conversation_id}
    _out(ns, result, lambda v: conversation_id)
    return 0


def cmd_conversation_stop(ns: Namespace) -> int:
    """``roost conversation stop PROJECT CONV``."""
    with _client(ns) as c:
        c.stop_conversation(ns.project, ns.conversation)
    result = {"project_id": ns.project, "conversation_id": ns.conversation, "stopped": True}
    _out(ns, result, lambda v: f"conversation {ns.conversation} stopped")
    return 0


def cmd_conversation_list(ns: Namespace) -> int:
    """``roost conversation list PROJECT [-q]``: CONVERSATION PROCESS ENTRIES LAST_EVENT AT.

    Read from the journal (the incident timeline), so passivated conversations stay asleep.
    """
    with _client(ns) as c:
        diagnostics = c.diagnostics(ns.project)
        active = set(diagnostics.get("active_conversations") or [])
        rows = []
        for conversation_id in diagnostics.get("conversations") or []:
            timeline = c.incident_timeline(ns.project, conversation_id, limit=1)
            last = (timeline.get("entries") or [{}])[-1]
            rows.append(
                {
                    "conversation_id": conversation_id,
                    "process": "live" if conversation_id in active else "passivated",
                    "entries": timeline.get("total_entries", 0),
                    "last_event": last.get("type"),
                    "last_at": last.get("at"),
                }
            )
    if _ids(ns, rows, "conversation_id"):
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


def turn_failure(ack: dict[str, Any]) -> str | None:
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


def _acked(ns: Namespace, ack: dict[str, Any]) -> int:
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
    with _client(ns) as c:
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
    with _client(ns) as c:
        ack = c.send_event(
            ns.project, ns.conversation, event, wait=ns.wait, wait_timeout_s=ns.wait_timeout
        )
    return _acked(ns, ack)


def cmd_cancel(ns: Namespace) -> int:
    """``roost cancel PROJECT CONV [--correlation-id ID] [--reason TEXT]``."""
    with _client(ns) as c:
        result = c.cancel(ns.project, ns.conversation, ns.correlation_id, ns.reason)
    _out(ns, result)
    return 0


def cmd_resume(ns: Namespace) -> int:
    """``roost resume PROJECT CONV``."""
    with _client(ns) as c:
        result = c.resume(ns.project, ns.conversation)
    _out(ns, result)
    return 0


def cmd_approve(ns: Namespace) -> int:
    """``roost approve PROJECT CONV CALL_ID [--wait [--wait-timeout S]]``.

    With ``--wait``: print the turn's outcome and exit as ``send --wait`` does
    (``runtime.cli.waiting``).
    """
    deadline = time.monotonic() + ns.wait_timeout
    with _client(ns) as c:
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
    with _client(ns) as c:
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
    with _client(ns) as c:
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


# --- queries ----------------------------------------------------------------------------

_EVENT_COLUMNS = [
    ("seq", "SEQ"),
    ("at", "AT"),
    ("type", "TYPE"),
    ("correlation_id", "CORRELATION"),
    ("data", "DATA"),
]
_PENDING_COLUMNS = [
    ("call_id", "CALL_ID"),
    ("name", "NAME"),
    ("status", "STATUS"),
    ("run_mode", "RUN_MODE"),
    ("requested_seq", "REQUESTED_SEQ"),
    ("args", "ARGS"),
]


def _tool_content(content: Any) -> str:
    """A tool message's content for people: the tool's result as a block."""
    import json  # noqa: PLC0415

    try:
        sent = json.loads(content) if isinstance(content, str) else content
    except ValueError:
        return str(content)
    if isinstance(sent, dict) and isinstance(sent.get("result"), dict):
        return kv_block(sent["result"])
    return render(sent)


def _context_text(messages: list[Any]) -> str:
    """``llm_context`` for people: each message the model sees, tool results in full."""
    blocks = []
    for message in messages:
        if not isinstance(message, dict):
            blocks.append(cell(message, None))
            continue
        role = message.get("role")
        if role == "tool":
            head = f"[tool {message.get('name')} {message.get('tool_call_id')}: "
            head += (
                f"{message.get('status')}{' ' + message['code'] if message.get('code') else ''}]"
            )
            body = _tool_content(message.get("content"))
            body_lines = [f"  {line}".rstrip() for line in body.splitlines()]
            blocks.append("\n".join([head, *body_lines]))
            continue
        lines = [f"[{role}] {message.get('content') or ''}".rstrip()]
        for call in message.get("tool_calls") or []:
            args = cell(call.get("args"), None)
            lines.append(f"  calls {call.get('name')} {call.get('id')} {args}")
        blocks.append("\n".join(lines))
    return "\n".join(blocks) if blocks else "(no messages)"


def _projection_text(key: str, value: Any) -> str:
    if key == "timeline" and isinstance(value, list):
        return table(value, _EVENT_COLUMNS, empty="(no events)")
    if key == "pending_tool_calls" and isinstance(value, list):
        return table(value, _PENDING_COLUMNS, empty="(no pending calls)")
    if key == "llm_context" and isinstance(value, list):
        return _context_text(value)
    return render(value)


def cmd_projection(ns: Namespace) -> int:
    """``roost projection PROJECT CONV KEY [-q]``."""
    if ns.quiet and ns.key != "pending_tool_calls":
        raise UsageError("-q applies to pending_tool_calls only (see `roost projection --help`)")
    with _client(ns) as c:
        value = c.get_projection(ns.project, ns.conversation, ns.key)
    if isinstance(value, list) and _ids(ns, value, "call_id"):
        return 0
    _out(ns, value, lambda v: _projection_text(ns.key, v))
    return 0


def _timeline_text(value: dict[str, Any]) -> str:
    entries = value.get("entries") or []
    corr = value.get("correlation_id")
    head = (
        f"timeline of {value.get('project_id')}/{value.get('conversation_id')}"
        + (f" (correlation {corr})" if corr else "")
        + f": {len(entries)} of {value.get('total_entries', len(entries))} entries"
    )
    columns = [*_EVENT_COLUMNS[:2], ("source", "SOURCE"), *_EVENT_COLUMNS[2:]]
    return head + "\n" + table(entries, columns, empty="(no entries)") + _next_page(value)


def _next_page(value: dict[str, Any]) -> str:
    """Where the next page starts, when this one is full: a line to copy, or nothing."""
    entries = value.get("entries") or []
    if not entries or len(entries) < int(value.get("limit") or 0):
        return ""
    if value.get("after_seq") is not None:
        return f"\nlater entries: --after-seq {entries[-1]['seq']}"
    return f"\nearlier entries: --before-seq {entries[0]['seq']}"


def cmd_timeline(ns: Namespace) -> int:
    """``roost timeline PROJECT CONV [--limit N] [--correlation-id ID] [--after-seq N] ...``.

    ``--after-seq``/``--before-seq`` page through it; an empty window is a usage error. No
    daemon needed.
    """
    after, before = ns.after_seq, ns.before_seq
    if after is not None and before is not None and before <= after:
        raise UsageError(
            f"--before-seq {before} must be greater than --after-seq {after}: no entry lies "
            "between them (see `roost timeline --help`)"
        )
    args = {
        "project_id": ns.project,
        "conversation_id": ns.conversation,
        "limit": ns.limit,
        "correlation_id": ns.correlation_id,
        "after_seq": after,
        "before_seq": before,
    }
    value = query(
        ns.home,
        lambda c: c.incident_timeline(
            ns.project,
            ns.conversation,
            ns.limit,
            ns.correlation_id,
            after_seq=after,
            before_seq=before,
        ),
        lambda views, journal: views.timeline_view(
            journal, offline_args("incident_timeline", args)
        ),
    )
    _out(ns, value, _timeline_text)
    return 0


def cmd_incident(ns: Namespace) -> int:
    """``roost incident PROJECT CONV [--correlation-id ID] [--format md|json|html] [-o FILE]``.

    The default format is ``md`` for people and ``json`` with ``--json``; ``-o`` writes
    the report to FILE atomically instead of stdout, and prints one line naming it
    (``wrote FILE (FORMAT, N bytes)``; with ``--json``, ``{path, format, bytes}``). No daemon
    needed.
    """
    fmt = ns.format or ("json" if ns.json else "md")
    args = {
        "project_id": ns.project,
        "conversation_id": ns.conversation,
        "correlation_id": ns.correlation_id,
        "format": fmt,
    }
    report = query(
        ns.home,
        lambda c: c.call("incident_report", args),
        lambda views, journal: views.report_view(journal, offline_args("incident_report", args)),
    )
    text = dumps_json(report) if ns.json or fmt == "json" else str(report)
    text = text if text.endswith("\n") else f"{text}\n"
    if ns.output is not None:
        from runtime.cli.output import write_output  # noqa: PLC0415 - with -o only

        write_output(ns.output, text)
        size = len(text.encode("utf-8"))
        written = {"path": ns.output, "format": fmt, "bytes": size}
        _out(ns, written, lambda w: f"wrote {w['path']} ({w['format']}, {w['bytes']} bytes)")
    else:
        sys.stdout.write(text)
        sys.stdout.flush()
    return 0


def cmd_tail(ns: Namespace) -> int:
    """``roost tail PROJECT [CONV] [--after-seq N] [--correlation-id ID] [--until TYPE]``.

    Ends with 0 on Ctrl-C, when the daemon ends the stream (project stopped, daemon
    stopped cleanly) or after the first ``--until`` event; 1 (``not_seen``) when the
    stream ended before an ``--until`` event came.
    """
    with _client(ns) as c, c.subscribe(ns.project, ns.conversation, ns.after_seq) as stream:
        try:
            for event in stream:
                if ns.correlation_id and event.get("correlation_id") != ns.correlation_id:
                    continue
                print(dumps_json(event, pretty=False) if ns.json else event_line(event), flush=True)
                if ns.until is not None and event.get("type") == ns.until:
                    return 0
        except KeyboardInterrupt:
            return 0
    if ns.until is not None:
        print_error("not_seen", f"the stream ended before a {ns.until} event", {"until": ns.until})
        return EXIT_FAILURE
    return 0


def _mismatch_line(mismatch: Any) -> str:
    if isinstance(mismatch, dict):
        kind = mismatch.get("kind", "mismatch")
        fields = {k: v for k, v in mismatch.items() if k not in ("kind", "diff")}
        rest = ", ".join(f"{k}={cell(v, 80)}" for k, v in fields.items())
        line = f"  - {kind}: {rest}" if rest else f"  - {kind}"
        diff = mismatch.get("diff")
        if isinstance(diff, list) and diff:
            line += "\n" + "\n".join(f"      {d}" for d in diff)
        return line
    return f"  - {cell(mismatch, None)}"


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _verify_text(result: dict[str, Any]) -> str:
    verdict = "ok" if result.get("ok") else "NOT OK"
    chain = "hash chain ok" if result.get("chain_ok") else "hash chain BROKEN"
    lines = [f"{verdict}: {result.get('checked_events', 0)} events checked, {chain}"]
    mismatches = result.get("mismatches") or []
    if mismatches:
        lines.append(f"{_count(len(mismatches), 'mismatch', 'mismatches')}:")
        lines.extend(_mismatch_line(m) for m in mismatches)
    lines.extend(seal_lines(result))
    for gone in result.get("deletions") or []:
        signed = "record signed" if gone.get("valid") else "record NOT signed with this key"
        lines.append(
            f"deleted: {gone.get('events')} earlier events at {gone.get('deleted_at')} by "
            f"{gone.get('deleted_by') or '?'} (seq {gone.get('seq')}, {signed})"
        )
    return "\n".join(lines)


def cmd_verify(ns: Namespace) -> int:
    """``roost verify PROJECT``: exit 1 when the project does not verify."""
    from runtime.cli.progress import Progress  # noqa: PLC0415 - rich loads for this command

    with _client(ns) as c, Progress(f"verifying {ns.project}").ticking():
        result = c.verify(ns.project)
    _out(ns, result, _verify_text)
    if not result.get("ok"):
        count = len(result.get("mismatches") or [])
        found = _count(count, "mismatch", "mismatches")
        problems = len(result.get("anchor_problems") or [])
        if problems:
            found += ", " + _count(problems, "anchor problem", "anchor problems")
        print_error(
            "verify_failed",
            f"project {ns.project} does not verify ({found})",
            {"project_id": ns.project, "mismatches": count, "anchor_problems": problems},
        )
        return 1
    return 0
