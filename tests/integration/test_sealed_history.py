"""``roost verify`` against an attacker who holds the journal's database and nothing else.

Each test runs a real daemon, stops it, changes the SQLite file with ``sqlite3``
(``journal_tamper``), starts a daemon again and runs the real CLI. The healthy cases
(restarts, SIGKILL between seals, the timer, a project stop, a small chaos soak) must
verify, with the unsealed tail reported as unsealed, never as tampering.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from runtime.client import Client
from runtime.daemon import start_daemon, stop_daemon
from runtime.journal.store import Journal
from tests.integration import journal_tamper as tamper
from tests.integration.conftest import REPO_ROOT, daemon_env
from tests.integration.test_daemon_crash import kill_everything, log_events
from tests.runtime.daemon_helpers import wait_for

SEALING = {"ROOST_SEAL_EVERY_EVENTS": "5", "ROOST_SEAL_INTERVAL_S": "0"}
"""A seal every 5 events and no timer: where seals fall depends only on the appends."""


@pytest.fixture
def home(daemon_home: str) -> str:
    """A ROOST_HOME whose daemons are all gone afterwards (``daemon_home``)."""
    return daemon_home


def start(home: str, **extra: str) -> int:
    return start_daemon(home, env=daemon_env(**{**SEALING, **extra}), timeout_s=60)


def run_turns(home: str, project_root: str, turns: int = 2, *, new: bool = True) -> None:
    with Client.connect(home, timeout_s=30) as c:
        if new:
            c.start_project(project_root, project_id="p1")
            c.start_conversation("p1", "c1")
        for _ in range(turns):
            done = c.send_message("p1", "c1", "read README.md", wait=True)
            assert done["outcome"] == "llm.completed"


def sealed_project(home: str, project_root: str, turns: int = 2) -> None:
    """A project with a few turns, then a clean stop (which seals and closes the anchor)."""
    start(home)
    run_turns(home, project_root, turns)
    stop_daemon(home, timeout_s=30)


def anchor_of(home: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(Path(home, "anchors", "p1.json").read_text())
    return data


def checkpoints(rows: list[tamper.Row]) -> list[tamper.Row]:
    return [r for r in rows if r.envelope.type == "journal.checkpoint"]


def verify_cli(home: str, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "runtime.cli", "--home", home, *flags, "verify", "p1"],
        env={**os.environ, **daemon_env()},
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def problems(result: dict[str, Any]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = result["anchor_problems"]
    return found


def verify_json(home: str) -> dict[str, Any]:
    done = verify_cli(home, "--json")
    result: dict[str, Any] = json.loads(done.stdout)
    assert done.returncode == (0 if result["ok"] else 1), done.stderr
    return result


# --- healthy journals ------------------------------------------------------------------------


def test_a_cleanly_stopped_journal_verifies_as_sealed_after_every_restart(
    home: str, project_root: str
) -> None:
    sealed_project(home, project_root)
    stored = tamper.rows(home, "p1")
    anchor = anchor_of(home)
    last = stored[-1]
    assert last.envelope.type == "journal.checkpoint"  # at the stop, unless a count seal was last
    assert last.envelope.data["reason"] in ("shutdown", "count")
    assert (anchor["closed"], anchor["checkpoint"], anchor["checkpoint_seq"]) == (
        True,
        {"type": "journal.checkpoint", **last.envelope.data},
        last.rowid,
    )
    assert os.stat(Path(home, "journal.key")).st_mode & 0o777 == 0o600
    assert os.stat(Path(home, "anchors", "p1.json")).st_mode & 0o777 == 0o600
    start(home)
    result = verify_json(home)
    assert (result["ok"], result["anchor_ok"], result["anchor_problems"]) == (True, True, [])
    assert result["seal"] == {
        "anchor": "closed",
        "checkpoints": len(checkpoints(stored)),
        "sealed_through": last.version,
        "sealed_seq": last.rowid,
        "sealed_at": last.envelope.data["sealed_at"],
        "unsealed_events": 0,
    }
    text = verify_cli(home)
    assert text.returncode == 0
    assert text.stdout.splitlines()[1] == (
        f"seals ok: {len(checkpoints(stored))} checkpoints; sealed through event "
        f"{last.version} (seq {last.rowid}) at {last.envelope.data['sealed_at']}; "
        "0 unsealed events after it; anchor closed"
    )
    run_turns(home, project_root, 1, new=False)  # the writer reopens the project first
    result = verify_json(home)
    assert (result["ok"], result["anchor_problems"], result["seal"]["anchor"]) == (True, [], "ok")
    stop_daemon(home, timeout_s=30)
    start(home)
    result = verify_json(home)
    assert (result["ok"], result["seal"]["anchor"], result["seal"]["unsealed_events"]) == (
        True,
        "closed",
        0,
    )


def test_after_a_sigkill_the_tail_after_the_last_seal_is_unsealed_not_tampered(
    home: str, project_root: str
) -> None:
    start(home, ROOST_SEAL_EVERY_EVENTS="0")  # the project's stop is the only seal
    run_turns(home, project_root, 1)
    with Client.connect(home, timeout_s=30) as c:
        c.stop_project("p1")
        c.start_project(project_root, project_id="p1")
    run_turns(home, project_root, 1, new=False)
    kill_everything(home)
    stored = tamper.rows(home, "p1")
    (sealed,) = checkpoints(stored)
    tail = stored[-1].version - sealed.version
    assert sealed.envelope.data["reason"] == "project_stopped"
    assert tail >= 12 and anchor_of(home)["closed"] is False  # project.started and a turn
    start(home)
    result = verify_json(home)
    assert (result["ok"], result["chain_ok"], result["anchor_ok"]) == (True, True, True)
    assert result["anchor_problems"] == []
    assert result["seal"]["sealed_through"] == sealed.version
    assert result["seal"]["unsealed_events"] == tail
    run_turns(home, project_root, 1, new=False)
    assert verify_json(home)["ok"] is True


def test_the_timer_seals_a_quiet_project_and_a_project_stop_seals_it(
    home: str, project_root: str
) -> None:
    start(home, ROOST_SEAL_EVERY_EVENTS="0", ROOST_SEAL_INTERVAL_S="0.2")
    run_turns(home, project_root, 1)
    wait_for(
        lambda: verify_json(home)["seal"]["unsealed_events"] == 0,
        timeout_s=20,
        what="the timer to seal p1",
    )
    reasons = [r.envelope.data["reason"] for r in checkpoints(tamper.rows(home, "p1"))]
    assert reasons and set(reasons) == {"interval"}  # one, or more if it fired mid-turn
    with Client.connect(home, timeout_s=30) as c:
        c.stop_project("p1")
    stored = tamper.rows(home, "p1")
    assert stored[-1].envelope.type == "journal.checkpoint"
    assert stored[-1].envelope.data["reason"] == "project_stopped"
    assert stored[-2].envelope.type == "project.stopped"


@pytest.mark.timeout(600)
def test_a_small_chaos_soak_leaves_every_project_sealed_and_verified(
    home: str, tmp_path: Path
) -> None:
    start(home, ROOST_SEAL_EVERY_EVENTS="16", ROOST_SEAL_INTERVAL_S="1")
    report_path = tmp_path / "report.json"
    done = subprocess.run(
        [sys.executable, "-m", "runtime.cli", "soak", "--scenario", "chaos", "--projects", "2",
         "--conversations", "2", "--events", "3", "--home", home, "--json", str(report_path)],
        env={**os.environ, **daemon_env()}, cwd=REPO_ROOT, capture_output=True, text=True,
        timeout=500, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(report_path.read_text())
    assert report["integrity"]["hash_chain_ok"] is True
    assert report["chaos"]["kills"] >= 1
    projects = sorted(p.stem for p in Path(home, "anchors").glob("*.json"))
    assert len(projects) == 2
    with Client.connect(home, timeout_s=120) as c:
        for project in projects:
            result = c.verify(project)
            assert (result["ok"], result["anchor_ok"], result["anchor_problems"]) == (
                True,
                True,
                [],
            ), project
            assert result["seal"]["checkpoints"] >= 1
    stop_daemon(home, timeout_s=30)  # a clean stop after the chaos seals every project
    with Journal.open(home, "sqlite") as journal:
        for project in projects:
            seals = journal.audit(project).seals
            assert seals is not None
            assert (seals.ok, seals.anchor, seals.unsealed_events) == (True, "closed", 0), project


# --- a database-only attacker ------------------------------------------------------------------


@pytest.mark.parametrize("cut", [1, 3], ids=["the-last-checkpoint", "the-last-three-events"])
def test_a_journal_cut_after_a_clean_stop_is_reported_as_truncated(
    home: str, project_root: str, cut: int
) -> None:
    sealed_project(home, project_root)
    anchor = anchor_of(home)
    stored = tamper.rows(home, "p1")
    tamper.delete(home, [r.rowid for r in stored[-cut:]])
    kept = stored[:-cut]
    intact = checkpoints(kept)[-1]
    start(home)
    expected = {
        "kind": "truncated",
        "expected_through": stored[-1].version,
        "found_through": kept[-1].version,
        "expected_seq": stored[-1].rowid,
        "found_seq": kept[-1].rowid,
        "checkpoint_index": anchor["checkpoint"]["index"],
        "sealed_at": anchor["checkpoint"]["sealed_at"],
        "intact_through": intact.version,
    }
    result = verify_json(home)
    assert (result["ok"], result["chain_ok"], result["mismatches"]) == (False, True, [])
    assert (result["anchor_ok"], result["anchor_problems"]) == (False, [expected])
    text = verify_cli(home)
    assert text.returncode == 1
    assert text.stderr == (
        "roost: verify_failed: project p1 does not verify (0 mismatches, 1 anchor problem)\n"
    )
    assert (
        f"  - truncated: the anchor says the journal reached event {stored[-1].version} "
        f"(seq {stored[-1].rowid}, checkpoint {anchor['checkpoint']['index']}, sealed "
        f"{anchor['checkpoint']['sealed_at']}); that checkpoint is gone and the journal ends "
        f"at event {kept[-1].version} (seq {kept[-1].rowid}); the last intact seal covers "
        f"events 1-{intact.version}"
    ) in text.stdout.splitlines()
    # More writes do not wash it out: the writer refuses to seal over the cut.
    before = Path(home, "anchors", "p1.json").read_bytes()
    run_turns(home, project_root, 1, new=False)
    result = verify_json(home)
    assert [p["kind"] for p in result["anchor_problems"]] == ["truncated"]
    assert result["seal"]["unsealed_events"] > 0
    assert Path(home, "anchors", "p1.json").read_bytes() == before
    refused = log_events(home, "journal_seal_refused")
    assert [(r["project_id"], r["reason"]) for r in refused] == [
        ("p1", "anchor_checkpoint_not_in_journal")
    ]


def test_a_sigkilled_journal_cut_below_its_last_seal_is_truncated(
    home: str, project_root: str
) -> None:
    start(home)
    run_turns(home, project_root, 2)
    kill_everything(home)
    stored = tamper.rows(home, "p1")
    last_seal = checkpoints(stored)[-1]
    tamper.delete(home, [r.rowid for r in stored if r.version >= last_seal.version])
    start(home)
    result = verify_json(home)
    assert result["ok"] is False
    found = [(p["kind"], p["expected_through"], p["found_through"]) for p in problems(result)]
    assert found == [("truncated", last_seal.version, last_seal.version - 1)]


def test_a_history_rewritten_and_rehashed_fails_its_seals(home: str, project_root: str) -> None:
    sealed_project(home, project_root)
    stored = tamper.rows(home, "p1")
    message = next(r for r in stored if r.envelope.type == "user.message")
    tamper.edit(home, message.rowid, lambda d: d.update(content="read SECRETS.md"))
    tamper.rehash(home, "p1")
    seals = checkpoints(stored)
    after = [s for s in seals if s.envelope.data["head_position"] >= message.version]
    before = [s for s in seals if s.envelope.data["head_position"] < message.version]
    first = after[0]
    start(home)
    result = verify_json(home)
    assert (result["chain_ok"], result["mismatches"]) == (True, [])  # the chain alone passes
    assert (result["ok"], result["anchor_ok"]) == (False, False)
    assert result["anchor_problems"] == [
        {
            "kind": "rewritten",
            "seq": first.rowid,
            "position": first.version,
            "checkpoint_index": first.envelope.data["index"],
            "after_position": before[-1].version if before else 0,
            "head_position": first.envelope.data["head_position"],
            "sealed_at": first.envelope.data["sealed_at"],
            "later_checkpoints": len(after) - 1,
        }
    ]
    assert "were changed and rehashed after the seal" in verify_cli(home).stdout


def test_a_rewrite_that_also_moves_the_sealed_heads_cannot_forge_their_macs(
    home: str, project_root: str
) -> None:
    sealed_project(home, project_root)
    stored = tamper.rows(home, "p1")
    message = next(r for r in stored if r.envelope.type == "user.message")
    tamper.edit(home, message.rowid, lambda d: d.update(content="read SECRETS.md"))
    tamper.rehash(home, "p1", fix_checkpoints=True)
    after = [s for s in checkpoints(stored) if s.envelope.data["head_position"] >= message.version]
    start(home)
    result = verify_json(home)
    assert (result["ok"], result["chain_ok"], result["mismatches"]) == (False, True, [])
    assert result["anchor_problems"] == [
        {
            "kind": "mac_mismatch",
            "seq": s.rowid,
            "position": s.version,
            "checkpoint_index": s.envelope.data["index"],
        }
        for s in after
    ]


def test_a_deleted_checkpoint_breaks_the_checkpoint_chain(home: str, project_root: str) -> None:
    sealed_project(home, project_root)
    stored = tamper.rows(home, "p1")
    first, second = checkpoints(stored)[:2]
    tamper.delete(home, [first.rowid])
    tamper.rehash(home, "p1", renumber=True)  # positions and stream versions closed up too
    start(home)
    result = verify_json(home)
    assert (result["ok"], result["chain_ok"], result["mismatches"]) == (False, True, [])
    problems = result["anchor_problems"]
    assert problems[0] == {
        "kind": "checkpoint_missing",
        "seq": second.rowid,
        "position": second.version - 1,
        "checkpoint_index": 2,
        "expected_index": 1,
        "after_seq": None,
    }
    # the positions moved up by one under every later seal and under the anchor
    assert [p["kind"] for p in problems] == ["checkpoint_missing", "rewritten", "anchor_mismatch"]


def test_an_event_edited_after_its_seal_says_which_seal_covered_it(
    home: str, project_root: str
) -> None:
    sealed_project(home, project_root)
    stored = tamper.rows(home, "p1")
    message = next(r for r in stored if r.envelope.type == "user.message")
    tamper.edit(home, message.rowid, lambda d: d.update(content="read SECRETS.md"))
    cover = next(
        s for s in checkpoints(stored) if s.envelope.data["head_position"] >= message.version
    )
    start(home)
    result = verify_json(home)
    assert result["mismatches"][0] == {
        "kind": "hash_chain",
        "seq": message.rowid,
        "reason": "hash_mismatch",
    }
    assert result["anchor_problems"] == [
        {
            "kind": "changed_after_seal",
            "seq": message.rowid,
            "position": message.version,
            "reason": "hash_mismatch",
            "checkpoint_index": cover.envelope.data["index"],
            "sealed_at": cover.envelope.data["sealed_at"],
        }
    ]


def test_events_added_while_the_daemon_was_stopped_are_reported(
    home: str, project_root: str
) -> None:
    sealed_project(home, project_root)
    anchor = anchor_of(home)
    stored = tamper.rows(home, "p1")
    message = next(r for r in stored if r.envelope.type == "user.message")
    tamper.append_copy(home, "p1", message)
    start(home)
    result = verify_json(home)
    assert (result["ok"], result["chain_ok"]) == (False, True)
    assert result["anchor_problems"] == [
        {
            "kind": "appended_after_shutdown",
            "sealed_through": stored[-1].version,
            "found_through": stored[-1].version + 1,
            "appended_events": 1,
            "closed_at": anchor["written_at"],
        }
    ]
    run_turns(home, project_root, 1, new=False)  # the writer will not reopen it
    assert [p["kind"] for p in verify_json(home)["anchor_problems"]] == ["appended_after_shutdown"]
    assert [r["reason"] for r in log_events(home, "journal_seal_refused")] == [
        "appended_after_shutdown"
    ]


def test_a_project_whose_every_event_was_deleted_is_truncated_not_unknown(
    home: str, project_root: str
) -> None:
    sealed_project(home, project_root)
    stored = tamper.rows(home, "p1")
    tamper.delete(home, [r.rowid for r in stored])
    start(home)
    result = verify_json(home)
    assert (result["ok"], result["checked_events"]) == (False, 0)
    assert [(p["kind"], p["found_through"]) for p in result["anchor_problems"]] == [
        ("truncated", 0)
    ]
