"""``python -m soak.command_bench`` runs (its figures are reported, never asserted)."""

from __future__ import annotations

import json

import pytest

from soak import command_bench
from tests.integration.adversarial_helpers import needs_bwrap


@needs_bwrap
def test_the_command_benchmark_runs_and_prints_its_figures(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert command_bench.main(["--runs", "3", "--files", "2"]) == 0
    figures = json.loads(capsys.readouterr().out)
    assert set(figures) == {"median_ms", "p90_ms", "runs", "floor_ms", "floor_ratio"}
    assert figures["runs"] == 3 and 0 < figures["median_ms"] <= figures["p90_ms"]
    assert figures["floor_ms"] > 0 and figures["floor_ratio"] > 0
