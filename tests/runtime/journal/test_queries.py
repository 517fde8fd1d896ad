"""Conversation queries through the journal's indexes give what the whole-project folds give.

Each journal here is a real store (a SQLite file, or a fresh schema of the real PostgreSQL
server) holding a project of several conversations, project-level ``actor.*`` signals and
the review of a cut call; the reference is :mod:`events.incidents` over
``Journal.read_project``, as the daemon computed it before it read by index.
"""

from __future__ import annotations

import sqlite3
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from events import catalog as ev
from events.envelope import Envelope, NewEvent
from events.incidents import incident_report, incident_timeline
from runtime.errors import BadRequestError, ConversationNotFoundError, ProjectNotFoundError
from runtime.journal.queries import conversation_events, conversation_report, conversation_timeline
from runtime.journal.scope import Scope
from runtime.journal.seal import AnchorStore, Sealer, SealSettings
from runtime.journal.store import Journal
from tests.events.test_projections import Journal as Builder
from tests.events.test_projections import incident_journal, journals
from tests.runtime.journal.old_format import to_layout_1

Opener = Callable[[], Journal]


def _identity(value: Any) -> Any:
    return value


def _new(envelope: Envelope) -> NewEvent:
    return NewEvent(
        event_id=envelope.event_id,
        type=envelope.type,
        at=envelope.at,
        project_id=envelope.project_id,
        conversation_id=envelope.conversation_id,
        correlation_id=envelope.correlation_id,
        causation_id=envelope.causation_id,
        data=envelope.data,
    )


def busy_project() -> Builder:
    """``incident_journal`` plus a second conversation and project-level signals about both."""
    j = incident_journal()
    j.add(ev.ConversationStarted(), conversation_id="c3", correlation_id="corr-3")
    for n in range(4):
        j.add(ev.UserMessage(content=f"c3 {n}"), conversation_id="c3", correlation_id="corr-3")
        j.add(ev.UserMessage(content=f"c1 {n}"), correlation_id=f"corr-{n % 2 + 1}")
    for actor in ("conversation:c1", "conversation:c3", "toolrunner", "stranger"):
        j.add(ev.ActorCrashed(actor=actor, reason="boom"), conversation_id=None)
    j.add(
        ev.ToolChanges(call_id="call-9", conversation_id="c1"),
        conversation_id=None,
        correlation_id="corr-2",
    )
    j.add(ev.LlmCompleted(), correlation_id="corr-2")
    return j


def _fill(journal: Journal, events: list[Envelope]) -> Journal:
    for start in range(0, len(events), 7):  # several batches, as the writer commits them
        journal.append([_new(e) for e in events[start : start + 7]])
    return journal


@pytest.fixture(params=["sqlite", "postgres"])
def opener(request: pytest.FixtureRequest, tmp_path: Path) -> Opener:
    """Opens the same store each call: a SQLite file, or a fresh PostgreSQL schema."""
    if request.param == "sqlite":
        path = str(tmp_path / "journal.sqlite")
        return lambda: Journal("sqlite", sqlite_path=path, redactor=_identity)
    env = request.getfixturevalue("postgres_env")
    return lambda: Journal("postgres", env=env, redactor=_identity)


@pytest.fixture
def busy(opener: Opener) -> Iterator[tuple[Journal, list[Envelope]]]:
    journal = _fill(opener(), busy_project().events)
    try:
        yield journal, journal.read_project("p1")
    finally:
        journal.close()


def _same_timelines(journal: Journal, events: list[Envelope], conversation: str) -> None:
    correlations: list[str | None] = [*sorted({e.correlation_id for e in events}), None]
    for correlation in correlations:
        for limit in (1, 3, 100, 0, "x"):
            got = conversation_timeline(
                journal, "p1", conversation, limit=limit, correlation_id=correlation
            )
            want = incident_timeline(events, "p1", conversation, limit, correlation)
            assert (got.pop("after_seq"), got.pop("before_seq")) == (None, None)
            assert got == want, (conversation, correlation, limit)
        got_report = conversation_report(journal, "p1", conversation, correlation)
        assert got_report == incident_report(events, "p1", conversation, correlation)


def test_timelines_and_reports_by_index_equal_the_whole_project_folds(busy: Any) -> None:
    journal, events = busy
    for conversation in ("c1", "c3"):
        _same_timelines(journal, events, conversation)


def test_a_project_level_signal_reaches_only_the_timelines_it_concerns(busy: Any) -> None:
    journal, _ = busy
    crashed = {
        c: [
            e["data"]["actor"]
            for e in conversation_timeline(journal, "p1", c)["entries"]
            if e["type"] == "actor.crashed"
        ]
        for c in ("c1", "c3")
    }
    assert crashed == {
        "c1": ["conversation:c1", "toolrunner"],
        "c3": ["conversation:c3", "toolrunner"],
    }


def test_pages_forward_and_backward_cover_the_timeline_once(busy: Any) -> None:
    journal, events = busy
    whole = [e["seq"] for e in incident_timeline(events, "p1", "c1", 500)["entries"]]
    forward: list[int] = []
    cursor = 0
    while True:
        page = conversation_timeline(journal, "p1", "c1", limit=4, after_seq=cursor)
        seqs = [e["seq"] for e in page["entries"]]
        assert page["total_entries"] == len(whole)
        if not seqs:
            break
        forward += seqs
        cursor = seqs[-1]
    backward: list[int] = []
    before: int | None = None
    while True:
        page = conversation_timeline(journal, "p1", "c1", limit=4, before_seq=before)
        seqs = [e["seq"] for e in page["entries"]]
        if not seqs:
            break
        backward = seqs + backward
        before = seqs[0]
    assert forward == backward == whole
    window = conversation_timeline(journal, "p1", "c1", limit=100, after_seq=5, before_seq=12)
    assert [e["seq"] for e in window["entries"]] == [s for s in whole if 5 < s < 12]


def test_a_window_with_no_seq_inside_is_a_bad_request(busy: Any) -> None:
    journal, _ = busy
    with pytest.raises(BadRequestError) as caught:
        conversation_timeline(journal, "p1", "c1", after_seq=9, before_seq=9)
    assert caught.value.details["reason"] == "empty_seq_window"
    assert "before_seq (9) must be greater than after_seq (9)" in str(caught.value)


def test_unknown_projects_and_conversations_are_reported(busy: Any) -> None:
    journal, _ = busy
    with pytest.raises(ProjectNotFoundError):
        conversation_timeline(journal, "nope", "c1")
    with pytest.raises(ConversationNotFoundError):
        conversation_report(journal, "p1", "c2")  # has events, was never started


def test_conversation_events_read_one_page_without_the_rest(busy: Any) -> None:
    journal, events = busy
    last = conversation_events(journal, "p1", "c3", limit=2)
    assert [e.seq for e in last] == [
        e["seq"] for e in incident_timeline(events, "p1", "c3", 2)["entries"]
    ]
    assert journal.read_conversation("p1", "c3") == [e for e in events if e.conversation_id == "c3"]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(built=journals())
def test_random_conversations_give_the_same_timelines_and_reports(built: Builder) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        journal = Journal("sqlite", sqlite_path=f"{tmp}/j.sqlite", redactor=_identity)
        try:
            _fill(journal, built.events)
            _same_timelines(journal, journal.read_project("p1"), "c1")
        finally:
            journal.close()


def test_checkpoints_of_a_sealed_journal_stay_out_of_the_timeline(tmp_path: Path) -> None:
    sealer = Sealer(b"k" * 32, AnchorStore(str(tmp_path / "anchors")), SealSettings(every_events=3))
    journal = Journal("sqlite", sqlite_path=str(tmp_path / "j.sqlite"), sealer=sealer)
    try:
        _fill(journal, busy_project().events)
        events = journal.read_project("p1")
        assert any(e.type == "journal.checkpoint" for e in events)
        _same_timelines(journal, events, "c1")
    finally:
        journal.close()


# --- a journal written before the index columns ----------------------------------------


def _to_old_sqlite_schema(path: str) -> None:
    """Make the file what older Roost versions wrote: no index columns, no indexes."""
    to_layout_1(path, index_columns=False)
    with sqlite3.connect(path) as conn:
        columns = [row[1] for row in conn.execute("PRAGMA table_info(stored_events)")]
    conn.close()
    assert columns == ["originator_id", "originator_version", "topic", "state"]


def test_a_journal_of_the_old_schema_is_migrated_when_opened(tmp_path: Path) -> None:
    path = str(tmp_path / "journal.sqlite")
    with Journal("sqlite", sqlite_path=path, redactor=_identity) as journal:
        _fill(journal, busy_project().events)
        before = journal.read_project("p1")
    _to_old_sqlite_schema(path)
    with Journal("sqlite", sqlite_path=path, redactor=_identity) as journal:
        assert journal.read_project("p1") == before
        _same_timelines(journal, before, "c1")
        assert journal.verify("p1").ok
        later = NewEvent(
            event_id="ev-later",
            type="user.message",
            at="2024-05-01T13:00:00.000Z",
            project_id="p1",
            conversation_id="c3",
            correlation_id="corr-3",
            data=ev.payload_to_data(ev.UserMessage(content="after the migration")),
        )
        journal.append([later])
        assert journal.read_conversation("p1", "c3")[-1].event_id == "ev-later"


def test_a_postgres_journal_of_the_old_schema_is_migrated_when_opened(
    postgres_env: dict[str, str],
) -> None:
    import psycopg

    with Journal("postgres", env=postgres_env, redactor=_identity) as journal:
        _fill(journal, busy_project().events)
        before = journal.read_project("p1")
    schema = postgres_env["POSTGRES_SCHEMA"]
    with psycopg.connect(
        dbname=postgres_env["POSTGRES_DBNAME"],
        host=postgres_env["POSTGRES_HOST"],
        port=int(postgres_env["POSTGRES_PORT"]),
        user=postgres_env["POSTGRES_USER"],
        password=postgres_env["POSTGRES_PASSWORD"] or None,
        autocommit=True,
    ) as conn:
        conn.execute(
            f'ALTER TABLE "{schema}".roostjournal_events '
            "DROP COLUMN conversation_id, DROP COLUMN correlation_id"
        )
    with Journal("postgres", env=postgres_env, redactor=_identity) as journal:
        assert journal.read_project("p1") == before
        _same_timelines(journal, before, "c1")
        assert journal.count_scope("p1", Scope(conversation_id="c3")) == 5


def test_a_timeline_page_decodes_the_rows_it_returns_not_the_project(tmp_path: Path) -> None:
    journal = Journal("sqlite", sqlite_path=str(tmp_path / "j.sqlite"), redactor=_identity)
    try:
        _fill(journal, busy_project().events)
        noise = Builder()
        for n in range(300):  # another conversation's history, larger than the page by far
            noise.add(ev.UserMessage(content=f"noise {n}"), conversation_id="c9")
        journal.append([_new(e) for e in noise.events])
        decoded: list[int] = []
        decode_rows = journal._mapper.decode_rows

        def counting(rows: list[tuple[int, int, str, bytes]]) -> list[Envelope]:
            decoded.append(len(rows))
            return decode_rows(rows)

        journal._mapper.decode_rows = counting  # type: ignore[method-assign]
        page = conversation_timeline(journal, "p1", "c1", limit=3)
        assert len(page["entries"]) == 3
        # the page; the 6 project-level actor.* and tool.changes events, twice (page and
        # count); the conversation.started found; its last event (its count): not the ~340
        assert decoded == [1, 3, 6, 6, 1]
    finally:
        journal.close()


def test_a_conversation_is_rehydrated_from_its_own_rows(tmp_path: Path) -> None:
    journal = Journal("sqlite", sqlite_path=str(tmp_path / "j.sqlite"), redactor=_identity)
    try:
        _fill(journal, busy_project().events)
        decoded: list[int] = []
        decode_rows = journal._mapper.decode_rows

        def counting(rows: list[tuple[int, int, str, bytes]]) -> list[Envelope]:
            decoded.append(len(rows))
            return decode_rows(rows)

        journal._mapper.decode_rows = counting  # type: ignore[method-assign]
        events = journal.read_conversation("p1", "c3")
        assert [e.conversation_id for e in events] == ["c3"] * 5
        assert decoded == [5]  # not the project's 33
        assert journal.read_conversation("p1", "c3", after_seq=events[2].seq) == events[3:]
    finally:
        journal.close()


def test_two_journals_opening_an_old_file_at_once_both_open_it(tmp_path: Path) -> None:
    path = str(tmp_path / "journal.sqlite")
    with Journal("sqlite", sqlite_path=path, redactor=_identity) as journal:
        _fill(journal, busy_project().events)
    _to_old_sqlite_schema(path)
    opened: list[Journal] = []
    errors: list[BaseException] = []

    def open_one() -> None:
        try:
            opened.append(Journal("sqlite", sqlite_path=path, redactor=_identity))
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=open_one) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    for journal in opened:
        assert len(journal.read_conversation("p1", "c3")) == 5
        journal.close()
