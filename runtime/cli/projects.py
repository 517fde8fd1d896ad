"""``roost project events``: a project's own history, the events no conversation owns.

The project's starts and stops, what it loaded or failed to load (assets, MCP servers),
the crashes, restarts and escalations of its actors, its full mailboxes and failed alerts
(``events.project_history``). Read from the journal: the daemon's when one answers, the
journal itself otherwise (``runtime.cli.offline``).
"""

from __future__ import annotations

import argparse
from typing import Any

from runtime.cli.format import dumps_json, table
from runtime.cli.querying import query

__all__ = ["cmd_project_events"]

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
        lambda views, journal: views.project_events_view(journal, args),
    )
    print(dumps_json(value) if ns.json else _text(value), flush=True)
    return 0
