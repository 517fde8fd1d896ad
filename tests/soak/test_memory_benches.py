"""``python -m soak.connection_bench`` and ``soak.churn_bench`` run (figures reported, never
asserted; the counts they read are)."""

from __future__ import annotations

import json

import pytest

from soak import churn_bench, connection_bench


@pytest.mark.timeout(120)
def test_the_connection_benchmark_runs_and_the_daemon_holds_one_endpoint(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("ROOST_BACKEND", raising=False)  # the real actor system
    assert connection_bench.main(["--connections", "6", "--warmup", "2"]) == 0
    figures = json.loads(capsys.readouterr().out)
    assert figures["connections"] == 6
    for reading in (figures["before"], figures["after"]):
        assert reading["uss_mib"] > 0 and reading["threads"] > 0
        assert reading["endpoints"]["open"] == 1  # one request at a time: one endpoint
        assert reading["endpoints"]["transport"] == 2


@pytest.mark.timeout(180)
def test_the_churn_benchmark_reads_every_always_on_process_at_each_checkpoint(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("ROOST_BACKEND", raising=False)
    argv = ["--conversations", "2", "--reads", "--checkpoints", "2,4"]
    assert churn_bench.main(argv) == 0
    figures = json.loads(capsys.readouterr().out)
    table = figures["uss_mib_by_rehydrations"]
    assert list(table) == ["0", "2", "4"]
    for reading in table.values():
        assert {"daemon", "supervisor", "journal", "project"} <= set(reading)
