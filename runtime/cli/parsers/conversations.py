"""``roost conversation start|stop|list`` and the commands on one conversation.

``send``, ``event``, ``cancel``, ``resume``, ``approve``, ``reject`` and ``run-tool``
(``runtime.cli.commands``).
"""

from __future__ import annotations

import argparse

from runtime.cli import commands as cmd
from runtime.cli.parsers.tree import CommandTree, conversation_args, positive_seconds, quiet
from runtime.errors import ToolError

__all__ = ["add_conversation_commands"]


def _json_object(text: str) -> dict[str, object]:
    import json  # noqa: PLC0415 - for --data and --llm only

    try:
        value = json.loads(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"not valid JSON ({e}): {text!r}") from e
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object, got {text!r}")
    return value


def _tool_args(text: str) -> dict[str, object]:
    """Tool arguments: a JSON object without duplicate keys and with bounded nesting."""
    from runtime.guard.shapes.schema import parse_json_args  # noqa: PLC0415 - RE2 loads for --args only

    try:
        return parse_json_args(text)
    except ToolError as e:
        raise argparse.ArgumentTypeError(f"{e.details.get('reason')}: {e.message}") from e


def _waiting(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--correlation-id", metavar="ID", help="correlation id to use")
    parser.add_argument(
        "--wait",
        action="store_true",
        help="return when the turn is over; exit 1 when it failed",
    )
    parser.add_argument(
        "--wait-timeout",
        type=positive_seconds,
        default=60.0,
        metavar="S",
        help="seconds for --wait",
    )


def add_conversation_commands(tree: CommandTree) -> None:
    """The ``conversation`` group, then the commands on one conversation."""
    conversation = tree.group("conversation", "start, stop and list conversations")
    p = tree.leaf(
        conversation,
        "start",
        cmd.cmd_conversation_start,
        "start a conversation",
        "roost conversation start p1 --id c1",
    )
    p.add_argument("project", metavar="PROJECT")
    p.add_argument("--id", metavar="ID", help="conversation id (default: chosen by the daemon)")
    p = tree.leaf(
        conversation,
        "stop",
        cmd.cmd_conversation_stop,
        "stop a conversation",
        "roost conversation stop p1 c1",
    )
    conversation_args(p)
    p = tree.leaf(
        conversation,
        "list",
        cmd.cmd_conversation_list,
        "list a project's conversations",
        "roost conversation list p1",
    )
    p.add_argument("project", metavar="PROJECT")
    quiet(p, "conversation ids")

    p = tree.leaf(
        tree.top,
        "send",
        cmd.cmd_send,
        "send a user.message",
        'roost send p1 c1 "read README.md" --wait',
    )
    conversation_args(p)
    p.add_argument("text", metavar="TEXT", nargs="?", help="the message; - reads it from stdin")
    p.add_argument("--file", metavar="PATH", help="read the message from PATH (not with TEXT)")
    _waiting(p)
    p.add_argument(
        "--llm", type=_json_object, metavar="JSON", help="deterministic model directives"
    )
    p = tree.leaf(
        tree.top,
        "event",
        cmd.cmd_event,
        "send any inbound event",
        """roost event p1 c1 --type user.message --data '{"content": "hi"}'""",
    )
    conversation_args(p)
    p.add_argument("--type", required=True, metavar="TYPE", help="event type, e.g. user.message")
    p.add_argument("--data", type=_json_object, default={}, metavar="JSON", help="event data")
    _waiting(p)

    p = tree.leaf(
        tree.top,
        "cancel",
        cmd.cmd_cancel,
        "cancel a conversation's pending work",
        "roost cancel p1 c1 --reason 'wrong file'",
    )
    conversation_args(p)
    p.add_argument("--correlation-id", metavar="ID")
    p.add_argument("--reason", metavar="TEXT")
    conversation_args(
        tree.leaf(
            tree.top,
            "resume",
            cmd.cmd_resume,
            "reopen a cancelled conversation",
            "roost resume p1 c1",
        )
    )
    p = tree.leaf(
        tree.top,
        "approve",
        cmd.cmd_approve,
        "approve a call awaiting approval",
        'roost approve p1 c1 "$(roost projection p1 c1 pending_tool_calls -q)"',
    )
    conversation_args(p)
    p.add_argument("call_id", metavar="CALL_ID")
    p.add_argument(
        "--wait",
        action="store_true",
        help="return when the call's turn is over or awaits approval again; exit 1 when it failed",
    )
    p.add_argument(
        "--wait-timeout",
        type=positive_seconds,
        default=60.0,
        metavar="S",
        help="seconds for --wait",
    )
    p = tree.leaf(
        tree.top,
        "reject",
        cmd.cmd_reject,
        "reject a call awaiting approval",
        "roost reject p1 c1 call-0123456789abcdef --reason 'not now'",
    )
    conversation_args(p)
    p.add_argument("call_id", metavar="CALL_ID")
    p.add_argument("--reason", metavar="TEXT")

    p = tree.leaf(
        tree.top,
        "run-tool",
        cmd.cmd_run_tool,
        "run one tool call (exit 1 when it fails or its command exits non-zero)",
        """roost run-tool p1 fs.list --args '{"path": "."}'""",
    )
    p.add_argument("project", metavar="PROJECT")
    p.add_argument("name", metavar="NAME")
    p.add_argument("--args", type=_tool_args, default={}, metavar="JSON", help="tool arguments")
    p.add_argument("--conversation", metavar="CONV", help="record it in this conversation")
    p.add_argument("--correlation-id", metavar="ID")
