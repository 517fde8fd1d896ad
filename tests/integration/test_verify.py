"""``roost verify`` catches a journal changed behind the runtime's back, with a diff."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec

from runtime.journal.stored import decode_state, encode_state
from tests.integration.adversarial_helpers import run_daemon
from tests.integration.conftest import REPO_ROOT, Daemon, daemon_env
from tests.integration.journal_tamper import TOPIC_NUMBER


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
        f"SELECT rowid, state FROM stored_events WHERE topic={TOPIC_NUMBER}", ("user.message",)
    ).fetchone()
    envelope = decode_state(state, "user.message", rowid)
    tampered = msgspec.structs.replace(envelope, data={**envelope.data, "content": "tampered text"})
    with db:
        db.execute(
            "UPDATE stored_events SET state=? WHERE rowid=?",
            (encode_state(tampered), rowid),
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
    assert "projection: conversation_id=c1, projection=llm_context" in done.stdout
    assert re.search(r'^ +- +"content": "hello there"', done.stdout, re.M)
    assert re.search(r'^ +\+ +"content": "tampered text"', done.stdout, re.M)


def _roost_verify(home: str, project_id: str) -> dict[str, Any]:
    """``roost --json verify PROJECT`` in a child process; it must exit 0."""
    done = subprocess.run(
        [sys.executable, "-m", "runtime.cli", "--home", home, "--json", "verify", project_id],
        env={**os.environ, **daemon_env()},
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, "")
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_verify_passes_with_orchestration_off_also_after_a_daemon_restart(
    tmp_path: Path, project_root: str
) -> None:
    home = tmp_path / "home"
    idle = {
        "event_count": 4,
        "pending_tool_call_count": 0,
        "last_event_type": "user.message",
        "status": "idle",
    }
    with run_daemon(home) as daemon, daemon.client() as c:
        c.start_project(project_root, project_id="p1", options={"orchestration": False})
        c.start_conversation("p1", conversation_id="c1")
        for i in range(3):
            c.send_message("p1", "c1", f"note {i}", correlation_id=f"corr-{i}")
        assert c.get_projection("p1", "c1", "diagnostics") == idle
        verified = _roost_verify(str(home), "p1")
        assert (verified["ok"], verified["mismatches"]) == (True, [])
        assert verified["conversations_compared"] == ["c1"]
    with run_daemon(home) as daemon, daemon.client() as c:
        assert [p["project_id"] for p in c.list_projects()] == ["p1"]
        assert c.get_projection("p1", "c1", "diagnostics") == idle  # rebuilt from the journal
        c.send_message("p1", "c1", "after the restart", correlation_id="corr-3")
        assert c.get_projection("p1", "c1", "diagnostics") == {**idle, "event_count": 5}
        verified = _roost_verify(str(home), "p1")
        assert (verified["ok"], verified["mismatches"]) == (True, [])
        assert verified["conversations_compared"] == ["c1"]
