"""``roost daemon start|stop|restart|status`` and ``roost logs``.

They run in ``runtime.cli.daemonctl`` and ``runtime.cli.local``, which load the daemon's
modules and are imported by name only when one of these commands runs (:func:`later`).
"""

from __future__ import annotations

import argparse

from runtime.cli.parsers.tree import CommandTree, later, non_negative, positive_seconds
from runtime.settings_table import FLAG_SETTINGS, SETTINGS

__all__ = ["add_daemon_commands", "add_logs_command"]


def add_daemon_commands(tree: CommandTree) -> None:
    """The ``daemon`` group."""
    daemon = tree.group("daemon", "start, stop or inspect the daemon")
    p = tree.leaf(
        daemon,
        "start",
        later("daemonctl", "cmd_daemon_start"),
        "start the daemon; returns once it answers",
        "roost daemon start --home /tmp/roost",
    )
    p.add_argument("--foreground", action="store_true", help="run in this process, log to stderr")
    p.add_argument(
        "--timeout", type=positive_seconds, default=30.0, metavar="S", help="seconds to wait"
    )
    _settings_flags(p)
    p = tree.leaf(
        daemon,
        "stop",
        later("daemonctl", "cmd_daemon_stop"),
        "stop the daemon (exit 0 also if none runs)",
        "roost daemon stop",
    )
    p.add_argument(
        "--timeout", type=positive_seconds, default=30.0, metavar="S", help="seconds to wait"
    )
    p = tree.leaf(
        daemon,
        "restart",
        later("daemonctl", "cmd_daemon_restart"),
        "stop the daemon and start it again; returns once the new one answers",
        "roost daemon restart",
    )
    p.add_argument(
        "--timeout",
        type=positive_seconds,
        default=30.0,
        metavar="S",
        help="seconds to wait for the stop, then for the start",
    )
    _settings_flags(p)
    tree.leaf(
        daemon,
        "status",
        later("daemonctl", "cmd_daemon_status"),
        "show the daemon's status (exit 3 when none runs)",
        "roost daemon status --json",
    )


def add_logs_command(tree: CommandTree) -> None:
    """``logs``: the daemon's log file, read without a daemon."""
    p = tree.leaf(
        tree.top,
        "logs",
        later("local", "cmd_logs"),
        "show the daemon's log (no daemon needed)",
        "roost logs --follow",
    )
    p.add_argument("-n", "--lines", type=non_negative, default=20, metavar="N", help="last N lines")
    p.add_argument("-f", "--follow", action="store_true", help="keep printing new lines")


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
