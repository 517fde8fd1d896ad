"""``roost verify`` catches a journal changed behind the runtime's back, with a diff."""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys

import msgspec

from tests.integration.conftest import REPO_ROOT, Daemon, daemon_env


def test_verify_reports_a_tampered_event_with_a_readable_diff(
    daemon: Daemon, project_root: str
) -> None:
    with daemon.client() as c:
        c.start_project(project_root, project_id="p1")
        c.start_conversation("p1", conversation_id="c1")
        c.send_message("p1", "c1", "hello there", wait=True)
        assert c.verify("p1")["ok"] is True
    db = sqlite3.connect(os.path.join(daemon.home, "journal.sqlite"))
    rowid, state = db.execute(
        "SELECT rowid, state FROM stored_events WHERE topic='user.message'"
    ).fetchone()
    envelope = msgspec.msgpack.decode(state)
    envelope["data"]["content"] = "tampered text"
    with db:
        db.execute(
            "UPDATE stored_events SET state=? WHERE rowid=?",
            (msgspec.msgpack.encode(envelope), rowid),
        )
    db.close()
    done = subprocess.run(
        [sys.executable, "-m", "runtime.cli", "--home", daemon.home, "verify", "p1"],
        env={**os.environ, **daemon_env()},
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert done.stderr.startswith("roost: verify_failed: project p1 does not verify")
    assert "hash chain BROKEN" in done.stdout
    assert f"hash_chain: seq={rowid}, reason=hash_mismatch" in done.stdout
    assert "projection: conversation_id=c1, projection=timeline" in done.stdout
    assert re.search(r'^ +- +"content": "hello there"', done.stdout, re.M)
    assert re.search(r'^ +\+ +"content": "tampered text"', done.stdout, re.M)
