"""A daemon's errors with ``roost --json``: one JSON object on stderr, the daemon's details kept.

The real ``roost`` program against a real daemon (real actors and journal).
"""

from __future__ import annotations

import json
from typing import Any

from runtime.client import Client
from tests.integration.conftest import Daemon
from tests.integration.conftest import roost_cli as roost


def json_error(stderr: str) -> dict[str, Any]:
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    error = json.loads(lines[0])
    assert isinstance(error, dict)
    return error


def test_a_daemon_error_with_json_is_one_object_with_the_details_the_daemon_sent(
    daemon: Daemon, project_root: str
) -> None:
    with Client.connect(daemon.home) as c:
        c.start_project(project_root, project_id="p1")
    done = roost(daemon.home, "--json", "send", "p1", "nope", "hello")
    assert (done.returncode, done.stdout) == (1, "")
    error = json_error(done.stderr)
    assert (error["code"], error["exit_status"]) == ("conversation_not_found", 1)
    assert error["details"]["conversation_id"] == "nope"
    plain = roost(daemon.home, "send", "p1", "nope", "hello")
    assert plain.returncode == 1
    assert plain.stderr.startswith("roost: conversation_not_found: ")
    assert plain.stderr.count("\n") == 1
    # after the command, and a daemon-side refusal of a value the client let through
    done = roost(daemon.home, "project", "start", project_root, "--opt", "no_such=1", "--json")
    assert (done.returncode, done.stdout) == (1, "")
    error = json_error(done.stderr)
    assert (error["code"], error["exit_status"]) == ("invalid_runtime_opt", 1)
    assert error["details"]["key"] == "no_such"


def test_a_failed_tool_or_turn_with_json_prints_the_result_then_the_error_with_its_details(
    daemon: Daemon, project_root: str
) -> None:
    with Client.connect(daemon.home) as c:
        c.start_project(project_root, project_id="p1", options={"max_rounds": 1})
        c.start_conversation("p1", conversation_id="c1")
    done = roost(daemon.home, "--json", "send", "p1", "c1", "read missing.txt", "--wait")
    assert done.returncode == 1
    ack = json.loads(done.stdout)
    assert ack["outcome"] == "budget.exceeded"
    error = json_error(done.stderr)
    assert error == {
        "code": "turn_failed",
        "message": "budget.exceeded: max_rounds (limit 1, used 1)",
        "details": {
            "correlation_id": ack["correlation_id"],
            "outcome": "budget.exceeded",
            "outcome_data": ack["outcome_data"],
        },
        "exit_status": 1,
    }
    done = roost(daemon.home, "--json", "run-tool", "p1", "fs.read", "--args", '{"path": "nope"}')
    assert done.returncode == 1
    assert json.loads(done.stdout)["status"] == "error"
    error = json_error(done.stderr)
    assert (error["code"], error["exit_status"]) == ("tool_error", 1)
    assert error["details"]["path"] == "nope"
