"""The ``roost`` command line: every operation of SPEC section 2 (``docs/cli.md``).

``main(argv)`` parses, runs one command (``runtime.cli.commands``) and returns its exit
status: 0 on success, 1 when the request fails (one line on stderr:
``roost: <code>: <message>``), 2 for a usage error (``roost: usage: <message>``).
``--home`` and ``--json`` are accepted before and after the command. ``roost soak``
hands its arguments to ``soak.cli:main``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from runtime.cli import commands as cmd
from runtime.errors import RoostError, ToolError
from runtime.guard.schema import parse_json_args
from runtime.wire.ops import PROJECTION_KEYS

__all__ = ["EXIT_FAILURE", "EXIT_USAGE", "UsageError", "build_parser", "main"]

EXIT_FAILURE = 1
"""Exit status of a failed request."""
EXIT_USAGE = 2
"""Exit status of a usage error."""


class UsageError(Exception):
    """The command line is wrong; the message says what and where to look."""


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser that raises :class:`UsageError` instead of printing usage."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see `{self.prog} --help`)")


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"not valid JSON ({e}): {text!r}") from e
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object, got {text!r}")
    return value


def _tool_args(text: str) -> dict[str, Any]:
    """Tool arguments: a JSON object without duplicate keys and with bounded nesting."""
    try:
        return parse_json_args(text)
    except ToolError as e:
        raise argparse.ArgumentTypeError(f"{e.details.get('reason')}: {e.message}") from e


def _non_negative(text: str) -> int:
    try:
        value = int(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from e
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {value}")
    return value


def _common(top: bool) -> argparse.ArgumentParser:
    """``--home`` and ``--json``; below the top level they never override what was given."""
    parser = _Parser(add_help=False)
    parser.add_argument(
        "--home",
        metavar="DIR",
        default=None if top else argparse.SUPPRESS,
        help="state directory (default: $ROOST_HOME or ~/.local/state/roost)",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        default=False if top else argparse.SUPPRESS,
        help="machine output: JSON on stdout",
    )
    return parser


def build_parser() -> argparse.ArgumentParser:
    """Build the whole ``roost`` argument parser."""
    common = _common(top=False)
    root = _Parser(
        prog="roost",
        description="Roost: a supervised, event-sourced runtime for coding-agent projects.",
        parents=[_common(top=True)],
    )
    commands = root.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    def leaf(group: Any, name: str, func: Any, help_text: str) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = group.add_parser(
            name, help=help_text, description=help_text, parents=[common]
        )
        parser.set_defaults(func=func)
        return parser

    def group(name: str, help_text: str) -> Any:
        parser = commands.add_parser(name, help=help_text, description=help_text)
        return parser.add_subparsers(dest="subcommand", metavar="SUBCOMMAND", required=True)

    daemon = group("daemon", "start, stop or inspect the daemon")
    p = leaf(daemon, "start", cmd.cmd_daemon_start, "start the daemon; returns once it answers")
    p.add_argument("--foreground", action="store_true", help="run in this process, log to stderr")
    p.add_argument("--timeout", type=float, default=30.0, metavar="S", help="seconds to wait")
    p = leaf(daemon, "stop", cmd.cmd_daemon_stop, "stop the daemon (exit 0 if none runs)")
    p.add_argument("--timeout", type=float, default=30.0, metavar="S", help="seconds to wait")
    leaf(daemon, "status", cmd.cmd_daemon_status, "show the daemon's status")

    project = group("project", "start, stop and inspect projects")
    p = leaf(project, "start", cmd.cmd_project_start, "start a project on a directory")
    p.add_argument("root", metavar="ROOT", help="the project's root directory")
    p.add_argument("--id", metavar="ID", help="project id (default: chosen by the daemon)")
    p.add_argument("--opt", action="append", metavar="KEY=VALUE", help="a runtime option")
    p.add_argument("--options-file", metavar="FILE", help="runtime options (.json or .toml)")
    for name, func, text in (
        ("stop", cmd.cmd_project_stop, "stop a project"),
        ("diagnostics", cmd.cmd_project_diagnostics, "show a project's diagnostics"),
        ("tools", cmd.cmd_project_tools, "list the tools a project may use"),
    ):
        leaf(project, name, func, text).add_argument("project", metavar="ID")
    leaf(project, "list", cmd.cmd_project_list, "list running projects")

    conversation = group("conversation", "start and stop conversations")
    p = leaf(conversation, "start", cmd.cmd_conversation_start, "start a conversation")
    p.add_argument("project", metavar="PROJECT")
    p.add_argument("--id", metavar="ID", help="conversation id (default: chosen by the daemon)")
    p = leaf(conversation, "stop", cmd.cmd_conversation_stop, "stop a conversation")
    _conv(p)

    def waiting(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--correlation-id", metavar="ID", help="correlation id to use")
        parser.add_argument("--wait", action="store_true", help="return when the turn is over")
        parser.add_argument(
            "--wait-timeout", type=float, default=60.0, metavar="S", help="seconds for --wait"
        )

    p = leaf(commands, "send", cmd.cmd_send, "send a user.message")
    _conv(p)
    p.add_argument("text", metavar="TEXT")
    waiting(p)
    p.add_argument(
        "--llm", type=_json_object, metavar="JSON", help="deterministic model directives"
    )
    p = leaf(commands, "event", cmd.cmd_event, "send any inbound event")
    _conv(p)
    p.add_argument("--type", required=True, metavar="TYPE", help="event type, e.g. user.message")
    p.add_argument("--data", type=_json_object, default={}, metavar="JSON", help="event data")
    waiting(p)

    p = leaf(commands, "cancel", cmd.cmd_cancel, "cancel a conversation's pending work")
    _conv(p)
    p.add_argument("--correlation-id", metavar="ID")
    p.add_argument("--reason", metavar="TEXT")
    _conv(leaf(commands, "resume", cmd.cmd_resume, "reopen a cancelled conversation"))
    p = leaf(commands, "approve", cmd.cmd_approve, "approve a call awaiting approval")
    _conv(p)
    p.add_argument("call_id", metavar="CALL_ID")
    p = leaf(commands, "reject", cmd.cmd_reject, "reject a call awaiting approval")
    _conv(p)
    p.add_argument("call_id", metavar="CALL_ID")
    p.add_argument("--reason", metavar="TEXT")

    p = leaf(commands, "run-tool", cmd.cmd_run_tool, "run one tool call")
    p.add_argument("project", metavar="PROJECT")
    p.add_argument("name", metavar="NAME")
    p.add_argument("--args", type=_tool_args, default={}, metavar="JSON", help="tool arguments")
    p.add_argument("--conversation", metavar="CONV", help="record it in this conversation")
    p.add_argument("--correlation-id", metavar="ID")

    p = leaf(commands, "projection", cmd.cmd_projection, "show a projection")
    _conv(p)
    p.add_argument("key", metavar="KEY", choices=PROJECTION_KEYS, help="|".join(PROJECTION_KEYS))
    p = leaf(commands, "timeline", cmd.cmd_timeline, "show the incident timeline")
    _conv(p)
    p.add_argument("--limit", type=int, default=100, metavar="N", help="entries (max 500)")
    p.add_argument("--correlation-id", metavar="ID")
    p = leaf(commands, "incident", cmd.cmd_incident, "show the incident report")
    _conv(p)
    p.add_argument("--correlation-id", metavar="ID")
    p.add_argument("--format", choices=("md", "json"), help="default: md (json with --json)")
    p = leaf(commands, "tail", cmd.cmd_tail, "follow events live until Ctrl-C")
    p.add_argument("project", metavar="PROJECT")
    p.add_argument("conversation", metavar="CONV", nargs="?")
    p.add_argument("--after-seq", type=_non_negative, default=0, metavar="N")
    p = leaf(commands, "verify", cmd.cmd_verify, "replay a project and check its hash chain")
    p.add_argument("project", metavar="PROJECT")
    commands.add_parser("soak", help="run the soak harness (options: roost soak --help)")
    return root


def _conv(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("project", metavar="PROJECT")
    parser.add_argument("conversation", metavar="CONV")


def _soak_split(argv: Sequence[str]) -> tuple[str | None, list[str]] | None:
    """Return ``(home, rest)`` when the command is ``soak``, else ``None``."""
    home: str | None = None
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--json":
            i += 1
        elif arg == "--home" and i + 1 < len(argv):
            home = argv[i + 1]
            i += 2
        elif arg.startswith("--home="):
            home = arg.partition("=")[2]
            i += 1
        else:
            return (home, list(argv[i + 1 :])) if arg == "soak" else None
    return None


def _run_soak(home: str | None, rest: list[str]) -> int:
    try:
        module = importlib.import_module("soak.cli")
    except ImportError as e:
        cmd.print_error("not_available", f"the soak harness is not available ({e})")
        return EXIT_FAILURE
    soak_main = getattr(module, "main", None)
    if not callable(soak_main):
        cmd.print_error("not_available", "soak.cli has no main(argv) function")
        return EXIT_FAILURE
    argv = ["--home", home, *rest] if home else rest
    return int(soak_main(argv) or 0)


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``roost`` with ``argv`` (default ``sys.argv[1:]``); return the exit status."""
    args = list(sys.argv[1:] if argv is None else argv)
    soak = _soak_split(args)
    if soak is not None:
        return _run_soak(*soak)
    parser = build_parser()
    try:
        ns = parser.parse_args(args)
    except UsageError as e:
        cmd.print_error("usage", str(e))
        return EXIT_USAGE
    except SystemExit as e:  # --help
        return e.code if isinstance(e.code, int) else 0
    if not hasattr(ns, "func"):
        cmd.print_error("usage", "a command is required (see `roost --help`)")
        return EXIT_USAGE
    try:
        status: int = ns.func(ns)
    except RoostError as e:
        cmd.print_error(e.code, e.message)
        return EXIT_FAILURE
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # stdout closed early (`roost tail | head`)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_FAILURE
    except OSError as e:
        cmd.print_error("os_error", str(e))
        return EXIT_FAILURE
    except ValueError as e:  # a bad environment setting, e.g. ROOST_JOURNAL
        cmd.print_error("bad_config", str(e))
        return EXIT_FAILURE
    return status
