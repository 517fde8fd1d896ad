"""The single writer on a real store, without an actor system."""

from __future__ import annotations

from pathlib import Path

from events import catalog as ev
from events.envelope import NewEvent, new_event
from runtime.journal.writer import JournalWriter

AT = "2026-01-02T03:04:05.000Z"


def message(text: str, conversation_id: str = "c1") -> NewEvent:
    return new_event(
        ev.UserMessage(content=text),
        project_id="p1",
        conversation_id=conversation_id,
        at=AT,
        correlation_id="corr-1",
    )


def test_before_the_store_is_open_every_batch_fails_and_reads_are_empty() -> None:
    writer = JournalWriter()
    results = writer.commit([("k1", [message("a")]), ("k2", [message("b")])])
    assert [r["code"] for r in results if isinstance(r, dict)] == ["journal_error"] * 2
    assert writer.read("p1") == []
    assert writer.read_types(["user.message"]) == []
    assert writer.seal("interval") == 0


def test_batches_that_queued_up_commit_together_in_order(tmp_path: Path) -> None:
    writer = JournalWriter()
    assert writer.open(str(tmp_path), "sqlite") is True
    assert writer.open(str(tmp_path), "sqlite") is False  # once
    try:
        first, second = writer.commit([("k1", [message("a")]), ("k2", [message("b", "c2")])])
        assert isinstance(first, list) and isinstance(second, list)
        assert [e.seq for e in first + second] == [1, 2]
        assert [e.data["content"] for e in writer.read("p1")] == ["a", "b"]
        assert [e.data["content"] for e in writer.read("p1", "c2")] == ["b"]
        assert len(writer.read_types(["user.message"])) == 2
    finally:
        writer.close()


def test_a_resent_batch_is_not_committed_twice(tmp_path: Path) -> None:
    writer = JournalWriter()
    writer.open(str(tmp_path), "sqlite")
    try:
        (committed,) = writer.commit([("k1", [message("a")])])
        # the same key twice in one flush: written one by one, the second is the first
        again, twice = writer.commit([("k1", [message("a")]), ("k1", [message("a")])])
        assert committed == again == twice
        assert len(writer.read("p1")) == 1
    finally:
        writer.close()


def test_a_closed_writer_reads_nothing(tmp_path: Path) -> None:
    writer = JournalWriter()
    writer.open(str(tmp_path), "sqlite")
    writer.commit([("k1", [message("a")])])
    assert isinstance(writer.seal("shutdown"), int)
    writer.close()
    assert writer.read("p1") == []


def test_a_deletion_answers_its_summary_or_a_wire_error(tmp_path: Path) -> None:
    writer = JournalWriter()
    assert writer.delete_project("p1", "ops")["error"]["code"] == "journal_error"
    writer.open(str(tmp_path), "sqlite")
    try:
        writer.commit([("k1", [message("a"), message("b")])])
        assert writer.delete_project("p1", "ops")["result"]["deleted_events"] == 2
        assert writer.read("p1") == []
        again = writer.delete_project("p1", "ops")
        assert again["error"]["code"] == "project_not_found"
        (fresh,) = writer.commit([("k1", [message("c")])])  # the key is free again
        assert isinstance(fresh, list) and fresh[0].prev_hash == "0" * 64
    finally:
        writer.close()
