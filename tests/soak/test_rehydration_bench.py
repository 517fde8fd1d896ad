"""``python -m soak.rehydration_bench`` runs (figures reported, never asserted; its shape is)."""

from __future__ import annotations

import json

import pytest

from soak import rehydration_bench


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_the_rehydration_benchmark_times_each_project_and_history(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("ROOST_BACKEND", raising=False)  # the real actor system
    argv = ["--short", "1", "--long", "3", "--samples", "1", "--idle-ms", "100"]
    assert rehydration_bench.main(argv) == 0
    figures = json.loads(capsys.readouterr().out)
    for timed in ("first_turn_ms_median", "warm_turn_ms_median"):
        assert set(figures[timed]) == {"replay", "snapshot"}
        for by_history in figures[timed].values():
            assert set(by_history) == {"short", "long"}
            assert all(ms > 0 for ms in by_history.values())
    assert set(figures["long_over_short"]) == {"replay", "snapshot"}
