"""Errors the client makes itself, as scripts read them: JSON with ``--json``; usage exit 2.

Run as a program (``python -m runtime.cli``); a daemon's errors with ``--json`` are in
``tests/integration/test_cli_json_errors.py``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from runtime.cli import app as cli
from tests.runtime.daemon_helpers import run_roost


def json_error(stderr: str) -> dict[str, Any]:
    """The one JSON object ``roost --json`` printed on stderr (and nothing else)."""
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    error = json.loads(lines[0])
    assert isinstance(error, dict)
    return error


def test_a_client_side_error_with_json_names_the_socket_and_the_exit_status(
    tmp_path: Path,
) -> None:
    absent = str(tmp_path / "no-daemon")
    done = run_roost("--json", "--home", absent, "project", "list")
    assert (done.returncode, done.stdout) == (3, "")
    error = json_error(done.stderr)
    assert (error["code"], error["exit_status"]) == ("daemon_unreachable", 3)
    assert error["details"] == {"home": absent, "socket": f"{absent}/roost.sock"}
    assert f"roost daemon start --home {absent}" in error["message"]


def test_a_usage_error_with_json_is_json_too_and_without_it_one_line(tmp_path: Path) -> None:
    done = run_roost("--json", "--home", str(tmp_path), "timeline", "p1", "c1", "--limit", "0")
    assert (done.returncode, done.stdout) == (2, "")
    error = json_error(done.stderr)
    assert (error["code"], error["details"], error["exit_status"]) == ("usage", {}, 2)
    assert error["message"].startswith("argument --limit: expected an integer from 1 to 500")
    plain = run_roost("--home", str(tmp_path), "timeline", "p1", "c1", "--limit", "0")
    assert plain.returncode == 2
    assert plain.stderr.startswith("roost: usage: argument --limit: expected an integer")


def test_json_errors_last_for_one_run_only(capsys: pytest.CaptureFixture[str], tmp_path) -> None:
    absent = str(tmp_path / "none")
    assert cli.main(["--json", "--home", absent, "project", "list"]) == 3
    assert json_error(capsys.readouterr().err)["code"] == "daemon_unreachable"
    assert cli.main(["--home", absent, "project", "list"]) == 3
    assert capsys.readouterr().err.startswith("roost: daemon_unreachable: no daemon answers")


@pytest.mark.parametrize("pair", ["approval_mode", "=sensitive", " =1"])
def test_an_opt_without_key_and_equals_is_a_usage_error_before_any_daemon(
    tmp_path: Path, pair: str
) -> None:
    # no daemon runs here: the shape is refused before the client connects
    done = run_roost("--home", str(tmp_path / "none"), "project", "start", ".", "--opt", pair)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        f"roost: usage: argument --opt: expected KEY=VALUE, got {pair!r}, "
        "e.g. --opt approval_mode=sensitive (see `roost project start --help`)\n"
    )
