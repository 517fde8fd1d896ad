"""``roost projection|timeline|incident|tail|verify`` and ``export otel``.

The views of the journal (``runtime.cli.history``); ``export otel`` replays past turns
without a daemon (``runtime.cli.otel``, imported when it runs).
"""

from __future__ import annotations

import argparse

from runtime.cli import history as cli_history
from runtime.cli.parsers.tree import (
    MAX_TIMELINE_LIMIT,
    CommandTree,
    conversation_args,
    later,
    non_negative,
    positive,
    quiet,
    timeline_limit,
)
from runtime.wire.names import PROJECTION_KEYS

__all__ = ["add_history_commands"]


def _event_type(text: str) -> str:
    from events.catalog import PAYLOAD_TYPES  # noqa: PLC0415 - for --until only

    if text not in PAYLOAD_TYPES:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an event type (see docs/events.md), e.g. llm.completed"
        )
    return text


def add_history_commands(tree: CommandTree) -> None:
    """The views of a conversation's history, then ``export otel``."""
    p = tree.leaf(
        tree.top,
        "projection",
        cli_history.cmd_projection,
        "show a projection",
        "roost projection p1 c1 pending_tool_calls",
    )
    conversation_args(p)
    p.add_argument("key", metavar="KEY", choices=PROJECTION_KEYS, help="|".join(PROJECTION_KEYS))
    quiet(p, "call ids (pending_tool_calls only)")
    p = tree.leaf(
        tree.top,
        "timeline",
        cli_history.cmd_timeline,
        "show the incident timeline",
        "roost timeline p1 c1 --limit 50 --before-seq 1200",
    )
    conversation_args(p)
    p.add_argument(
        "--limit",
        type=timeline_limit,
        default=100,
        metavar="N",
        help=f"the last N entries, 1 to {MAX_TIMELINE_LIMIT}",
    )
    p.add_argument("--correlation-id", metavar="ID")
    p.add_argument(
        "--after-seq",
        type=non_negative,
        metavar="N",
        help="page forward: the first entries after seq N (0: from the start)",
    )
    p.add_argument(
        "--before-seq", type=positive, metavar="N", help="page back: the entries before seq N"
    )
    p = tree.leaf(
        tree.top,
        "incident",
        cli_history.cmd_incident,
        "show the incident report",
        "roost incident p1 c1 --format html -o incident.html",
    )
    conversation_args(p)
    p.add_argument("--correlation-id", metavar="ID")
    p.add_argument(
        "--format", choices=("md", "json", "html"), help="default: md (json with --json)"
    )
    p.add_argument("-o", "--output", metavar="FILE", help="write to FILE (atomically), not stdout")
    p = tree.leaf(
        tree.top,
        "tail",
        cli_history.cmd_tail,
        "follow events live until Ctrl-C (or --until)",
        "roost tail p1 c1 --correlation-id corr-1 --until llm.completed",
    )
    p.add_argument("project", metavar="PROJECT")
    p.add_argument("conversation", metavar="CONV", nargs="?")
    p.add_argument(
        "--after-seq", type=non_negative, default=0, metavar="N", help="start after this seq"
    )
    p.add_argument("--correlation-id", metavar="ID", help="only the events of this correlation")
    p.add_argument(
        "--until",
        type=_event_type,
        metavar="TYPE",
        help="stop after the first event of this type (exit 0)",
    )
    p = tree.leaf(
        tree.top,
        "verify",
        cli_history.cmd_verify,
        "replay a project and check its hash chain (exit 1 when not ok)",
        "roost verify p1",
    )
    p.add_argument("project", metavar="PROJECT")
    export = tree.group("export", "export past turns to other systems")
    p = tree.leaf(
        export,
        "otel",
        later("otel", "cmd_export_otel"),
        "replay past turns as OpenTelemetry traces through the OTEL_* exporter (no daemon)",
        "OTEL_EXPORTER_OTLP_ENDPOINT=http://localhost:4318 roost export otel p1 c1",
    )
    p.add_argument("project", metavar="PROJECT")
    p.add_argument("conversation", metavar="CONV", nargs="?", default=None)
    p.add_argument("--turn", metavar="CORRELATION", default=None, help="only this turn")
