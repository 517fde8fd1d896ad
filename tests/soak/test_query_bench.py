"""``python -m soak.query_bench`` runs at a tiny size (its figures are reported, never asserted)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.integration.conftest import REPO_ROOT, daemon_env


def test_the_query_benchmark_builds_a_journal_queries_a_real_daemon_and_reports(
    tmp_path: Path,
) -> None:
    out = tmp_path / "report.json"
    size = ["--events", "600", "--conversations", "2", "--batch", "100"]
    rounds = ["--rounds", "1", "--cli-rounds", "1", "--whole"]
    where = ["--workdir", str(tmp_path), "--json", str(out)]
    done = subprocess.run(
        [sys.executable, "-m", "soak.query_bench", *size, *rounds, *where],
        cwd=REPO_ROOT,
        env={**os.environ, **daemon_env()},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(out.read_text())
    assert json.loads(done.stdout) == report
    build = report["build"]
    assert build["events"] == 594 and build["rows"] > build["events"]  # and the checkpoints
    daemon = report["daemon"]
    assert daemon["timeline_entries"] == 291  # its conversation.started and 29 turns of 10
    for query in ("timeline_limit_100", "timeline_before_seq", "timeline_after_seq"):
        assert daemon[query]["median_ms"] > 0
    assert set(daemon["uss_mb"]) == {"idle", "warm", "after_pass_1", "after_pass_2", "after_cli"}
    assert daemon["cli_timeline_limit_100"]["median_ms"] > 0
    assert len(report["whole_project"]["ms"]) == 2
    assert os.listdir(tmp_path) == ["report.json"]  # the home and the root are removed
