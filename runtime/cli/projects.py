"""The ``roost project`` commands: start, stop, list, diagnostics, tools, events, delete.

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
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from runtime.cli.commands import EXIT_FAILURE, connect, print_error, print_ids, print_result
from runtime.cli.format import UsageError, dumps_json, kv_block, table
from runtime.cli.querying import offline_args, query

if TYPE_CHECKING:
    from events.view_types import HistoryEntry, ProblemHistoryEntry, ProjectEvents

__all__ = [
    "cmd_project_delete",
    "cmd_project_diagnostics",
    "cmd_project_events",
    "cmd_project_list",
    "cmd_project_start",
    "cmd_project_stop",
    "cmd_project_tools",
]


_COLUMNS = [
    ("seq", "SEQ"),
    ("at", "AT"),
    ("type", "TYPE"),
    ("problem", "PROBLEM"),
    ("summary", "SUMMARY"),
]


def _text(value: ProjectEvents) -> str:
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


def _state(entry: HistoryEntry | ProblemHistoryEntry) -> str:
    return "resolved" if entry.get("resolved") else "unresolved"


def cmd_project_events(ns: argparse.Namespace) -> int:
    """``roost project events PROJECT [--limit N] [--problems]`` (no daemon needed)."""
    args = {"project_id": ns.project, "limit": ns.limit, "problems_only": ns.problems}
    value = query(
        ns.home,
        lambda c: c.project_events(ns.project, ns.limit, problems_only=ns.problems),
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


def cmd_project_start(ns: argparse.Namespace) -> int:
    """``roost project start ROOT [--id ID] [--opt K=V ...] [--options-file FILE]``.

    An MCP server of the project that did not start is one ``mcp_server_failed`` line on
    stderr (its exit status, last stderr line and fix); the project runs, exit 1.
    """
    from runtime.policy import options as roost_options  # noqa: PLC0415 - this command only

    from_file = roost_options.load_options_file(ns.options_file) if ns.options_file else None
    pairs = roost_options.parse_opt_pairs(ns.opt or [])
    options = roost_options.merge_options(from_file, pairs)
    with connect(ns) as c:
        project_id = c.start_project(ns.root, project_id=ns.id, options=options)
        health = c.diagnostics(project_id).get("health") or {}
        rows = c.list_projects()
    problems = dict(health.get("problems") or {})
    result: dict[str, object] = {"project_id": project_id}
    if problems:
        result["problems"] = problems
    root = next((r.get("root") for r in rows if r.get("project_id") == project_id), None)
    shared = sorted(r["project_id"] for r in rows if r.get("root") == root) if root else []
    if len(shared) > 1:  # the same root under two ids: allowed, but said (docs/cli.md)
        result["shared_root_with"] = others = [p for p in shared if p != project_id]
        print(
            f"roost: warning: {root} is also the root of running project(s) "
            f"{', '.join(others)}: their tools read and write the same files; "
            f"`roost project stop {others[0]}` if that is not meant",
            file=sys.stderr,
        )
    print_result(ns, result, lambda v: project_id)
    for problem in problems.values():  # the project runs, without these servers' tools
        print_error("mcp_server_failed", _server_problem(problem))
    return EXIT_FAILURE if problems else 0


def _server_problem(problem: Mapping[str, object]) -> str:
    """One line: the server, how it ended, its last stderr line, the fix when known."""
    reason = str(problem.get("reason") or "")
    code, _, message = reason.partition(": ")
    return (message or reason or code).replace("\n", " ")


def cmd_project_stop(ns: argparse.Namespace) -> int:
    """``roost project stop ID``."""
    with connect(ns) as c:
        c.stop_project(ns.project)
    print_result(
        ns, {"project_id": ns.project, "stopped": True}, lambda v: f"project {ns.project} stopped"
    )
    return 0


def cmd_project_list(ns: argparse.Namespace) -> int:
    """``roost project list [--all] [-q]``: PROJECT ROOT CONVERSATIONS STARTED.

    With ``--all``, every project the journal knows (no daemon needed), with its STATE.
    """
    projects: Sequence[Mapping[str, object]]
    if getattr(ns, "all", False):
        projects = query(
            ns.home,
            lambda c: c.list_projects(all=True),
            lambda views, journal: [  # no daemon: what it would restore when it starts
                {**p, "state": "restorable"} if p["state"] == "running" else p
                for p in views.journal_projects(journal)
            ],
        )
    else:
        with connect(ns) as c:
            projects = c.list_projects()
    if print_ids(ns, projects, "project_id"):
        return 0
    columns = [
        ("project_id", "PROJECT"),
        *([("state", "STATE")] if getattr(ns, "all", False) else []),
        ("root", "ROOT"),
        ("conversation_count", "CONVERSATIONS"),
        ("started_at", "STARTED"),
    ]
    print_result(ns, projects, lambda v: table(v, columns, empty="(no projects)"))
    return 0


def cmd_project_diagnostics(ns: argparse.Namespace) -> int:
    """``roost project diagnostics ID``."""
    with connect(ns) as c:
        diagnostics = c.diagnostics(ns.project)
    print_result(ns, diagnostics, kv_block)
    return 0


def _tools_table(tools: Sequence[Mapping[str, object]]) -> str:
    flag_names = (
        ("read_only", "ro"),
        ("writes", "writes"),
        ("network_capable", "net"),
        ("runs_commands", "cmd"),
    )
    rows = [
        {
            "name": t.get("name"),
            "flags": ",".join(short for key, short in flag_names if t.get(key)) or None,
            "description": t.get("description"),
        }
        for t in tools
    ]
    columns = [("name", "NAME"), ("flags", "FLAGS"), ("description", "DESCRIPTION")]
    return table(rows, columns, empty="(no tools)")


def cmd_project_tools(ns: argparse.Namespace) -> int:
    """``roost project tools ID``: NAME FLAGS DESCRIPTION."""
    with connect(ns) as c:
        tools = c.list_tools(ns.project)
    print_result(ns, tools, _tools_table)
    return 0
