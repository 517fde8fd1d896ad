"""``roost soak``'s command line: where the report goes, help with defaults, exit statuses.

The run itself is ``soak.harness.run_soak`` (a real run: ``test_soak_run.py``); here it
is replaced by one that returns a finished report, to check what the command does with it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runtime.cli import app as cli
from runtime.errors import DaemonUnreachableError
from soak import harness, verdict
from soak.cli import main
from tests.soak.test_report import _report


@pytest.fixture
def finished(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        harness, "run_soak", lambda config, on_progress=None: verdict.decide(_report())
    )


def test_json_without_a_file_prints_the_report_as_json_instead_of_the_summary(
    finished: None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["passed"], report["scenario"]) == (True, "steady")


def test_json_with_a_file_and_without_writes_both(
    finished: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "r.json"
    assert main(["--json", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == json.loads(out.read_text())


def test_a_file_alone_keeps_the_summary_on_stdout(
    finished: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "r.json"
    assert main(["--json", str(out)]) == 0
    assert capsys.readouterr().out.startswith("roost soak: steady: PASSED")
    assert json.loads(out.read_text())["passed"] is True


def test_roost_json_soak_prints_json(finished: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--json", "soak", "--projects", "1"]) == 0
    assert json.loads(capsys.readouterr().out)["passed"] is True


def test_the_help_shows_the_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "--projects N projects to start (default: 3)" in text
    assert "per project (default: 4)" in text
    assert "is a regression (default: 10.0)" in text
    assert "spread over the projects (default: 12; slow-model: 1000)" in text
    assert "--model-latency-ms MS slow-model: " in text


def test_no_daemon_exits_3(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def unreachable(config: object, on_progress: object = None) -> None:
        raise DaemonUnreachableError("no daemon answers on /x/roost.sock")

    monkeypatch.setattr(harness, "run_soak", unreachable)
    assert main(["--home", "/x"]) == 3
    assert (
        capsys.readouterr().err == "roost: daemon_unreachable: no daemon answers on /x/roost.sock\n"
    )
