"""Thespian daemonizes its admin; the actor tree must still die with the daemon."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from runtime.daemon import start_daemon, stop_daemon
from tests.integration.conftest import Daemon, alive, daemon_env, tree
from tests.runtime.daemon_helpers import wait_for


def test_killing_the_daemon_process_takes_the_actor_tree_down(
    tmp_path: Path, project_root: str
) -> None:
    home = str(tmp_path / "home")
    daemon = Daemon(home=home, pid=start_daemon(home, env=daemon_env(), timeout_s=60))
    with daemon.client() as c:
        c.start_project(project_root, project_id="p1")
        c.start_conversation("p1", conversation_id="c1")
        c.send_message("p1", "c1", "hello", wait=True)
    actors = tree(daemon.admin_pid or 0) if daemon.processes() else []
    assert len(actors) >= 5  # admin, supervisor, journal, project, policy, runner, conversation
    os.kill(daemon.pid, signal.SIGKILL)
    wait_for(lambda: alive(actors) == [], timeout_s=15, what="the actor tree to exit")
    stop_daemon(home, timeout_s=10)  # cleans the stale pid file and socket
    assert not os.path.exists(os.path.join(home, "roost.sock"))
