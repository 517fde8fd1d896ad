"""Snapshots on a real daemon: a passivated conversation comes back from its snapshot.

The project snapshots every 10 events and passivates after 50 ms idle. After a few turns
the conversation passivates; its next turn rehydrates it from the snapshot and the events
after it, which the Journal logs (``journal_snapshot_read`` in ``logs/daemon.log``). A
snapshot whose head no longer matches is ignored for the whole history (the turn still
runs, ``journal_snapshot_rejected``), and a forged one fails ``roost verify``.
"""

from __future__ import annotations

import json
import os
import sqlite3
from typing import Any

import msgspec

from runtime.journal.store import Journal
from tests.integration.conftest import READ_TURN, Daemon
from tests.integration.test_fault_injection import PROJECTIONS, replayed
from tests.runtime.daemon_helpers import wait_for

OPTIONS = {"idle_passivation_ms": 50, "snapshot_every_events": 10}


def log_records(home: str, event: str) -> list[dict[str, Any]]:
    """The daemon log's JSON records of ``event``."""
    out = []
    with open(os.path.join(home, "logs", "daemon.log"), encoding="utf-8") as f:
        for line in f:
            if f'"{event}"' in line:
                record = json.loads(line)
                if record.get("event") == event:
                    out.append(record)
    return out


def passivated(c: Any) -> None:
    wait_for(
        lambda: c.diagnostics("p1")["active_conversations"] == [],
        timeout_s=60,
        what="the conversation to be passivated",
    )


def test_a_passivated_conversation_comes_back_from_its_snapshot(
    daemon: Daemon, project_root: str
) -> None:
    db_path = os.path.join(daemon.home, "journal.sqlite")
    with daemon.client(timeout_s=30) as c, Journal.open(daemon.home, "sqlite") as journal:
        c.start_project(project_root, project_id="p1", options=OPTIONS)
        c.start_conversation("p1", conversation_id="c1")
        for i in range(3):
            c.send_message("p1", "c1", "read notes.txt", correlation_id=f"corr-{i}", wait=True)
        wait_for(
            lambda: bool(journal.snapshots("p1", "c1")),
            timeout_s=30,
            what="a snapshot of c1",
        )
        passivated(c)
        (snapshot,) = journal.snapshots("p1", "c1")

        done = c.send_message("p1", "c1", "read notes.txt", correlation_id="corr-back", wait=True)
        assert done["outcome"] == "llm.completed"
        (read,) = [r for r in log_records(daemon.home, "journal_snapshot_read")]
        assert (read["conversation_id"], read["seq"]) == ("c1", snapshot.seq)
        events = journal.read_project("p1")
        assert [e.type for e in events if e.correlation_id == "corr-back"] == READ_TURN
        for key in PROJECTIONS:
            assert c.get_projection("p1", "c1", key) == replayed(events, "c1", key), key
        verified = c.verify("p1")
        assert (verified["ok"], verified["mismatches"]) == (True, [])
        assert verified["snapshots"]["checked"] == 1

        # A snapshot whose head event does not match is ignored: the whole history is read.
        passivated(c)
        with sqlite3.connect(db_path) as db:
            db.execute("UPDATE roost_snapshots SET head_hash=?", ("0" * 64,))
        verified = c.verify("p1")
        assert verified["ok"] is False
        assert [m["code"] for m in verified["mismatches"]] == ["snapshot_head_mismatch"]
        done = c.send_message("p1", "c1", "read notes.txt", correlation_id="corr-bad", wait=True)
        assert done["outcome"] == "llm.completed"
        (rejected,) = log_records(daemon.home, "journal_snapshot_rejected")
        assert (rejected["conversation_id"], rejected["reason"]) == ("c1", "snapshot_head_mismatch")
        events = journal.read_project("p1")
        for key in PROJECTIONS:
            assert c.get_projection("p1", "c1", key) == replayed(events, "c1", key), key

        # A forged snapshot (its head intact, its state changed) fails verify.
        wait_for(
            lambda: journal.snapshots("p1", "c1")[0].head_hash != "0" * 64,
            timeout_s=30,
            what="the refused snapshot to be written again",
        )
        passivated(c)
        (good,) = journal.snapshots("p1", "c1")
        state = msgspec.msgpack.decode(good.body)
        state["tokens_used"] += 1000
        with sqlite3.connect(db_path) as db:
            db.execute("UPDATE roost_snapshots SET body=?", (msgspec.msgpack.encode(state),))
        verified = c.verify("p1")
        assert verified["ok"] is False
        assert verified["mismatches"] == [
            {
                "kind": "snapshot",
                "conversation_id": "c1",
                "seq": good.seq,
                "code": "snapshot_mismatch",
            }
        ]
