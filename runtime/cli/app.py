"""The ``roost`` command line: every operation of SPEC section 2 (``docs/cli.md``).

``main(argv)`` parses (the parser is built group by group in ``runtime.cli.parsers``), runs
one command and returns its exit status: 0 success; 1 the request, the turn, the tool or
the check failed (``roost: <code>: <message>`` on stderr, or one JSON object with
``--json``); 2 a usage error; 3 no daemon answers; 4 a ``timeout``; 130 interrupted.
``roost soak`` hands its arguments to ``soak.cli:main``; shell completion comes from
``argcomplete``. This module loads only the client side (the ``thin-client`` contract).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from runtime.cli import commands as cmd
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
from runtime.cli.format import UsageError, UsageParser
from runtime.cli.mcp import add_mcp_commands
from runtime.cli.parsers.conversations import add_conversation_commands
from runtime.cli.parsers.daemon import add_daemon_commands, add_logs_command
from runtime.cli.parsers.history import add_history_commands
from runtime.cli.parsers.projects import add_project_commands
from runtime.cli.parsers.tree import CommandTree, common_options
from runtime.errors import RoostError
from runtime.version import VERSION

__all__ = [
    "EXIT_FAILURE",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_TIMEOUT",
    "EXIT_UNREACHABLE",
    "EXIT_USAGE",
    "UsageError",
    "build_parser",
    "main",
]

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
    """Build the whole ``roost`` argument parser (the commands in ``--help``'s order)."""
    root = UsageParser(
        prog="roost",
        description="Roost: a supervised, event-sourced runtime for coding-agent projects.",
        epilog=_EPILOG,
        parents=[common_options(top=True)],
    )
    root.add_argument("--version", action="version", version=f"roost {VERSION}")
    tree = CommandTree(root)
    add_daemon_commands(tree)
    add_project_commands(tree)
    add_conversation_commands(tree)
    add_history_commands(tree)
    add_logs_command(tree)
    add_mcp_commands(tree.group("mcp", "serve a project as an MCP server"), tree.leaf)
    add_a2a_commands(tree.group("a2a", "serve a project's agent over A2A"), tree.leaf)
    p = tree.leaf(
        tree.top,
        "completion",
        cmd_completion,
        "print the shell completion script",
        'eval "$(roost completion bash)"',
    )
    p.add_argument("shell", metavar="SHELL", choices=SHELLS, help="|".join(SHELLS))
    tree.top.add_parser(
        "soak",
        help="run the soak harness (options: roost soak --help)",
        description="run the soak harness; its options: roost soak --help",
        add_help=False,
    )
    return root


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
