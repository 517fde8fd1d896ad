"""``roost logs``: the daemon's log, read without a daemon.

``roost logs`` reads ``ROOST_HOME/logs/daemon.log`` (and ``daemon.log.1`` when the current
file is short) and prints one readable line per JSON log line,
``TIME LEVEL COMPONENT EVENT key=value ...``; with ``--json`` the lines as they are. With
``--follow`` it keeps printing new lines, across rotations, until Ctrl-C (exit 0).
It finds the log through the daemon's configuration, so the parser
(``runtime.cli.parsers.daemon``) loads this module by name, when ``logs`` runs (the
``thin-client`` contract in ``pyproject.toml``).
"""

from __future__ import annotations

import argparse
import os

import msgspec

from runtime.cli.format import cell
from runtime.daemon.config import config_for_home
from runtime.errors import RoostError
from runtime.logfiles import follow, last_lines

__all__ = ["LogNotFoundError", "cmd_logs", "log_line_text"]

_FIRST_KEYS = ("timestamp", "level", "component", "event")


class LogNotFoundError(RoostError):
    """The home has no daemon log yet."""

    code = "log_not_found"


def log_line_text(line: str) -> str:
    """One JSON log line for people: time, level, component, event, then ``key=value``.

    A line that is not a JSON object (a stray write to the daemon's stderr) is returned
    as it is.
    """
    try:
        record = msgspec.json.decode(line, type=dict[str, object])
    except msgspec.DecodeError:  # not JSON, or not an object
        return line
    head = [str(record.get(key, "-")) for key in _FIRST_KEYS]
    rest: list[str] = [
        f"{key}={cell(value, 200)}" for key, value in record.items() if key not in _FIRST_KEYS
    ]
    return " ".join([*head, *rest])


def cmd_logs(ns: argparse.Namespace) -> int:
    """``roost logs [-n N] [--follow]``: the daemon's log, no daemon needed."""
    path = config_for_home(ns.home).log_path
    if not ns.follow and not os.path.exists(path):
        raise LogNotFoundError(f"no daemon log at {path} yet (has a daemon run here?)", path=path)

    def show(line: str) -> None:
        print(line if ns.json else log_line_text(line), flush=True)

    for line in last_lines(path, ns.lines):
        show(line)
    if not ns.follow:
        return 0
    try:
        for line in follow(path, from_end=os.path.exists(path)):
            show(line)
    except KeyboardInterrupt:
        return 0
    return 0
