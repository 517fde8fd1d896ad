"""``python -m soak.verify_bench`` runs at a tiny size (figures reported, never asserted)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.integration.conftest import REPO_ROOT


def test_the_verify_benchmark_builds_a_journal_with_snapshots_verifies_it_and_reports(
    tmp_path: Path,
) -> None:
    out = tmp_path / "report.json"
    done = subprocess.run(
        [
            sys.executable,
            *("-m", "soak.verify_bench", "--events", "600", "--snapshots"),
            *("--workdir", str(tmp_path), "--json", str(out)),
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(out.read_text())
    assert json.loads(done.stdout) == report
    assert report["snapshots_stored"] == 4
    ((tree, verified),) = report["verify"].items()
    assert tree == str(REPO_ROOT)
    assert (verified["ok"], verified["mismatches"], verified["snapshots"]) == (
        True,
        0,
        {"checked": 4, "stale": 0},
    )
    assert verified["checked_events"] == report["build"]["rows"]
    assert verified["peak_rss_mb"] >= verified["rss_before_mb"] > 0
    assert os.listdir(tmp_path) == ["report.json"]  # the home and the root are removed
