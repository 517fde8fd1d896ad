"""``roost daemon start|stop|status``: the commands that load the daemon's own modules.

They start the daemon process, signal it through its pid file and read its status, so they
import ``runtime.daemon``; ``runtime.cli.app`` loads this module by name, only when one of
them runs, and the client commands stay thin (the ``thin-client`` contract in
``pyproject.toml``; ``docs/performance.md``).
"""

from __future__ import annotations

import argparse

from runtime.cli.commands import EXIT_NOT_RUNNING, EXIT_UNREACHABLE, print_error, print_result
from runtime.cli.format import kv_block
from runtime.daemon.config import resolve_home
from runtime.daemon.main import daemon_pid, daemon_status, start_daemon, stop_daemon
from runtime.logfiles import rotation_settings

__all__ = ["cmd_daemon_start", "cmd_daemon_status", "cmd_daemon_stop"]

Namespace = argparse.Namespace


def cmd_daemon_start(ns: Namespace) -> int:
    """``roost daemon start [--foreground]``.

    The log settings are checked here first, so a bad one is a ``bad_config`` (exit 1)
    rather than a daemon that exits before answering.
    """
    rotation_settings()
    if ns.foreground:
        return start_daemon(ns.home, foreground=True)
    pid = start_daemon(ns.home, timeout_s=ns.timeout)
    home = resolve_home(ns.home)
    print_result(ns, {"pid": pid, "home": home}, lambda v: f"daemon started (pid {pid}) in {home}")
    return 0


def cmd_daemon_stop(ns: Namespace) -> int:
    """``roost daemon stop``: exit 0 also when no daemon was running (it says so)."""
    home = resolve_home(ns.home)
    pid = daemon_pid(home)
    was_running = stop_daemon(home, timeout_s=ns.timeout)
    result = {"was_running": was_running, "pid": pid if was_running else None, "home": home}
    if was_running:
        print_result(ns, result, lambda v: f"daemon stopped (pid {pid}) in {home}")
    else:
        print_result(ns, result, lambda v: f"daemon is not running in {home}")
    return 0


def cmd_daemon_status(ns: Namespace) -> int:
    """``roost daemon status``: 0 when it answers, 3 when none runs or it does not answer."""
    status = daemon_status(ns.home)
    print_result(ns, status, kv_block)
    if not status["running"]:
        return EXIT_NOT_RUNNING
    if not status["responding"]:
        print_error("daemon_unreachable", f"daemon (pid {status['pid']}) does not answer")
        return EXIT_UNREACHABLE
    return 0
