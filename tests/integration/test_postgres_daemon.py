"""The daemon on a PostgreSQL journal: the same turn, restored after a restart."""

from __future__ import annotations

import os
from pathlib import Path

from runtime.daemon import start_daemon, stop_daemon
from tests.integration.conftest import Daemon, alive, daemon_env


def test_a_daemon_on_postgres_runs_a_turn_and_restores_it_after_a_restart(
    tmp_path: Path, project_root: str, postgres_env: dict[str, str]
) -> None:
    home = str(tmp_path / "home")
    env = daemon_env(ROOST_JOURNAL="postgres", **postgres_env)
    seen = []
    daemon = Daemon(home=home, pid=start_daemon(home, env=env, timeout_s=60))
    try:
        with daemon.client() as c:
            c.start_project(project_root, project_id="pg1")
            c.start_conversation("pg1", conversation_id="c1")
            ack = c.send_message("pg1", "c1", "read README.md", correlation_id="corr-pg", wait=True)
            assert ack["outcome"] == "llm.completed"
            before = c.get_projection("pg1", "c1", "timeline")
        seen += daemon.processes()
        stop_daemon(home)
        daemon = Daemon(home=home, pid=start_daemon(home, env=env, timeout_s=60))
        with daemon.client() as c:
            assert [p["project_id"] for p in c.list_projects()] == ["pg1"]
            assert c.get_projection("pg1", "c1", "timeline") == before
            assert c.verify("pg1")["ok"] is True
            assert not (tmp_path / "home" / "journal.sqlite").exists()
    finally:
        seen += daemon.processes()
        stop_daemon(home)
    assert alive(seen) == []


def test_a_postgres_journal_cut_while_stopped_is_caught_by_the_seal_kept_on_the_host(
    tmp_path: Path, project_root: str, postgres_env: dict[str, str]
) -> None:
    import psycopg

    home = str(tmp_path / "home")
    key = tmp_path / "keys" / "roost.key"
    key.parent.mkdir()
    key.write_bytes(os.urandom(32))
    key.chmod(0o600)
    env = daemon_env(ROOST_JOURNAL="postgres", ROOST_JOURNAL_KEY_FILE=str(key), **postgres_env)
    table = f'"{postgres_env["POSTGRES_SCHEMA"]}".roostjournal_events'
    seen = []
    daemon = Daemon(home=home, pid=start_daemon(home, env=env, timeout_s=60))
    try:
        with daemon.client() as c:
            c.start_project(project_root, project_id="pg1")
            c.start_conversation("pg1", conversation_id="c1")
            c.send_message("pg1", "c1", "read README.md", wait=True)
        seen += daemon.processes()
        stop_daemon(home)
        daemon = Daemon(home=home, pid=start_daemon(home, env=env, timeout_s=60))
        with daemon.client() as c:
            healthy = c.verify("pg1")
            assert (healthy["ok"], healthy["anchor_problems"]) == (True, [])
            assert (healthy["seal"]["anchor"], healthy["seal"]["unsealed_events"]) == ("closed", 0)
        seen += daemon.processes()
        stop_daemon(home)
        assert not (tmp_path / "home" / "journal.key").exists()
        with psycopg.connect(
            dbname=postgres_env["POSTGRES_DBNAME"],
            host=postgres_env["POSTGRES_HOST"],
            port=int(postgres_env["POSTGRES_PORT"]),
            user=postgres_env["POSTGRES_USER"],
            password=postgres_env["POSTGRES_PASSWORD"] or None,
            autocommit=True,
        ) as conn:
            (last,) = conn.execute(f"SELECT max(notification_id) FROM {table}").fetchone()
            conn.execute(f"DELETE FROM {table} WHERE notification_id > %s", (last - 2,))
        daemon = Daemon(home=home, pid=start_daemon(home, env=env, timeout_s=60))
        with daemon.client() as c:
            cut = c.verify("pg1")
        assert (cut["ok"], cut["chain_ok"], cut["anchor_ok"]) == (False, True, False)
        assert [(p["kind"], p["expected_seq"], p["found_seq"]) for p in cut["anchor_problems"]] == [
            ("truncated", last, last - 2)
        ]
    finally:
        seen += daemon.processes()
        stop_daemon(home)
    assert alive(seen) == []
