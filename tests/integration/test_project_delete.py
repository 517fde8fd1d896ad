"""``roost project delete``: a stopped project's history goes, a signed record of it stays.

Through the real CLI and daemon: refused without ``--yes`` (usage, exit 2) and while the
project runs (``project_running``); afterwards ``project list --all`` no longer lists it,
``timeline`` says ``project_not_found``, ``verify`` reports the deletion as such, and the
same id starts a fresh chain that verifies, also after a daemon restart. A journal cut
behind the daemon's back is still tampering. The same on PostgreSQL.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from runtime.client import Client
from runtime.daemon import start_daemon, stop_daemon
from runtime.journal.mapper import project_stream_id
from tests.integration.adversarial_helpers import run_daemon
from tests.integration.conftest import Daemon, alive, daemon_env, make_root
from tests.integration.journal_tamper import STREAM_NUMBER
from tests.integration.test_operator_cli import roost


def _json(home: str, *args: str, **env: str) -> Any:
    done = roost(home, "--json", *args, **env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _turn(home: str, root: str, project: str, **env: str) -> None:
    assert roost(home, "project", "start", root, "--id", project, **env).returncode == 0
    assert roost(home, "conversation", "start", project, "--id", "c1", **env).returncode == 0
    sent = roost(home, "send", project, "c1", "read notes.txt", "--wait", **env)
    assert sent.returncode == 0, sent.stderr


def test_a_deleted_project_is_gone_recorded_and_its_id_starts_afresh(tmp_path: Path) -> None:
    root = make_root(tmp_path / "repo")
    home = str(tmp_path / "home")
    with run_daemon(tmp_path / "home"):
        _turn(home, root, "gone")
        _turn(home, root, "kept")

        refused = roost(home, "project", "delete", "gone")
        assert refused.returncode == 2
        assert refused.stderr.startswith("roost: usage: `roost project delete gone` deletes")
        assert "whole history" in refused.stderr and "--yes" in refused.stderr

        running = roost(home, "project", "delete", "gone", "--yes")
        assert running.returncode == 1
        assert running.stderr.startswith("roost: project_running: project gone is running;")
        assert "roost project stop gone" in running.stderr

        assert roost(home, "project", "stop", "gone").returncode == 0
        deleted = _json(home, "project", "delete", "gone", "--yes")
        assert deleted["project_id"] == "gone" and deleted["deleted_events"] > 5
        assert "@" in deleted["deleted_by"]

        listed = _json(home, "project", "list", "--all")
        assert [p["project_id"] for p in listed] == ["kept"]
        timeline = roost(home, "timeline", "gone", "c1")
        assert timeline.returncode == 1
        assert timeline.stderr.startswith("roost: project_not_found:")
        again = roost(home, "project", "delete", "gone", "--yes")
        assert again.returncode == 1 and again.stderr.startswith("roost: project_not_found:")
        assert not (Path(home) / "anchors" / "gone.json").exists()

        verified = roost(home, "verify", "gone")
        assert verified.returncode == 0, verified.stdout + verified.stderr
        assert f"deleted: {deleted['deleted_events']} earlier events at" in verified.stdout
        assert "record signed" in verified.stdout

        _turn(home, root, "gone")  # the same id: a new chain from the genesis hash
        result = _json(home, "verify", "gone")
        assert result["ok"] is True and result["chain_ok"] is True, result
        assert [d["valid"] for d in result["deletions"]] == [True]
        assert roost(home, "project", "stop", "gone").returncode == 0
    with run_daemon(tmp_path / "home"):  # restarted: the new chain is sealed and anchored
        result = _json(home, "verify", "gone")
        assert result["ok"] is True and result["anchor_problems"] == [], result
        assert result["seal"]["checkpoints"] >= 1
        events = _json(home, "project", "events", "gone")
        assert [e["type"] for e in events["entries"]][:1] == ["project.started"]
        assert _json(home, "verify", "kept")["ok"] is True
        log = _json(home, "verify", "_roost.deletions")  # the deletion log itself
        assert log["ok"] is True and log["checked_events"] >= 2, log


def test_a_journal_cut_behind_the_daemons_back_is_not_a_deletion(tmp_path: Path) -> None:
    root = make_root(tmp_path / "repo")
    home = str(tmp_path / "home")
    with run_daemon(tmp_path / "home"):
        _turn(home, root, "cut")
        assert roost(home, "project", "stop", "cut").returncode == 0
    conn = sqlite3.connect(Path(home) / "journal.sqlite")
    with conn:
        conn.execute(
            f"DELETE FROM stored_events WHERE originator_id={STREAM_NUMBER}",
            (project_stream_id("cut").bytes,),
        )
    conn.close()
    with run_daemon(tmp_path / "home"):
        verified = roost(home, "--json", "verify", "cut")
        assert verified.returncode == 1, verified.stdout
        result = json.loads(verified.stdout)
        assert result["deletions"] == [] and result["anchor_ok"] is False
        assert result["anchor_problems"], result


@pytest.mark.postgres
def test_deleting_on_postgres_frees_the_id_for_a_new_chain(
    tmp_path: Path, postgres_env: dict[str, str]
) -> None:
    root = make_root(tmp_path / "repo")
    home = str(tmp_path / "home")
    env = daemon_env(ROOST_JOURNAL="postgres", **postgres_env)
    seen = []
    daemon = Daemon(home=home, pid=start_daemon(home, env=env, timeout_s=60))
    try:
        with Client.connect(home, timeout_s=60) as c:
            c.start_project(root, project_id="pg1")
            c.start_conversation("pg1", conversation_id="c1")
            assert c.send_message("pg1", "c1", "read notes.txt", wait=True)["outcome"] == (
                "llm.completed"
            )
            c.stop_project("pg1")
            deleted = c.delete_project("pg1", deleted_by="ops@host")
            assert deleted["deleted_events"] > 5
            assert [p["project_id"] for p in c.list_projects(all=True)] == []
            verified = c.verify("pg1")
            assert verified["ok"] is True and verified["checked_events"] == 0
            assert [d["deleted_by"] for d in verified["deletions"]] == ["ops@host"]
            c.start_project(root, project_id="pg1")
            c.start_conversation("pg1", conversation_id="c1")
            c.stop_project("pg1")
        seen += daemon.processes()
        stop_daemon(home)
        daemon = Daemon(home=home, pid=start_daemon(home, env=env, timeout_s=60))
        with Client.connect(home, timeout_s=60) as c:
            verified = c.verify("pg1")
            assert verified["ok"] is True and verified["anchor_problems"] == [], verified
            assert verified["checked_events"] >= 3
    finally:
        seen += daemon.processes()
        stop_daemon(home)
    assert alive(seen) == []
