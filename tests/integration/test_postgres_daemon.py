"""The daemon on a PostgreSQL journal: the same turn, restored after a restart."""

from __future__ import annotations

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
