"""``verify`` reads a project a page at a time: what it finds in a later page is found.

Each history is verified twice, in pages of a few rows and in one page that holds it all
(what ``verify`` did before it read in pages), and the two reports must be equal; each
finding lies beyond the first page.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from events.envelope import Envelope, NewEvent
from runtime.agent.snapshot import CODEC
from runtime.client.replies import VerifyReport
from runtime.daemon.verify import verify_project
from runtime.journal.seal import AnchorStore, Sealer, SealSettings
from runtime.journal.sqlite import RoostSQLiteRecorder
from runtime.journal.store import Journal
from runtime.journal.stored import decode_state, encode_state
from runtime.journal.writer import JournalWriter
from runtime.policy.options import validate_options
from runtime.wire.ops import Call
from tests.integration import journal_tamper
from tests.runtime.journal.test_journal import _identity, make_event

PAGE = 6
"""Rows a page in these tests: every sealed head here (the journal seals after 3 events, at
the end of a batch) is the last row of the page before its checkpoint's."""
WHOLE = 100_000
"""A page that holds every history here."""
OPTIONS = validate_options({"snapshot_every_events": 4})


def _started(options: dict[str, Any]) -> NewEvent:
    return make_event("p1", None, kind="project.started", data={"root": "/r", "options": options})


def _messages(n: int, conversation: str = "c1") -> list[NewEvent]:
    return [make_event("p1", conversation, data={"content": f"m{i}"}) for i in range(n)]


class History:
    """A sealed SQLite journal in ``home`` and its single writer (which writes snapshots)."""

    def __init__(self, home: Path) -> None:
        self.home = str(home)
        anchors = AnchorStore(str(home / "anchors"))
        self.sealer = Sealer(b"k" * 32, anchors, SealSettings(every_events=3, interval_s=0))
        self.writer = JournalWriter(snapshots=CODEC)
        self.writer.store = self.journal()
        self.keys = 0

    def journal(self) -> Journal:
        return Journal(
            "sqlite",
            sqlite_path=journal_tamper.journal_path(self.home),
            sealer=self.sealer,
            redactor=_identity,
        )

    def commit(self, events: list[NewEvent]) -> list[Envelope]:
        self.keys += 1
        (result,) = self.writer.commit([(f"k{self.keys}", events)])
        assert isinstance(result, list), result
        return result

    def build(self) -> None:
        """Two conversations over 40-odd positions, each with snapshots along the way."""
        self.commit([_started(OPTIONS)])
        for _ in range(4):
            self.commit(_messages(3) + _messages(2, "c2"))
            self.writer.write_snapshots()
        self.commit(_messages(3))

    def verify(self, page: int) -> VerifyReport:
        def ask(call: Call[Any], deadline: float) -> Any:
            raise AssertionError(f"nothing runs, nothing is asked: {call.op}")

        with self.journal() as journal:
            return verify_project(journal, "p1", {}, ask, deadline=0.0, page=page)

    def rows(self) -> list[journal_tamper.Row]:
        return journal_tamper.rows(self.home, "p1")

    def close(self) -> None:
        self.writer.close()


@pytest.fixture
def history(tmp_path: Path) -> Iterator[History]:
    h = History(tmp_path)
    h.build()
    yield h
    h.close()


def _paged_and_whole(history: History) -> VerifyReport:
    """The report in pages of ``PAGE``, checked equal to the report in one page."""
    paged = history.verify(PAGE)
    assert paged == history.verify(WHOLE)
    return paged


def test_a_sound_history_verifies_in_pages_with_every_snapshot_and_seal_checked(
    history: History,
) -> None:
    rows = history.rows()
    heads_a_page_back = [
        r.version
        for r in rows
        if r.envelope.type == "journal.checkpoint"
        and (int(r.envelope.data["head_position"]) - 1) // PAGE != (r.version - 1) // PAGE
    ]
    assert heads_a_page_back  # the sealed head is read again for these
    report = _paged_and_whole(history)
    assert (report["ok"], report["mismatches"], report["anchor_problems"]) == (True, [], [])
    assert report["checked_events"] == len(rows) > 4 * PAGE
    assert report["snapshots"] == {"checked": 2, "stale": 0}
    seal = report["seal"]
    assert seal is not None
    assert (seal["sealed_through"], seal["unsealed_events"]) == (
        max(r.version for r in rows if r.envelope.type == "journal.checkpoint"),
        rows[-1].version - seal["sealed_through"],
    )


def test_an_event_changed_in_a_later_page_breaks_the_chain_there(history: History) -> None:
    target = [r for r in history.rows() if r.envelope.type == "user.message"][-4]
    assert target.version > PAGE
    journal_tamper.edit(history.home, target.rowid, lambda data: data.update(content="forged"))
    report = _paged_and_whole(history)
    assert report["mismatches"][0] == {
        "kind": "hash_chain",
        "seq": target.rowid,
        "reason": "hash_mismatch",
    }
    assert report["chain_ok"] is False


def test_events_rewritten_and_rehashed_in_a_later_page_break_the_seal(history: History) -> None:
    target = [r for r in history.rows() if r.envelope.type == "user.message"][-6]
    assert target.version > PAGE
    journal_tamper.edit(history.home, target.rowid, lambda data: data.update(content="forged"))
    journal_tamper.rehash(history.home, "p1")
    report = _paged_and_whole(history)
    assert report["chain_ok"] is True
    assert [p["kind"] for p in report["anchor_problems"]] == ["rewritten"]
    assert report["ok"] is False


def test_events_deleted_in_a_later_page_are_missing_there(history: History) -> None:
    rows = history.rows()
    gone = rows[3 * PAGE + 1]
    journal_tamper.delete(history.home, [gone.rowid])
    journal_tamper.rehash(history.home, "p1", fix_checkpoints=True)
    report = _paged_and_whole(history)
    missing = [p for p in report["anchor_problems"] if p["kind"] == "missing_events"]
    assert missing == [
        {
            "kind": "missing_events",
            "from_position": gone.version,
            "to_position": gone.version,
            "before_seq": rows[3 * PAGE + 2].rowid,
        }
    ]


def _replace_stream_version(home: str, rowid: int, version: int) -> None:
    conn = sqlite3.connect(journal_tamper.journal_path(home))
    try:
        with conn:
            (topic, state) = conn.execute(
                f"SELECT {journal_tamper.TOPIC}, state FROM stored_events WHERE rowid=?", (rowid,)
            ).fetchone()
            envelope = decode_state(state, topic, rowid)
            changed = msgspec.structs.replace(envelope, stream_version=version)
            conn.execute(
                "UPDATE stored_events SET state=? WHERE rowid=?", (encode_state(changed), rowid)
            )
    finally:
        conn.close()


def test_a_stream_version_skipped_in_a_later_page_is_found_there(history: History) -> None:
    target = [r for r in history.rows() if r.envelope.conversation_id == "c2"][-1]
    assert target.version > PAGE
    version = target.envelope.stream_version
    _replace_stream_version(history.home, target.rowid, version + 1)
    journal_tamper.rehash(history.home, "p1")
    report = _paged_and_whole(history)
    assert [m for m in report["mismatches"] if m["kind"] == "stream_version"] == [
        {"kind": "stream_version", "seq": target.rowid, "expected": version, "actual": version + 1}
    ]


def test_snapshots_forged_after_the_first_page_are_found(history: History) -> None:
    journal = history.writer.store
    assert journal is not None
    (c1,) = journal.snapshots("p1", "c1")
    (c2,) = journal.snapshots("p1", "c2")
    assert min(c1.seq, c2.seq) > PAGE
    own = [e for e in journal.read_conversation("p1", "c1") if e.seq <= c1.seq]
    fewer = CODEC.fold(None, own[:-1], project_id="p1", conversation_id="c1", options=OPTIONS)
    assert fewer is not None
    journal.put_snapshot(msgspec.structs.replace(c1, body=fewer))
    journal.put_snapshot(msgspec.structs.replace(c2, head_hash="0" * 64))
    report = _paged_and_whole(history)
    assert report["mismatches"] == [
        {"kind": "snapshot", "conversation_id": "c1", "seq": c1.seq, "code": "snapshot_mismatch"},
        {
            "kind": "snapshot",
            "conversation_id": "c2",
            "seq": c2.seq,
            "code": "snapshot_head_mismatch",
        },
    ]
    journal.put_snapshot(msgspec.structs.replace(c1, format=c1.format + 1))
    assert _paged_and_whole(history)["snapshots"] == {"checked": 1, "stale": 1}


def test_a_snapshot_after_the_project_started_again_with_other_options_verifies(
    tmp_path: Path,
) -> None:
    h = History(tmp_path)
    try:
        h.commit([_started(OPTIONS)])
        h.commit(_messages(6))
        h.writer.write_snapshots()
        narrower = validate_options({**OPTIONS, "context_window_chars": 200})
        h.commit([_started(narrower), *_messages(3), *_messages(4, "c2")])
        h.commit(_messages(6))
        h.writer.write_snapshots()
        journal = h.writer.store
        assert journal is not None
        (c1,) = journal.snapshots("p1", "c1")
        assert c1.seq > PAGE
        report = _paged_and_whole(h)
        assert (report["ok"], report["snapshots"]) == (True, {"checked": 2, "stale": 0})
        forged = CODEC.fold(
            None,
            journal.read_conversation("p1", "c1"),
            project_id="p1",
            conversation_id="c1",
            options=OPTIONS,  # the options before the restart: not the snapshot's
        )
        assert forged is not None and forged != c1.body
        journal.put_snapshot(msgspec.structs.replace(c1, body=forged))
        assert [m["code"] for m in _paged_and_whole(h)["mismatches"]] == ["snapshot_mismatch"]
    finally:
        h.close()


def test_events_committed_while_the_pages_are_read_are_not_chased(
    history: History, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer appending as fast as verify reads must not keep it going: it checks what was
    committed when it began."""
    before = len(history.rows())
    read = RoostSQLiteRecorder.select_stream
    pages = 0

    def busy_writer(self: RoostSQLiteRecorder, *args: Any, **kwargs: Any) -> Any:
        nonlocal pages
        pages += 1
        if pages <= 3:
            history.commit(_messages(PAGE))  # more than a page behind each page read
        return read(self, *args, **kwargs)

    monkeypatch.setattr(RoostSQLiteRecorder, "select_stream", busy_writer)
    report = history.verify(PAGE)
    monkeypatch.undo()

    assert (report["ok"], report["checked_events"]) == (True, before)
    assert len(history.rows()) >= before + 3 * PAGE  # they were committed (and sealed)
