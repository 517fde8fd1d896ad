"""The ``roost`` command line: every operation of SPEC section 2 (``docs/cli.md``).

``main(argv)`` parses, runs one command (``runtime.cli.commands``, ``runtime.cli.local``)
and returns its exit status (``docs/cli.md``): 0 success; 1 the request, the turn, the
tool or the check failed (one line on stderr: ``roost: <code>: <message>``, or with
``--json`` one JSON object, ``runtime.cli.commands.print_error``); 2 a usage
error (``roost: usage: <message>``); 3 no daemon answers (``daemon_unreachable``); 4 a
``timeout``; 130 interrupted. ``--home`` and ``--json`` are accepted before and after the
command. ``roost soak`` hands its arguments to ``soak.cli:main``. Shell completion comes
from ``argcomplete`` (``roost completion bash``). The commands that need the daemon's
modules are registered with :func:`_later`: this module loads only the client side.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from runtime.cli import commands as cmd
from runtime.cli import history as cli_history
from runtime.cli import projects as cli_projects
from runtime.cli.a2a import add_a2a_commands
from runtime.cli.commands import (
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_TIMEOUT,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    exit_status,
)
from runtime.cli.completion import SHELLS, attach_id_completers, cmd_completion
from runtime.cli.format import UsageError, number_type
from runtime.cli.format import UsageParser as _Parser
from runtime.cli.mcp import add_mcp_commands
from runtime.errors import RoostError, ToolError
from runtime.settings_table import FLAG_SETTINGS, SETTINGS
from runtime.version import VERSION
from runtime.wire.names import PROJECTION_KEYS

__all__ = [
    "EXIT_FAILURE",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_TIMEOUT",
    "EXIT_UNREACHABLE",
    "EXIT_USAGE",
    "MAX_TIMELINE_LIMIT",
    "UsageError",
    "build_parser",
    "main",
]

MAX_TIMELINE_LIMIT = 500
"""The most entries ``roost timeline --limit`` may ask for (SPEC section 8)."""


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


_non_negative = number_type(int, lambda n: n >= 0, "a non-negative integer")
_positive = number_type(int, lambda n: n >= 1, "a positive integer")
_timeline_limit = number_type(
    int, lambda n: 1 <= n <= MAX_TIMELINE_LIMIT, f"an integer from 1 to {MAX_TIMELINE_LIMIT}"
)


def _event_type(text: str) -> str:
    from events.catalog import PAYLOAD_TYPES  # noqa: PLC0415 - for --until only

    if text not in PAYLOAD_TYPES:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an event type (see docs/events.md), e.g. llm.completed"
        )
    return text


_positive_seconds = number_type(float, lambda n: n > 0, "a positive number of seconds")


def _opt_pair(text: str) -> str:
    """``--opt KEY=VALUE``: the shape is the command line's (exit 2); the value the daemon's."""
    key, sep, _ = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(
            f"expected KEY=VALUE, got {text!r}, e.g. --opt approval_mode=sensitive"
        )
    return text


def _later(module: str, name: str) -> Callable[[argparse.Namespace], int]:
    """The command ``runtime.cli.<module>.<name>``, imported when it runs, not before.

    For the commands that load the daemon's modules or the journal (``daemon start``,
    ``logs``, ``export otel``): the client commands, ``--help``, ``--version`` and
    completion never load them (the ``thin-client`` contract in ``pyproject.toml``).
    """

    def run(ns: argparse.Namespace) -> int:
        func = getattr(importlib.import_module(f"runtime.cli.{module}"), name)
        return int(func(ns))

    run.__name__ = run.__qualname__ = name
    return run


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


_EPILOG = """\
exit status: 0 ok, 1 failed (request, turn, tool or check), 2 usage error,
3 no daemon answers, 4 timeout, 130 interrupted (docs/cli.md)

A quick tour:
  export ROOST_HOME=$(mktemp -d)
  roost daemon start
  roost project start . --id p1
  roost conversation start p1 --id c1
  roost send p1 c1 "read README.md" --wait
  roost timeline p1 c1
  roost daemon stop
"""


def build_parser() -> argparse.ArgumentParser:
    """Build the whole ``roost`` argument parser."""
    common = _common(top=False)
    root = _Parser(
        prog="roost",
        description="Roost: a supervised, event-sourced runtime for coding-agent projects.",
        epilog=_EPILOG,
        parents=[_common(top=True)],
    )
    root.add_argument("--version", action="version", version=f"roost {VERSION}")
    commands = root.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    def leaf(
        group: Any, name: str, func: Any, help_text: str, example: str
    ) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = group.add_parser(
            name,
            help=help_text,
            description=help_text,
            epilog=f"example:\n  {example}",
            parents=[common],
        )
        parser.set_defaults(func=func, leaf=parser)
        return parser

    def group(name: str, help_text: str) -> Any:
        parser = commands.add_parser(name, help=help_text, description=help_text)
        return parser.add_subparsers(dest="subcommand", metavar="SUBCOMMAND", required=True)

    def quiet(parser: argparse.ArgumentParser, what: str) -> None:
        parser.add_argument(
            "-q", "--quiet", action="store_true", help=f"print only the {what}, one per line"
        )

    daemon = group("daemon", "start, stop or inspect the daemon")
    p = leaf(
        daemon,
        "start",
        _later("daemonctl", "cmd_daemon_start"),
        "start the daemon; returns once it answers",
        "roost daemon start --home /tmp/roost",
    )
    p.add_argument("--foreground", action="store_true", help="run in this process, log to stderr")
    p.add_argument(
        "--timeout", type=_positive_seconds, default=30.0, metavar="S", help="seconds to wait"
    )
    _settings_flags(p)
    p = leaf(
        daemon,
        "stop",
        _later("daemonctl", "cmd_daemon_stop"),
        "stop the daemon (exit 0 also if none runs)",
        "roost daemon stop",
    )
    p.add_argument(
        "--timeout", type=_positive_seconds, default=30.0, metavar="S", help="seconds to wait"
    )
    p = leaf(
        daemon,
        "restart",
        _later("daemonctl", "cmd_daemon_restart"),
        "stop the daemon and start it again; returns once the new one answers",
        "roost daemon restart",
    )
    p.add_argument(
        "--timeout",
        type=_positive_seconds,
        default=30.0,
        metavar="S",
        help="seconds to wait for the stop, then for the start",
    )
    _settings_flags(p)
    leaf(
        daemon,
        "status",
        _later("daemonctl", "cmd_daemon_status"),
        "show the daemon's status (exit 3 when none runs)",
        "roost daemon status --json",
    )

    project = group("project", "start, stop and inspect projects")
    p = leaf(
        project,
        "start",
        cli_projects.cmd_project_start,
        "start a project on a directory",
        "roost project start . --id p1 --opt approval_mode=sensitive",
    )
    p.add_argument("root", metavar="ROOT", help="the project's root directory")
    p.add_argument("--id", metavar="ID", help="project id (default: chosen by the daemon)")
    p.add_argument(
        "--opt", action="append", type=_opt_pair, metavar="KEY=VALUE", help="a runtime option"
    )
    p.add_argument("--options-file", metavar="FILE", help="runtime options (.json or .toml)")
    for name, func, text, example in (
        ("stop", cli_projects.cmd_project_stop, "stop a project", "roost project stop p1"),
        (
            "diagnostics",
            cli_projects.cmd_project_diagnostics,
            "show a project's diagnostics",
            "roost project diagnostics p1",
        ),
        (
            "tools",
            cli_projects.cmd_project_tools,
            "list the tools a project may use",
            "roost project tools p1",
        ),
    ):
        leaf(project, name, func, text, example).add_argument("project", metavar="ID")
    p = leaf(
        project,
        "list",
        cli_projects.cmd_project_list,
        "list running projects",
        "roost project list",
    )
    p.add_argument(
        "-a",
        "--all",
        action="store_true",
        help="every project the journal knows, with its STATE (no daemon needed)",
    )
    quiet(p, "project ids")
    p = leaf(
        project,
        "events",
        cli_projects.cmd_project_events,
        "show a project's own history: starts, loads, crashes (no daemon needed)",
        "roost project events p1 --problems",
    )
    p.add_argument("project", metavar="ID")
    p.add_argument(
        "--limit",
        type=_timeline_limit,
        default=100,
        metavar="N",
        help=f"the last N entries, 1 to {MAX_TIMELINE_LIMIT}",
    )
    p.add_argument("--problems", action="store_true", help="only the events that record a problem")
    p = leaf(
        project,
        "delete",
        cli_projects.cmd_project_delete,
        "delete a stopped project's whole history (needs --yes)",
        "roost project delete p1 --yes",
    )
    p.add_argument("project", metavar="ID")
    p.add_argument("--yes", action="store_true", help="yes, delete every event of the project")

    conversation = group("conversation", "start, stop and list conversations")
    p = leaf(
        conversation,
        "start",
        cmd.cmd_conversation_start,
        "start a conversation",
        "roost conversation start p1 --id c1",
    )
    p.add_argument("project", metavar="PROJECT")
    p.add_argument("--id", metavar="ID", help="conversation id (default: chosen by the daemon)")
    p = leaf(
        conversation,
        "stop",
        cmd.cmd_conversation_stop,
        "stop a conversation",
        "roost conversation stop p1 c1",
    )
    _conv(p)
    p = leaf(
        conversation,
        "list",
        cmd.cmd_conversation_list,
        "list a project's conversations",
        "roost conversation list p1",
    )
    p.add_argument("project", metavar="PROJECT")
    quiet(p, "conversation ids")

    def waiting(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--correlation-id", metavar="ID", help="correlation id to use")
        parser.add_argument(
            "--wait",
            action="store_true",
            help="return when the turn is over; exit 1 when it failed",
        )
        parser.add_argument(
            "--wait-timeout",
            type=_positive_seconds,
            default=60.0,
            metavar="S",
            help="seconds for --wait",
        )

    p = leaf(
        commands,
        "send",
        cmd.cmd_send,
        "send a user.message",
        'roost send p1 c1 "read README.md" --wait',
    )
    _conv(p)
    p.add_argument("text", metavar="TEXT", nargs="?", help="the message; - reads it from stdin")
    p.add_argument("--file", metavar="PATH", help="read the message from PATH (not with TEXT)")
    waiting(p)
    p.add_argument(
        "--llm", type=_json_object, metavar="JSON", help="deterministic model directives"
    )
    p = leaf(
        commands,
        "event",
        cmd.cmd_event,
        "send any inbound event",
        """roost event p1 c1 --type user.message --data '{"content": "hi"}'""",
    )
    _conv(p)
    p.add_argument("--type", required=True, metavar="TYPE", help="event type, e.g. user.message")
    p.add_argument("--data", type=_json_object, default={}, metavar="JSON", help="event data")
    waiting(p)

    p = leaf(
        commands,
        "cancel",
        cmd.cmd_cancel,
        "cancel a conversation's pending work",
        "roost cancel p1 c1 --reason 'wrong file'",
    )
    _conv(p)
    p.add_argument("--correlation-id", metavar="ID")
    p.add_argument("--reason", metavar="TEXT")
    _conv(
        leaf(
            commands,
            "resume",
            cmd.cmd_resume,
            "reopen a cancelled conversation",
            "roost resume p1 c1",
        )
    )
    p = leaf(
        commands,
        "approve",
        cmd.cmd_approve,
        "approve a call awaiting approval",
        'roost approve p1 c1 "$(roost projection p1 c1 pending_tool_calls -q)"',
    )
    _conv(p)
    p.add_argument("call_id", metavar="CALL_ID")
    p.add_argument(
        "--wait",
        action="store_true",
        help="return when the call's turn is over or awaits approval again; exit 1 when it failed",
    )
    p.add_argument(
        "--wait-timeout",
        type=_positive_seconds,
        default=60.0,
        metavar="S",
        help="seconds for --wait",
    )
    p = leaf(
        commands,
        "reject",
        cmd.cmd_reject,
        "reject a call awaiting approval",
        "roost reject p1 c1 call-0123456789abcdef --reason 'not now'",
    )
    _conv(p)
    p.add_argument("call_id", metavar="CALL_ID")
    p.add_argument("--reason", metavar="TEXT")

    p = leaf(
        commands,
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

    p = leaf(
        commands,
        "projection",
        cli_history.cmd_projection,
        "show a projection",
        "roost projection p1 c1 pending_tool_calls",
    )
    _conv(p)
    p.add_argument("key", metavar="KEY", choices=PROJECTION_KEYS, help="|".join(PROJECTION_KEYS))
    quiet(p, "call ids (pending_tool_calls only)")
    p = leaf(
        commands,
        "timeline",
        cli_history.cmd_timeline,
        "show the incident timeline",
        "roost timeline p1 c1 --limit 50 --before-seq 1200",
    )
    _conv(p)
    p.add_argument(
        "--limit",
        type=_timeline_limit,
        default=100,
        metavar="N",
        help=f"the last N entries, 1 to {MAX_TIMELINE_LIMIT}",
    )
    p.add_argument("--correlation-id", metavar="ID")
    p.add_argument(
        "--after-seq",
        type=_non_negative,
        metavar="N",
        help="page forward: the first entries after seq N (0: from the start)",
    )
    p.add_argument(
        "--before-seq", type=_positive, metavar="N", help="page back: the entries before seq N"
    )
    p = leaf(
        commands,
        "incident",
        cli_history.cmd_incident,
        "show the incident report",
        "roost incident p1 c1 --format html -o incident.html",
    )
    _conv(p)
    p.add_argument("--correlation-id", metavar="ID")
    p.add_argument(
        "--format", choices=("md", "json", "html"), help="default: md (json with --json)"
    )
    p.add_argument("-o", "--output", metavar="FILE", help="write to FILE (atomically), not stdout")
    p = leaf(
        commands,
        "tail",
        cli_history.cmd_tail,
        "follow events live until Ctrl-C (or --until)",
        "roost tail p1 c1 --correlation-id corr-1 --until llm.completed",
    )
    p.add_argument("project", metavar="PROJECT")
    p.add_argument("conversation", metavar="CONV", nargs="?")
    p.add_argument(
        "--after-seq", type=_non_negative, default=0, metavar="N", help="start after this seq"
    )
    p.add_argument("--correlation-id", metavar="ID", help="only the events of this correlation")
    p.add_argument(
        "--until",
        type=_event_type,
        metavar="TYPE",
        help="stop after the first event of this type (exit 0)",
    )
    p = leaf(
        commands,
        "verify",
        cli_history.cmd_verify,
        "replay a project and check its hash chain (exit 1 when not ok)",
        "roost verify p1",
    )
    p.add_argument("project", metavar="PROJECT")
    export = group("export", "export past turns to other systems")
    p = leaf(
        export,
        "otel",
        _later("otel", "cmd_export_otel"),
        "replay past turns as OpenTelemetry traces through the OTEL_* exporter (no daemon)",
        "OTEL_EXPORTER_OTLP_ENDPOINT=http://localhost:4318 roost export otel p1 c1",
    )
    p.add_argument("project", metavar="PROJECT")
    p.add_argument("conversation", metavar="CONV", nargs="?", default=None)
    p.add_argument("--turn", metavar="CORRELATION", default=None, help="only this turn")
    p = leaf(
        commands,
        "logs",
        _later("local", "cmd_logs"),
        "show the daemon's log (no daemon needed)",
        "roost logs --follow",
    )
    p.add_argument(
        "-n", "--lines", type=_non_negative, default=20, metavar="N", help="last N lines"
    )
    p.add_argument("-f", "--follow", action="store_true", help="keep printing new lines")
    add_mcp_commands(group("mcp", "serve a project as an MCP server"), leaf)
    add_a2a_commands(group("a2a", "serve a project's agent over A2A"), leaf)
    p = leaf(
        commands,
        "completion",
        cmd_completion,
        "print the shell completion script",
        'eval "$(roost completion bash)"',
    )
    p.add_argument("shell", metavar="SHELL", choices=SHELLS, help="|".join(SHELLS))
    commands.add_parser(
        "soak",
        help="run the soak harness (options: roost soak --help)",
        description="run the soak harness; its options: roost soak --help",
        add_help=False,
    )
    return root


def _settings_flags(parser: argparse.ArgumentParser) -> None:
    """The daemon's settings as flags (``docs/configuration.md``: flag > env > file)."""
    parser.add_argument(
        "--config", metavar="FILE", help="the daemon's config file (default: HOME/config.toml)"
    )
    for setting in SETTINGS:
        if setting.key in FLAG_SETTINGS:  # --journal, --log-level
            parser.add_argument(
                f"--{setting.key.replace('_', '-')}",
                choices=setting.choices or None,
                help=f"as ${setting.env}, which it overrides",
            )


def _conv(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("project", metavar="PROJECT")
    parser.add_argument("conversation", metavar="CONV")


def _soak_split(argv: Sequence[str]) -> tuple[str | None, bool, list[str]] | None:
    """Return ``(home, json, rest)`` when the command is ``soak``, else ``None``."""
    home: str | None = None
    as_json = False
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--json":
            as_json = True
            i += 1
        elif arg == "--home" and i + 1 < len(argv):
            home = argv[i + 1]
            i += 2
        elif arg.startswith("--home="):
            home = arg.partition("=")[2]
            i += 1
        else:
            return (home, as_json, list(argv[i + 1 :])) if arg == "soak" else None
    return None


def _run_soak(home: str | None, as_json: bool, rest: list[str]) -> int:
    try:
        module = importlib.import_module("soak.cli")
    except ImportError as e:
        cmd.print_error("not_available", f"the soak harness is not available ({e})")
        return EXIT_FAILURE
    soak_main = getattr(module, "main", None)
    if not callable(soak_main):
        cmd.print_error("not_available", "soak.cli has no main(argv) function")
        return EXIT_FAILURE
    argv = ["--home", home, *rest] if home else list(rest)
    if as_json:  # `roost --json soak`: the report as JSON on stdout
        argv = ["--json", "-", *argv]
    return int(soak_main(argv) or 0)


def _autocomplete(parser: argparse.ArgumentParser) -> None:
    """Answer a shell's completion request (``_ARGCOMPLETE`` set), then exit."""
    if "_ARGCOMPLETE" not in os.environ:
        return
    import argcomplete  # noqa: PLC0415 - only when a shell asks

    attach_id_completers(parser)
    # options when the word starts with "-"; an empty word offers the ids and values only
    argcomplete.autocomplete(parser, always_complete_options=False)


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``roost`` with ``argv`` (default ``sys.argv[1:]``); return the exit status."""
    args = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    _autocomplete(parser)
    soak = _soak_split(args)
    if soak is not None:
        return _run_soak(*soak)
    # --json: errors too are JSON, a usage error included (docs/cli.md#errors-with---json)
    cmd.json_errors("--json" in args[: args.index("--")] if "--" in args else "--json" in args)
    try:
        ns, extra = parser.parse_known_args(args)
        if extra:
            leaf = getattr(ns, "leaf", parser)
            leaf.error(f"unrecognized arguments: {' '.join(extra)}")
    except UsageError as e:
        cmd.print_error("usage", str(e))
        return EXIT_USAGE
    except SystemExit as e:  # --help, --version
        return e.code if isinstance(e.code, int) else EXIT_OK
    cmd.json_errors(bool(ns.json))
    if not hasattr(ns, "func"):
        cmd.print_error("usage", "a command is required (see `roost --help`)")
        return EXIT_USAGE
    try:
        status: int = ns.func(ns)
    except UsageError as e:  # found by the command itself (e.g. send's TEXT and --file)
        cmd.print_error("usage", str(e))
        return EXIT_USAGE
    except RoostError as e:
        cmd.print_error(e.code, e.message, e.details)
        return exit_status(e.code)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # stdout closed early (`roost tail | head`)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_FAILURE
    except OSError as e:
        cmd.print_error("os_error", str(e), {"errno": e.errno, "path": e.filename})
        return EXIT_FAILURE
    except ValueError as e:  # a bad environment setting, e.g. ROOST_JOURNAL
        cmd.print_error("bad_config", str(e))
        return EXIT_FAILURE
    return status
