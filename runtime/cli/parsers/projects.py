"""``roost project start|stop|diagnostics|tools|list|events|delete`` (``runtime.cli.projects``)."""

from __future__ import annotations

import argparse

from runtime.cli import projects as cli_projects
from runtime.cli.parsers.tree import MAX_TIMELINE_LIMIT, CommandTree, quiet, timeline_limit

__all__ = ["add_project_commands"]


def _opt_pair(text: str) -> str:
    """``--opt KEY=VALUE``: the shape is the command line's (exit 2); the value the daemon's."""
    key, sep, _ = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(
            f"expected KEY=VALUE, got {text!r}, e.g. --opt approval_mode=sensitive"
        )
    return text


def add_project_commands(tree: CommandTree) -> None:
    """The ``project`` group."""
    project = tree.group("project", "start, stop and inspect projects")
    p = tree.leaf(
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
        tree.leaf(project, name, func, text, example).add_argument("project", metavar="ID")
    p = tree.leaf(
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
    p = tree.leaf(
        project,
        "events",
        cli_projects.cmd_project_events,
        "show a project's own history: starts, loads, crashes (no daemon needed)",
        "roost project events p1 --problems",
    )
    p.add_argument("project", metavar="ID")
    p.add_argument(
        "--limit",
        type=timeline_limit,
        default=100,
        metavar="N",
        help=f"the last N entries, 1 to {MAX_TIMELINE_LIMIT}",
    )
    p.add_argument("--problems", action="store_true", help="only the events that record a problem")
    p = tree.leaf(
        project,
        "delete",
        cli_projects.cmd_project_delete,
        "delete a stopped project's whole history (needs --yes)",
        "roost project delete p1 --yes",
    )
    p.add_argument("project", metavar="ID")
    p.add_argument("--yes", action="store_true", help="yes, delete every event of the project")
