"""The stored form of an envelope (format 2, and format 1 still read) and old journals."""

from __future__ import annotations

import sqlite3
import threading
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import msgspec
import pytest

from events.chain import chain_hash
from events.envelope import GENESIS_HASH, Envelope, NewEvent
from runtime.journal import stored
from runtime.journal.mapper import project_stream_id
from runtime.journal.scope import Scope
from runtime.journal.seal import AnchorStore, Sealer, SealSettings
from runtime.journal.sqlite import RoostSQLiteRecorder
from runtime.journal.sqlite_layout import BATCH_KEY_RETENTION_S, correlation_key
from runtime.journal.store import Journal
from runtime.journal.stored import decode_rows, decode_state, encode_state, state_keys
from tests.runtime.journal.old_format import to_layout_1


def _envelope(**changes: object) -> Envelope:
    base = Envelope(
        seq=0,
        stream_version=3,
        event_id="5df82895-fa46-45ad-8c11-d268fdb217ad",
        type="tool.completed",
        at="2026-11-27T07:35:29.297Z",
        project_id="p1",
        conversation_id="c1",
        correlation_id="corr-0123456789abcdef0123",
        causation_id="3784b443-7f90-4542-84cf-d14be2bc174d",
        data={"call_id": "call-1", "result": {"content": "x"}},
        hash="7ec5bb865c24f04e105c3107faa51abf0f961be7b9ef1b05782fe840ed43fd3c",
        prev_hash=GENESIS_HASH,
    )
    return msgspec.structs.replace(base, **changes)


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"causation_id": None, "conversation_id": None},
        # text that is not the canonical form of a UUID, a hash or a millisecond time
        {"event_id": "ev-later", "causation_id": "5DF82895-FA46-45AD-8C11-D268FDB217AD"},
        {"hash": "7EC5" + "0" * 60, "prev_hash": "not a hash"},
        {"at": "2026-11-27T07:35:29Z"},
        {"at": "2026-11-27T07:35:29.297123Z"},
        {"at": "1969-12-31T23:59:59.999Z"},
        {"data": {"content": "a long result " * 100}},
    ],
)
def test_a_state_decodes_to_the_envelope_that_was_encoded(changes: dict[str, object]) -> None:
    envelope = _envelope(**changes)
    state = encode_state(envelope)
    assert state[:1] in (b"\x02", b"\x03")
    assert decode_state(state, envelope.type, 41) == msgspec.structs.replace(envelope, seq=41)
    assert state_keys(state) == (envelope.conversation_id, envelope.correlation_id)


def test_the_compact_form_is_smaller_and_a_large_state_is_deflated() -> None:
    small = _envelope()
    assert len(encode_state(small)) < len(msgspec.msgpack.encode(small)) // 2
    large = _envelope(data={"content": "a long result " * 100})
    state = encode_state(large)
    assert state[:1] == b"\x03"
    assert len(state) < 200


def test_a_format_1_state_is_still_read() -> None:
    envelope = _envelope()
    state = msgspec.msgpack.encode(envelope)  # what older versions stored
    assert decode_state(state, "ignored: format 1 holds its type", 7) == msgspec.structs.replace(
        envelope, seq=7
    )
    assert state_keys(state) == ("c1", "corr-0123456789abcdef0123")
    assert state_keys(b"not an envelope") == (None, None)


def test_the_hash_is_over_the_envelope_not_the_stored_bytes() -> None:
    event = NewEvent(
        event_id=str(uuid.uuid4()),
        type="user.message",
        at="2026-11-27T07:35:29.297Z",
        project_id="p1",
        conversation_id="c1",
        correlation_id="corr-1",
        data={"content": "hi"},
    )
    digest = chain_hash(GENESIS_HASH, event, 1)
    envelope = Envelope(
        seq=0,
        stream_version=1,
        hash=digest,
        prev_hash=GENESIS_HASH,
        **msgspec.structs.asdict(event),
    )
    back = decode_state(encode_state(envelope), "user.message", 1)
    assert chain_hash(back.prev_hash, back, back.stream_version) == digest


def _event(n: int, conversation: str, correlation: str) -> NewEvent:
    return NewEvent(
        event_id=str(uuid.uuid4()),
        type="user.message",
        at=f"2026-11-27T07:35:{n % 60:02d}.{n % 1000:03d}Z",
        project_id="p1",
        conversation_id=conversation,
        correlation_id=correlation,
        data={"content": f"message {n}"},
    )


def _sealer(tmp_path: Path) -> Sealer:
    return Sealer(b"k" * 32, AnchorStore(str(tmp_path / "anchors")), SealSettings(every_events=4))


def test_a_journal_of_layout_1_and_format_1_opens_reads_verifies_and_takes_appends(
    tmp_path: Path,
) -> None:
    path = str(tmp_path / "journal.sqlite")
    with Journal("sqlite", sqlite_path=path, sealer=_sealer(tmp_path)) as journal:
        for n in range(6):
            journal.append([_event(n, f"c{n % 2}", f"corr-{n}")], key=f"key-{n}")
        before = journal.read_project("p1")
    to_layout_1(path, batch_keys=[f"key-{n}" for n in range(6)])
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 0
        (first,) = conn.execute("SELECT state FROM stored_events LIMIT 1").fetchone()
        assert msgspec.msgpack.decode(first, type=Envelope).project_id == "p1"  # format 1
    conn.close()
    with Journal("sqlite", sqlite_path=path, sealer=_sealer(tmp_path)) as journal:
        assert journal.read_project("p1") == before
        audit = journal.audit("p1")
        assert audit.chain.ok and audit.seals is not None and audit.seals.ok
        assert journal.read_scope("p1", Scope(conversation_id="c1", correlation_id="corr-3")) == [
            before[3]
        ]
        # a retried batch of the old file is still recognised
        assert journal.append([_event(99, "c1", "corr-99")], key="key-2") == [before[2]]
        later = journal.append([_event(n, "c1", "corr-later") for n in range(6, 9)])
        assert (
            journal.read_scope("p1", Scope(conversation_id="c1", correlation_id="corr-later"))
            == later
        )
        assert journal.verify("p1").ok
    with sqlite3.connect(path) as conn:
        layout = conn.execute("PRAGMA user_version").fetchone()[0]
        states = [
            bytes(r[0]) for r in conn.execute("SELECT state FROM stored_events ORDER BY rowid")
        ]
    conn.close()
    assert layout == 0  # the old file keeps its layout; new rows are in format 2
    assert states[-1][:1] in (b"\x02", b"\x03") and states[0][:1] not in (b"\x02", b"\x03")


def test_a_new_journal_has_layout_2(tmp_path: Path) -> None:
    path = str(tmp_path / "journal.sqlite")
    with Journal("sqlite", sqlite_path=path) as journal:
        journal.append([_event(1, "c1", "corr-1")], key="k")
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 2
        oid, key = conn.execute(
            "SELECT originator_id, correlation_key FROM stored_events"
        ).fetchone()
        (stream,) = conn.execute("SELECT stream FROM roost_streams WHERE number=1").fetchone()
        assert stream == project_stream_id("p1").bytes
    conn.close()
    assert oid == 1  # the number of the journal's first stream in roost_streams
    assert key == correlation_key("corr-1")


def test_a_correlation_whose_digest_collides_is_left_out(tmp_path: Path) -> None:
    path = str(tmp_path / "journal.sqlite")
    with Journal("sqlite", sqlite_path=path) as journal:
        mine = journal.append([_event(1, "c1", "corr-mine")])
        other = journal.append([_event(2, "c1", "corr-other")])
        with sqlite3.connect(path) as conn:  # forge a collision of the two digests
            conn.execute(
                "UPDATE stored_events SET correlation_key=? WHERE rowid=?",
                (correlation_key("corr-mine"), other[0].seq),
            )
        conn.close()
        assert (
            journal.read_scope("p1", Scope(conversation_id="c1", correlation_id="corr-mine"))
            == mine
        )
        mine_only = Scope(conversation_id="c1", correlation_id="corr-mine")
        assert journal.count_scope("p1", mine_only) == 1


def test_two_journals_creating_a_file_at_once_create_one_layout(tmp_path: Path) -> None:
    path = str(tmp_path / "journal.sqlite")
    opened: list[Journal] = []
    errors: list[BaseException] = []

    def open_one() -> None:
        try:
            opened.append(Journal("sqlite", sqlite_path=path))
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=open_one) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    try:
        for n, journal in enumerate(opened):  # each its own project: one writer per project
            journal.append([msgspec.structs.replace(_event(n, "c1", "corr"), project_id=f"p{n}")])
        for n, journal in enumerate(opened):
            assert [e.project_id for e in opened[0].read_project(f"p{n}")] == [f"p{n}"]
            assert journal.read_all()[n].project_id == f"p{n}"
    finally:
        for journal in opened:
            journal.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 2
        numbers = conn.execute("SELECT number FROM roost_streams ORDER BY number").fetchall()
    conn.close()
    assert numbers == [(1,), (2,), (3,), (4,)]


def test_a_batch_key_is_kept_for_its_retention_then_dropped(tmp_path: Path) -> None:
    now = [1_800_000_000.0]
    with Journal("sqlite", sqlite_path=str(tmp_path / "journal.sqlite")) as journal:
        recorder = journal._recorder
        assert isinstance(recorder, RoostSQLiteRecorder)
        recorder.layout.clock = lambda: now[0]
        first = journal.append([_event(1, "c1", "corr-1")], key="k1")
        now[0] += BATCH_KEY_RETENTION_S  # k1's generation is old: k2 starts the other one
        journal.append([_event(2, "c1", "corr-2")], key="k2")
        assert journal.append([_event(9, "c1", "corr-9")], key="k1") == first  # still kept
        now[0] += BATCH_KEY_RETENTION_S - 1
        journal.append([_event(3, "c1", "corr-3")], key="k3")  # k2's generation is not old
        assert journal.append([_event(9, "c1", "corr-9")], key="k1") == first
        now[0] += 1
        journal.append([_event(4, "c1", "corr-4")], key="k4")  # k1's generation is emptied
        again = journal.append([_event(9, "c1", "corr-9")], key="k1")
        assert again != first  # the key was dropped, so the batch is appended anew
        assert journal.read_scope("p1", Scope(conversation_id="c1", correlation_id="corr-2"))
        assert [len(journal.append([], key=k)) for k in ("k2", "k3", "k4")] == [1, 1, 1]
        assert journal.verify("p1").ok


def test_rows_of_every_format_decode_as_each_state_does() -> None:
    first = _envelope()
    caused = _envelope(  # caused by the first: its causation is formatted once
        event_id="0f3ac5e1-6c1d-4a43-9d43-1f0b0e7f9c11", causation_id=first.event_id
    )
    odd = _envelope(event_id="ev-later", causation_id=None, at="2026-11-27T07:35:29Z")
    large = _envelope(data={"content": "a long result " * 100})
    states = [encode_state(e) for e in (first, caused, odd, large)]
    states.append(msgspec.msgpack.encode(first))  # format 1
    rows = [(seq, seq, "tool.completed", state) for seq, state in enumerate(states, start=1)]
    assert decode_rows(rows) == [decode_state(state, topic, seq) for seq, _, topic, state in rows]
    assert [e.causation_id for e in decode_rows(rows)][:2] == [first.causation_id, first.event_id]


def test_a_journal_that_runs_for_hours_keeps_a_bounded_number_of_second_texts() -> None:
    """Each stored ``at`` is cached by its second; hours of seconds must not all stay."""
    start = datetime(2026, 11, 27, 7, 0, 0, tzinfo=UTC)
    for second in range(0, 2 * 3600, 3):
        at = (start + timedelta(seconds=second)).strftime("%Y-%m-%dT%H:%M:%S.123Z")
        envelope = _envelope(at=at)
        state = encode_state(envelope)
        assert decode_state(state, envelope.type, 1).at == at
    assert stored._second_text.cache_info().currsize <= 256
    assert stored._epoch_seconds.cache_info().currsize <= 256
