"""The ``roost`` commands that read what a conversation did.

``projection``, ``timeline``, ``incident``, ``tail`` and ``verify``. ``timeline`` and
``incident`` need no daemon (:func:`runtime.cli.querying.query`); like every client
command, these load no daemon module (the ``thin-client`` contract).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from runtime.cli.commands import (
    EXIT_FAILURE,
    connect,
    print_error,
    print_ids,
    print_result,
)
from runtime.cli.format import (
    UsageError,
    cell,
    dumps_json,
    event_line,
    kv_block,
    render,
    seal_lines,
    table,
)
from runtime.cli.querying import offline_args, query

if TYPE_CHECKING:
    from events.view_types import TimelinePage
    from runtime.client.replies import VerifyReport

__all__ = ["cmd_incident", "cmd_projection", "cmd_tail", "cmd_timeline", "cmd_verify"]


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


def _tool_message(message: Mapping[str, Any]) -> str:
    """A tool result the model sees: the call, its status and code, the result as a block."""
    head = f"[tool {message.get('name')} {message.get('tool_call_id')}: "
    head += f"{message.get('status')}{' ' + message['code'] if message.get('code') else ''}]"
    body = _tool_content(message.get("content"))
    return "\n".join([head, *(f"  {line}".rstrip() for line in body.splitlines())])


def _said_message(message: Mapping[str, Any]) -> str:
    """A message someone said (the system, the user, the model): its text and its calls."""
    lines = [f"[{message.get('role')}] {message.get('content') or ''}".rstrip()]
    for call in message.get("tool_calls") or []:
        args = cell(call.get("args"), None)
        lines.append(f"  calls {call.get('name')} {call.get('id')} {args}")
    return "\n".join(lines)


_MESSAGE_TEXT: dict[str, Callable[[Mapping[str, Any]], str]] = {"tool": _tool_message}
"""How a message of each role is shown (any other role: :func:`_said_message`)."""


def _context_text(messages: list[Mapping[str, Any]]) -> str:
    """``llm_context`` for people: each message the model sees, tool results in full.

    Each message is an object (``events.projections.llm_context``).
    """
    blocks = [_MESSAGE_TEXT.get(str(m.get("role")), _said_message)(m) for m in messages]
    return "\n".join(blocks) if blocks else "(no messages)"


_PROJECTION_TEXT: dict[str, Callable[[list[Any]], str]] = {
    "timeline": lambda value: table(value, _EVENT_COLUMNS, empty="(no events)"),
    "pending_tool_calls": lambda value: table(value, _PENDING_COLUMNS, empty="(no pending calls)"),
    "llm_context": _context_text,
}
"""How a projection that is a list is shown, by its key (any other: :func:`render`)."""


def _projection_text(key: str, value: Any) -> str:
    if isinstance(value, list) and key in _PROJECTION_TEXT:
        return _PROJECTION_TEXT[key](value)
    return render(value)


def cmd_projection(ns: argparse.Namespace) -> int:
    """``roost projection PROJECT CONV KEY [-q]``."""
    if ns.quiet and ns.key != "pending_tool_calls":
        raise UsageError("-q applies to pending_tool_calls only (see `roost projection --help`)")
    with connect(ns) as c:
        value = c.get_projection(ns.project, ns.conversation, ns.key)
    if isinstance(value, list) and print_ids(ns, value, "call_id"):
        return 0
    print_result(ns, value, lambda v: _projection_text(ns.key, v))
    return 0


def _timeline_text(value: TimelinePage) -> str:
    entries = value.get("entries") or []
    corr = value.get("correlation_id")
    head = (
        f"timeline of {value.get('project_id')}/{value.get('conversation_id')}"
        + (f" (correlation {corr})" if corr else "")
        + f": {len(entries)} of {value.get('total_entries', len(entries))} entries"
    )
    columns = [*_EVENT_COLUMNS[:2], ("source", "SOURCE"), *_EVENT_COLUMNS[2:]]
    return head + "\n" + table(entries, columns, empty="(no entries)") + _next_page(value)


def _next_page(value: TimelinePage) -> str:
    """Where the next page starts, when this one is full: a line to copy, or nothing."""
    entries = value.get("entries") or []
    if not entries or len(entries) < int(value.get("limit") or 0):
        return ""
    if value.get("after_seq") is not None:
        return f"\nlater entries: --after-seq {entries[-1]['seq']}"
    return f"\nearlier entries: --before-seq {entries[0]['seq']}"


def cmd_timeline(ns: argparse.Namespace) -> int:
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
    print_result(ns, value, _timeline_text)
    return 0


def cmd_incident(ns: argparse.Namespace) -> int:
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
        print_result(
            ns, written, lambda w: f"wrote {w['path']} ({w['format']}, {w['bytes']} bytes)"
        )
    else:
        sys.stdout.write(text)
        sys.stdout.flush()
    return 0


def cmd_tail(ns: argparse.Namespace) -> int:
    """``roost tail PROJECT [CONV] [--after-seq N] [--correlation-id ID] [--until TYPE]``.

    Ends with 0 on Ctrl-C, when the daemon ends the stream (project stopped, daemon
    stopped cleanly) or after the first ``--until`` event; 1 (``not_seen``) when the
    stream ended before an ``--until`` event came.
    """
    with connect(ns) as c, c.subscribe(ns.project, ns.conversation, ns.after_seq) as stream:
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


def _mismatch_line(mismatch: Mapping[str, object]) -> str:
    """One of ``verify``'s mismatches (each an object: ``VerifyReport``)."""
    kind = mismatch.get("kind", "mismatch")
    fields = {k: v for k, v in mismatch.items() if k not in ("kind", "diff")}
    rest = ", ".join(f"{k}={cell(v, 80)}" for k, v in fields.items())
    line = f"  - {kind}: {rest}" if rest else f"  - {kind}"
    diff = mismatch.get("diff")
    if isinstance(diff, list) and diff:
        line += "\n" + "\n".join(f"      {d}" for d in diff)
    return line


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _verify_text(result: VerifyReport) -> str:
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


def cmd_verify(ns: argparse.Namespace) -> int:
    """``roost verify PROJECT``: exit 1 when the project does not verify."""
    from runtime.cli.progress import Progress  # noqa: PLC0415 - rich loads for this command

    with connect(ns) as c, Progress(f"verifying {ns.project}").ticking():
        result = c.verify(ns.project)
    print_result(ns, result, _verify_text)
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
