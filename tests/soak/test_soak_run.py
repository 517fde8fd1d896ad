"""One small real soak run: a real daemon on a temporary home, driven through the client."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from runtime.client import Client
from runtime.daemon.processes import daemon_processes
from runtime.errors import RoostError
from soak.cli import main
from tests.runtime.daemon_helpers import wait_for


@pytest.mark.timeout(90)
def test_a_small_soak_run_passes_reports_every_figure_and_leaves_no_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("ROOST_BACKEND", raising=False)  # the real actor system
    monkeypatch.delenv("ROOST_JOURNAL", raising=False)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))  # where the run's roots go
    home = tmp_path / "home"
    out = tmp_path / "report.json"
    argv = ["--home", str(home), "--projects", "1", "--conversations", "2", "--events", "2"]
    argv += ["--concurrency", "2", "--idle-passivation-ms", "500", "--json", str(out)]

    status = main(argv)

    printed = capsys.readouterr().out
    report = json.loads(out.read_text())
    assert status == 0, printed
    assert printed.splitlines()[0].startswith("roost soak: steady: PASSED")
    assert (report["passed"], report["reasons"], report["failures"]) == (True, [], [])
    assert report["scenario"] == "steady"
    assert report["projects"] == {"requested": 1, "started": 1, "failed": 0}
    assert report["conversations"] == {"requested": 2, "started": 2, "failed": 0}
    events = report["events"]
    assert (events["requested"], events["sent"], events["failed"]) == (4, 4, 0)
    latency = events["latency_ms"]
    assert latency["count"] == 4
    assert 0 < latency["min"] <= latency["p50"] <= latency["p95"] <= latency["p99"]
    assert latency["p99"] == latency["max"]
    assert report["throughput"]["turns_per_s"] > 0
    # Every turn commits its message, two model rounds, the decision, the tool's events.
    assert report["throughput"]["events_committed"] >= 4 * 8
    integrity = report["integrity"]
    assert integrity["checked_events"] > report["throughput"]["events_committed"]
    assert {k: integrity[k] for k in ("lost", "duplicated", "replay_mismatch")} == {
        "lost": 0,
        "duplicated": 0,
        "replay_mismatch": 0,
    }
    assert (integrity["unterminated_calls"], integrity["hash_chain_ok"]) == (0, True)
    memory = report["memory"]
    assert 0 < memory["rss_start"] <= memory["rss_peak"]
    assert memory["rss_end"] > 0
    # the conversations are entities of the project's host: no process of their own
    assert memory["processes_peak"] >= memory["processes_start"]
    assert memory["pss_peak"] >= memory["pss_start"] > 0
    assert memory["pss_per_live_conversation"] == (memory["pss_peak"] - memory["pss_start"]) // 2
    assert sum(report["throughput"]["per_minute"]) == 4
    # the turns' messages: at least the inbound message's way down and the outcome's way up
    assert report["messages_per_turn"] >= 2
    assert report["counters"]["journal_append"] >= 4  # at least one append per turn
    assert report["appends_per_commit"] >= 1
    # the tree's hosts and Journal did the turns' work: CPU was spent, and read per turn
    cpu = report["cpu_ms_per_turn"]
    assert cpu["tree_ms"] > 0 and cpu["client_ms"] > 0
    assert any(line.startswith("  cpu per turn   ") for line in printed.splitlines())
    assert (report["overhead_ms"], report["slow_model"]) == (None, None)
    assert (report["restarts"], report["chaos"], report["baseline"]) == (0, None, None)
    assert daemon_processes(str(home)) == []
    assert list(scratch.iterdir()) == []  # a run that passed keeps nothing


@pytest.mark.timeout(120)
def test_a_soak_run_with_a_connection_per_turn_makes_the_leak_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("ROOST_BACKEND", raising=False)  # the real actor system
    monkeypatch.delenv("ROOST_JOURNAL", raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    home = tmp_path / "home"
    out = tmp_path / "report.json"
    argv = ["--home", str(home), "--projects", "1", "--conversations", "2", "--events", "4"]
    argv += ["--concurrency", "2", "--connection-per-turn", "--json", str(out)]

    status = main(argv)

    printed = capsys.readouterr().out
    report = json.loads(out.read_text())
    assert status == 0, printed
    assert report["config"]["connection_per_turn"] is True
    assert report["events"]["sent"] == 8
    check = report["leaks"]
    assert (check["limit_pct"], check["settle_s"]) == (10.0, 3.0)
    names = [p["name"] for p in check["processes"]]
    for always_on in ("daemon", "supervisor", "journal", "project"):  # each project: one host
        assert always_on in names, names
    for process in check["processes"]:
        assert process["uss_before"] > 0 and process["uss_after"] > 0, process
        assert process["leaked"] is False, process
    assert check["judged"] is False  # a few seconds of load: reported, not judged
    heading = "  leak check     USS after the warm-up -> 3 s after the load (limit +10%): ok"
    assert any(line.startswith(heading + " (not judged: ") for line in printed.splitlines())
    assert daemon_processes(str(home)) == []


@pytest.mark.timeout(120)
def test_a_short_slow_model_run_reports_overhead_starts_memory_and_its_goals(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("ROOST_BACKEND", raising=False)  # the real actor system
    monkeypatch.delenv("ROOST_JOURNAL", raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    home = tmp_path / "home"
    out = tmp_path / "report.json"
    argv = ["--home", str(home), "--scenario", "slow-model", "--projects", "2"]
    argv += ["--concurrency", "5", "--model-latency-ms", "200", "--json", str(out)]

    status = main(argv)

    printed = capsys.readouterr().out
    report = json.loads(out.read_text())
    assert status == 0, printed
    assert (report["scenario"], report["config"]["model_latency_ms"]) == ("slow-model", 200)
    assert report["conversations"] == {"requested": 5, "started": 5, "failed": 0}
    assert (report["events"]["requested"], report["events"]["sent"]) == (10, 10)  # 2 each
    slow = report["slow_model"]
    # two turns of two rounds each: a fs.read call, then the answer after its result
    assert (slow["live_conversations"], slow["model_requests"]) == (5, 20)
    assert slow["start_conversation_ms"]["count"] == 5
    assert 1 <= slow["model_peak_waiting"] <= 5
    assert (slow["overhead_first_turn_ms"]["count"], slow["overhead_later_turns_ms"]["count"]) == (
        5,
        5,
    )
    overhead = report["overhead_ms"]
    assert overhead["count"] == 10
    assert 0 < overhead["min"] <= overhead["p99"] < report["events"]["latency_ms"]["max"]
    assert [g["metric"] for g in slow["goals"]] == [
        "slow_model.live_conversations",
        "overhead_ms.p99",
        "memory.pss_per_live_conversation",
        "slow_model.start_conversation_ms.p50",
    ]
    assert (slow["goals"][0]["value"], slow["goals"][0]["met"], slow["goals_met"]) == (
        5,
        False,
        False,
    )
    assert sum(report["throughput"]["per_minute"]) == 10
    memory = report["memory"]
    assert memory["pss_peak"] >= memory["pss_start"] > 0
    assert memory["pss_per_live_conversation"] == (memory["pss_peak"] - memory["pss_start"]) // 5
    counters = report["counters"]
    assert set(counters) == {
        "actor_message",
        "journal_link",
        "host_link",
        "journal_append",
        "journal_commit",
    }
    assert counters["journal_append"] >= counters["journal_commit"] > 0
    boundary = counters["actor_message"] + counters["journal_link"] + counters["host_link"]
    assert report["messages_per_turn"] == round(boundary / 10, 2) > 0
    assert report["appends_per_commit"] >= 1
    assert report["leaks"]["judged"] is False  # no warm-up precedes its first reading
    assert any(
        line.startswith("  goals          issue 18 (NOT all met") for line in printed.splitlines()
    )
    assert daemon_processes(str(home)) == []


def _turns_recorded(home: Path) -> bool:
    try:
        with Client.connect(str(home)) as client:
            projects = client.list_projects()
            if not projects:
                return False
            diag = client.get_projection(projects[0]["project_id"], "c1", "diagnostics")
    except RoostError:
        return False
    return int(diag["event_count"]) > 20


@pytest.mark.timeout(90)
def test_sigterm_stops_the_run_and_the_daemon_it_started(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("ROOST_BACKEND", "ROOST_JOURNAL")}
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env["TMPDIR"] = str(scratch)
    home = tmp_path / "home"
    argv = ["--projects", "1", "--conversations", "2", "--events", "1000", "--concurrency", "2"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "runtime.cli", "soak", "--home", str(home), *argv],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(lambda: _turns_recorded(home), 60, "the soak workload to run")
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 143
    assert err.splitlines()[-1] == "roost: terminated: the soak run was stopped (its daemon too)"
    assert daemon_processes(str(home)) == []
    assert list(scratch.iterdir()) == []
