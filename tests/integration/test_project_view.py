"""A project's own history, its problems and its activity, through the real ``roost``.

Project-level problems (an asset that does not load) show in ``project events``,
``project diagnostics`` (health ``degraded``) and the incident report of a conversation
they bore on; ``roost logs`` shows the project, conversation, turn and tool steps, one
structured line each; ``project list --all`` lists stopped projects; ``timeline``,
``incident``, ``project events`` and ``project list --all`` answer with no daemon.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from tests.integration.adversarial_helpers import run_daemon, wait_until
from tests.integration.conftest import make_root
from tests.integration.test_operator_cli import roost


def _json(home: str, *args: str) -> Any:
    done = roost(home, "--json", *args)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _bad_skill(root: str) -> None:
    (Path(root) / ".roost" / "skills" / "broken.md").write_text("---\nfoo: [\n---\nbody\n")


def _log(home: str) -> list[dict[str, Any]]:
    done = roost(home, "logs", "-n", "500", "--json")
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_project_problems_show_in_events_diagnostics_the_incident_and_the_log(
    tmp_path: Path,
) -> None:
    root = make_root(tmp_path / "repo")
    _bad_skill(root)
    with run_daemon(tmp_path / "home") as daemon:
        home = daemon.home
        assert roost(home, "project", "start", root, "--id", "pv").returncode == 0
        diagnostics = _json(home, "project", "diagnostics", "pv")
        assert diagnostics["health"] == {
            "status": "degraded",
            "reason": "skills broken: invalid_frontmatter",
            "unresolved_problems": 1,
        }
        assert [(p["kind"], p["resolved"]) for p in diagnostics["recent_problems"]] == [
            ("asset_load_failed", False)
        ]
        events = _json(home, "project", "events", "pv")
        assert [(e["type"], e["problem"]) for e in events["entries"]] == [
            ("project.started", None),
            ("project.assets_loaded", "asset_load_failed"),
        ]
        assert events["unresolved_problems"] == 1
        shown = roost(home, "project", "events", "pv", "--problems")
        assert shown.returncode == 0, shown.stderr
        assert "asset_load_failed (unresolved)  skills broken: invalid_frontmatter" in shown.stdout
        assert roost(home, "conversation", "start", "pv", "--id", "c1").returncode == 0
        sent = roost(home, "send", "pv", "c1", "read notes.txt", "--wait")
        assert sent.returncode == 0, sent.stderr
        report = roost(home, "incident", "pv", "c1")
        assert "## Project problems during it\n\n- seq 2 · " in report.stdout
        assert "skills broken: invalid_frontmatter (unresolved)" in report.stdout

        def logged() -> list[dict[str, Any]]:
            lines = _log(home)
            return lines if any(line["event"] == "turn_ended" for line in lines) else []

        lines = wait_until(logged, timeout_s=30, what="the turn's end in the log")
        assert all(re.fullmatch(r"[a-z][a-z0-9_]*", line["event"]) for line in lines), [
            line["event"] for line in lines
        ]
        activity = [line for line in lines if line["component"] == "roost.activity"]
        assert [line["event"] for line in activity] == [
            "project_started",
            "project_assets_loaded",
            "project_load_failed",
            "conversation_started",
            "turn_started",
            "tool_call_ended",
            "turn_ended",
        ]
        by_event = {line["event"]: line for line in activity}
        assert by_event["project_load_failed"]["key"] == "broken"
        assert by_event["tool_call_ended"]["tool"] == "fs.read"
        assert by_event["tool_call_ended"]["outcome"] == "completed"
        ended = by_event["turn_ended"]
        assert (ended["project_id"], ended["conversation_id"], ended["outcome"]) == (
            "pv",
            "c1",
            "llm.completed",
        )
        assert ended["correlation_id"] == by_event["turn_started"]["correlation_id"]
        assert isinstance(ended["duration_ms"], int)
        thespian = [line for line in lines if line["component"] == "thespian"]
        assert thespian and {line["event"] for line in thespian} == {"thespian_message"}
        readable = roost(home, "logs", "-n", "500")
        assert re.search(r" info roost\.activity turn_ended seq=\d+ project_id=pv", readable.stdout)


def test_stopped_projects_are_listed_and_their_views_need_no_daemon(tmp_path: Path) -> None:
    root = make_root(tmp_path / "repo")
    with run_daemon(tmp_path / "home") as daemon:
        home = daemon.home
        for project in ("kept", "gone"):
            assert roost(home, "project", "start", root, "--id", project).returncode == 0
        assert roost(home, "conversation", "start", "gone", "--id", "c1").returncode == 0
        assert roost(home, "send", "gone", "c1", "read notes.txt", "--wait").returncode == 0
        assert roost(home, "project", "stop", "gone").returncode == 0
        assert [p["project_id"] for p in _json(home, "project", "list")] == ["kept"]
        listed = _json(home, "project", "list", "--all")
        assert [(p["project_id"], p["state"], p["conversation_count"]) for p in listed] == [
            ("gone", "stopped", 1),
            ("kept", "running", 0),
        ]
        assert listed[0]["reason"] == "requested"
        table = roost(home, "project", "list", "--all").stdout.splitlines()
        assert table[0].split() == ["PROJECT", "STATE", "ROOT", "CONVERSATIONS", "STARTED"]
        online = {
            "timeline": _json(home, "timeline", "gone", "c1", "--limit", "5"),
            "incident": roost(home, "incident", "gone", "c1").stdout,
            "events": _json(home, "project", "events", "gone"),
        }
        assert roost(home, "daemon", "stop").returncode == 0
        assert roost(home, "project", "list").returncode == 3  # the live list needs it
        assert _json(home, "timeline", "gone", "c1", "--limit", "5") == online["timeline"]
        offline = roost(home, "incident", "gone", "c1")
        assert (offline.returncode, offline.stdout) == (0, online["incident"])
        assert _json(home, "project", "events", "gone") == online["events"]
        listed = _json(home, "project", "list", "--all")  # kept: restored when a daemon starts
        assert [(p["project_id"], p["state"]) for p in listed] == [
            ("gone", "stopped"),
            ("kept", "restorable"),
        ]
        missing = roost(home, "timeline", "gone", "c9")
        assert (missing.returncode, missing.stderr) == (
            1,
            "roost: conversation_not_found: no conversation 'c9' in project 'gone'\n",
        )
    empty = roost(str(tmp_path / "nothing"), "timeline", "p", "c")
    assert empty.returncode == 3
    assert empty.stderr.startswith("roost: daemon_unreachable: ")
