"""``roost daemon start|stop|restart|status``: the commands that load the daemon's own modules.

They start the daemon process, signal it through its pid file and read its status, so they
import ``runtime.daemon``; the parser (``runtime.cli.parsers.daemon``) loads this module by
name, only when one of them runs, and the client commands stay thin (the ``thin-client`` contract in
``pyproject.toml``; ``docs/performance.md``).
"""

from __future__ import annotations

import argparse
import os

from runtime.cli.commands import EXIT_NOT_RUNNING, EXIT_UNREACHABLE, print_error, print_result
from runtime.cli.format import cell, kv_block
from runtime.client.connection import Client
from runtime.daemon.config import CONFIG_NAME, resolve_home, resolve_settings
from runtime.daemon.control import daemon_pid, daemon_status, start_daemon, stop_daemon
from runtime.logfiles import rotation_settings

__all__ = ["cmd_daemon_restart", "cmd_daemon_start", "cmd_daemon_status", "cmd_daemon_stop"]

Namespace = argparse.Namespace


def cmd_daemon_start(ns: Namespace) -> int:
    """``roost daemon start [--foreground]``.

    The log settings are checked here first, so a bad one is a ``bad_config`` (exit 1)
    rather than a daemon that exits before answering.
    """
    rotation_settings()
    flags = {"journal": ns.journal, "log_level": ns.log_level}
    if ns.foreground:
        return start_daemon(ns.home, foreground=True, config_file=ns.config, flags=flags)
    pid = start_daemon(ns.home, timeout_s=ns.timeout, config_file=ns.config, flags=flags)
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


def cmd_daemon_restart(ns: Namespace) -> int:
    """``roost daemon restart``: stop the daemon, start a new one, return once it answers.

    The new daemon keeps the running one's ``--config`` file and flags unless given
    again. The settings are checked before anything is stopped, so a bad one leaves the
    running daemon alone (``bad_config``, exit 1). No daemon running: one is started.
    """
    rotation_settings()
    home = resolve_home(ns.home)
    old = daemon_pid(home)
    config_file, flags = _running_settings(home) if old else (None, {})
    config_file = ns.config or config_file
    flags.update({k: v for k, v in (("journal", ns.journal), ("log_level", ns.log_level)) if v})
    resolve_settings(home, config_file=config_file, flags=flags)
    was_running = stop_daemon(home, timeout_s=ns.timeout)
    pid = start_daemon(home, timeout_s=ns.timeout, config_file=config_file, flags=flags)
    with Client.connect(home) as c:
        projects = c.status().get("projects")
    result = {
        "was_running": was_running,
        "old_pid": old if was_running else None,
        "pid": pid,
        "home": home,
        "projects": projects,
    }
    before = f"pid {old} -> {pid}" if was_running else f"pid {pid}; none was running"
    running = f"{projects} project{'' if projects == 1 else 's'} running"
    print_result(ns, result, lambda v: f"daemon restarted ({before}) in {home}; {running}")
    return 0


def _settings_text(settings: dict[str, dict[str, object]]) -> dict[str, str]:
    """``settings`` for people (each ``{value, source}``): one line each, ``value (source)``."""
    return {k: f"{cell(v.get('value'), None)} ({v.get('source')})" for k, v in settings.items()}


def _running_settings(home: str) -> tuple[str | None, dict[str, str | None]]:
    """The ``--config`` file and the flags the running daemon was started with."""
    status = daemon_status(home)
    settings = status.get("settings") or {}
    flags = {k: v.get("value") for k, v in settings.items() if v.get("source") == "flag"}
    config_file = status.get("config_file")
    if config_file == os.path.join(home, CONFIG_NAME):
        config_file = None  # the home's own: found again (or not) by the new daemon
    return config_file, flags


def cmd_daemon_status(ns: Namespace) -> int:
    """``roost daemon status``: 0 when it answers, 3 when none runs or it does not answer."""
    status = daemon_status(ns.home)
    human = (
        {**status, "settings": _settings_text(status["settings"])}
        if "settings" in status
        else status
    )
    print_result(ns, status, lambda v: kv_block(human))
    if not status["running"]:
        return EXIT_NOT_RUNNING
    if not status["responding"]:
        print_error("daemon_unreachable", f"daemon (pid {status['pid']}) does not answer")
        return EXIT_UNREACHABLE
    return 0
