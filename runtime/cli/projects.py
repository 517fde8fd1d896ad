"""``roost project events`` and ``roost project delete``: a project's own history.

``events``: the project's starts and stops, what it loaded or failed to load (assets, MCP
servers), the crashes, restarts and escalations of its actors, its full mailboxes and failed
alerts (``events.project_history``). Read from the journal: the daemon's when one answers,
the journal itself otherwise (``runtime.cli.offline``).

``delete``: the project's whole history goes, through the daemon (its Journal is the one
writer); ``--yes`` is required.
"""

from __future__ import annotations

import argparse
import getpass
import socket
from typing import Any

from runtime.cli.format import UsageError, dumps_json, table
from runtime.cli.querying import offline_args, query

__all__ = ["cmd_project_delete", "cmd_project_events"]


_COLUMNS = [
    ("seq", "SEQ"),
    ("at", "AT"),
    ("type", "TYPE"),
    ("problem", "PROBLEM"),
    ("summary", "SUMMARY"),
]


def _text(value: dict[str, Any]) -> str:
    entries = value.get("entries") or []
    open_problems = value.get("unresolved_problems", 0)
    head = (
        f"events of project {value.get('project_id')}: {len(entries)} of "
        f"{value.get('total_entries', len(entries))} entries, "
        f"{open_problems} unresolved problem{'' if open_problems == 1 else 's'}"
    )
    rows = [
        {**entry, "problem": entry.get("problem") or "-"}
        if "resolved" not in entry
        else {**entry, "problem": f"{entry['problem']} ({_state(entry)})"}
        for entry in entries
    ]
    return head + "\n" + table(rows, _COLUMNS, empty="(no entries)")


def _state(entry: dict[str, Any]) -> str:
    return "resolved" if entry.get("resolved") else "unresolved"


def cmd_project_events(ns: argparse.Namespace) -> int:
    """``roost project events PROJECT [--limit N] [--problems]`` (no daemon needed)."""
    args = {"project_id": ns.project, "limit": ns.limit, "problems_only": ns.problems}
    value = query(
        ns.home,
        lambda c: c.call("project_events", args),
        lambda views, journal: views.project_events_view(
            journal, offline_args("project_events", args)
        ),
    )
    print(dumps_json(value) if ns.json else _text(value), flush=True)
    return 0


def _operator() -> str:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


def cmd_project_delete(ns: argparse.Namespace) -> int:
    """``roost project delete PROJECT --yes``: delete a stopped project's whole history."""
    if not ns.yes:
        raise UsageError(
            f"`roost project delete {ns.project}` deletes the project's whole history (every "
            "event of it and its conversations, for good); add --yes to do it"
        )
    from runtime.client import Client  # noqa: PLC0415 - not for --help or --version

    with Client.connect(ns.home) as c:
        value = c.delete_project(ns.project, deleted_by=_operator())
    text = (
        f"project {value['project_id']} deleted: {value['deleted_events']} events "
        f"(deletion record at seq {value['deletion_seq']})"
    )
    print(dumps_json(value) if ns.json else text, flush=True)
    return 0
