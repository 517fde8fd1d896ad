"""The command tree being built, and the options and argument types several groups share.

Each command group's module adds its commands through :class:`CommandTree`: a leaf command
gets ``--home``, ``--json``, its help and an example; ``set_defaults(func=..., leaf=...)``
tells ``runtime.cli.app.main`` what to run and whose usage to print.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable
from typing import Any

from runtime.cli.format import UsageParser, number_type

__all__ = [
    "MAX_TIMELINE_LIMIT",
    "CommandTree",
    "common_options",
    "conversation_args",
    "later",
    "non_negative",
    "positive",
    "positive_seconds",
    "quiet",
    "timeline_limit",
]

MAX_TIMELINE_LIMIT = 500
"""The most entries ``roost timeline --limit`` may ask for (SPEC section 8)."""

non_negative = number_type(int, lambda n: n >= 0, "a non-negative integer")
positive = number_type(int, lambda n: n >= 1, "a positive integer")
timeline_limit = number_type(
    int, lambda n: 1 <= n <= MAX_TIMELINE_LIMIT, f"an integer from 1 to {MAX_TIMELINE_LIMIT}"
)
positive_seconds = number_type(float, lambda n: n > 0, "a positive number of seconds")


def common_options(top: bool) -> argparse.ArgumentParser:
    """``--home`` and ``--json``; below the top level they never override what was given."""
    parser = UsageParser(add_help=False)
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


class CommandTree:
    """The subcommands of ``roost``'s parser, added group by group."""

    def __init__(self, root: argparse.ArgumentParser) -> None:
        self.common = common_options(top=False)
        """``--home`` and ``--json`` for every leaf command."""
        self.top: Any = root.add_subparsers(
            dest="command", metavar="COMMAND", parser_class=UsageParser
        )
        """The top-level commands (``send``, ``timeline``, and the groups)."""

    def leaf(
        self, group: Any, name: str, func: Any, help_text: str, example: str
    ) -> argparse.ArgumentParser:
        """Add the command ``name`` running ``func`` to ``group`` (a group or :attr:`top`)."""
        parser: argparse.ArgumentParser = group.add_parser(
            name,
            help=help_text,
            description=help_text,
            epilog=f"example:\n  {example}",
            parents=[self.common],
        )
        parser.set_defaults(func=func, leaf=parser)
        return parser

    def group(self, name: str, help_text: str) -> Any:
        """Add the command group ``name``; a subcommand is required."""
        parser = self.top.add_parser(name, help=help_text, description=help_text)
        return parser.add_subparsers(dest="subcommand", metavar="SUBCOMMAND", required=True)


def quiet(parser: argparse.ArgumentParser, what: str) -> None:
    """``-q``: print only ``what``, one per line."""
    parser.add_argument(
        "-q", "--quiet", action="store_true", help=f"print only the {what}, one per line"
    )


def conversation_args(parser: argparse.ArgumentParser) -> None:
    """The ``PROJECT CONV`` positional arguments."""
    parser.add_argument("project", metavar="PROJECT")
    parser.add_argument("conversation", metavar="CONV")


def later(module: str, name: str) -> Callable[[argparse.Namespace], int]:
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
