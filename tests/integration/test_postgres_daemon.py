"""The daemon on a PostgreSQL journal: the same turn, restored after a restart."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from runtime.daemon import start_daemon, stop_daemon
from tests.integration.conftest import Daemon, alive, daemon_env
from tests.runtime.daemon_helpers import run_roost


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


@pytest.mark.postgres
@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            {"POSTGRES_PASSWORD": None},
            "roost: journal_error: POSTGRES_PASSWORD is not set, and the PostgreSQL journal "
            "(ROOST_JOURNAL=postgres) needs it in the daemon's environment: the password; set it "
            "empty (POSTGRES_PASSWORD=) for trust authentication\n",
        ),
        (
            {"POSTGRES_SCHEMA": "roost_no_such_schema"},
            "roost: journal_error: the schema POSTGRES_SCHEMA='roost_no_such_schema' does not "
            'exist in {where}: create it (CREATE SCHEMA "roost_no_such_schema") or set '
            "POSTGRES_SCHEMA to an existing one\n",
        ),
        (
            {"POSTGRES_PORT": "1"},
            "roost: journal_error: cannot connect to PostgreSQL as {user}@{host}:1/{db}: ",
        ),
    ],
    ids=["no_password", "no_schema", "wrong_port"],
)
def test_a_wrong_postgres_setting_fails_the_start_at_once_with_its_cause_and_no_pid_file(
    tmp_path: Path, postgres_env: dict[str, str], change: dict[str, str | None], expected: str
) -> None:
    home = str(tmp_path / "home")
    env = {**os.environ, **daemon_env(ROOST_JOURNAL="postgres", **postgres_env)}
    for key, value in change.items():
        env.pop(key, None)
        if value is not None:
            env[key] = value
    done = run_roost("daemon", "start", "--home", home, env=env, timeout=120)
    host, port = postgres_env["POSTGRES_HOST"], postgres_env["POSTGRES_PORT"]
    user, db = postgres_env["POSTGRES_USER"], postgres_env["POSTGRES_DBNAME"]
    where = f"{user}@{host}:{port}/{db}"
    assert done.stderr.startswith(expected.format(where=where, user=user, host=host, db=db))
    assert done.stderr.count("\n") == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert done.returncode == 1
    assert sorted(os.listdir(home)) == ["journal.key", "logs"]
