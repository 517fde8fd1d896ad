"""Conversation snapshots in the journal: written by the writer, checked on read, deleted.

The same contract on SQLite and on the real PostgreSQL server, through the single writer
(:class:`runtime.journal.writer.JournalWriter`) with the agent loop's codec, as the Journal
actor runs it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import pytest

from events.envelope import Envelope, NewEvent
from runtime.agent.core import ConversationCore
from runtime.agent.snapshot import CODEC, encode_snapshot
from runtime.journal.store import Journal
from runtime.journal.writer import SNAPSHOT_ON_READ_EVENTS, JournalWriter
from runtime.policy.options import validate_options
from tests.runtime.journal.test_journal import _identity, make_event

OPTIONS = validate_options({"snapshot_every_events": 4})


def started() -> NewEvent:
    return make_event("p1", None, kind="project.started", data={"root": "/r", "options": OPTIONS})


def messages(n: int, conversation: str = "c1") -> list[NewEvent]:
    return [make_event("p1", conversation, data={"content": f"m{i}"}) for i in range(n)]


def core_of(events: list[Envelope], snapshot: bytes | None = None) -> ConversationCore:
    core = ConversationCore(
        project_id="p1", conversation_id="c1", options=OPTIONS, clock=lambda: datetime.now(UTC)
    )
    if snapshot is None:
        core.load(events)
    else:
        core.rehydrate(events, [], recovering=False, snapshot=snapshot)
    return core


class SnapshotContract(ABC):
    """What snapshots must do on every store."""

    @abstractmethod
    def open_journal(self) -> Journal:
        """A journal on this contract's store."""

    @pytest.fixture
    def writer(self) -> Iterator[JournalWriter]:
        writer = JournalWriter(snapshots=CODEC)
        writer.store = self.open_journal()
        writer.commit([("k0", [started()])])
        yield writer
        writer.close()

    def commit(self, writer: JournalWriter, key: str, events: list[NewEvent]) -> list[Envelope]:
        (result,) = writer.commit([(key, events)])
        assert isinstance(result, list), result
        return result

    def test_a_conversation_past_its_interval_gets_a_snapshot_that_rehydration_uses(
        self, writer: JournalWriter
    ) -> None:
        first = self.commit(writer, "k1", messages(3))
        assert writer.snapshots_due() is False
        assert writer.write_snapshots() == []
        second = self.commit(writer, "k2", messages(2) + messages(5, "c2"))
        assert writer.snapshots_due() is True
        done = writer.write_snapshots()
        assert [(d["conversation_id"], d["seq"]) for d in done] == [
            ("c1", second[1].seq),
            ("c2", second[-1].seq),
        ]
        later = self.commit(writer, "k3", messages(2))
        read = writer.read_rehydration("p1", "c1")
        assert read.snapshot is not None and read.rejected is None
        assert (read.snapshot.seq, read.snapshot.head_hash) == (second[1].seq, second[1].hash)
        assert read.events == later
        everything = first + second[:2] + later
        restored = core_of(read.events, read.snapshot.body)
        assert encode_snapshot(restored) == encode_snapshot(core_of(everything))
        assert writer.snapshot_counts == {"written": 2, "used": 1, "rejected": 0}

    def test_the_next_snapshot_folds_onto_the_last_one(self, writer: JournalWriter) -> None:
        events = self.commit(writer, "k1", messages(4))
        writer.write_snapshots()
        events += self.commit(writer, "k2", messages(5))
        (done,) = writer.write_snapshots()
        assert (done["seq"], done["events"]) == (events[-1].seq, 5)
        (stored,) = writer.store.snapshots("p1", "c1")  # type: ignore[union-attr]
        assert stored.body == encode_snapshot(core_of(events))

    def test_a_snapshot_that_does_not_check_out_is_ignored_for_the_whole_history(
        self, writer: JournalWriter
    ) -> None:
        events = self.commit(writer, "k1", messages(5))
        writer.write_snapshots()
        journal = writer.store
        assert journal is not None
        (good,) = journal.snapshots("p1", "c1")
        forged = {
            "snapshot_head_mismatch": msgspec.structs.replace(good, head_hash="0" * 64),
            "snapshot_format": msgspec.structs.replace(good, format=good.format + 1),
            "snapshot_decode_error": msgspec.structs.replace(good, body=b"\xc1not msgpack"),
        }
        for reason, bad in forged.items():
            journal.put_snapshot(bad)
            read = writer.read_rehydration("p1", "c1")
            assert (read.snapshot, read.rejected) == (None, reason)
            assert read.events == events
        assert writer.snapshot_counts["rejected"] == 3
        writer.commit([("k2", messages(4))])
        (done,) = writer.write_snapshots()  # a refused snapshot is rebuilt from the history
        assert done["events"] == 9
        assert writer.read_rehydration("p1", "c1").rejected is None

    def test_deleting_the_project_deletes_its_snapshots(self, writer: JournalWriter) -> None:
        self.commit(writer, "k1", messages(4))
        other = make_event("p2", "c1")
        writer.commit([("k2", [other])])
        writer.write_snapshots()
        journal = writer.store
        assert journal is not None
        assert len(journal.snapshots("p1")) == 1
        writer.delete_project("p1", "tests")
        assert journal.snapshots("p1") == []
        assert writer.read_rehydration("p1", "c1").events == []

    def test_snapshot_every_events_0_writes_none(self, writer: JournalWriter) -> None:
        options = {**OPTIONS, "snapshot_every_events": 0}
        restart = make_event("p1", None, kind="project.started", data={"options": options})
        self.commit(writer, "k1", [restart, *messages(SNAPSHOT_ON_READ_EVENTS)])
        assert writer.snapshots_due() is False
        writer.read_rehydration("p1", "c1")
        assert writer.snapshots_due() is False

    def test_a_rehydration_that_folds_many_events_makes_the_conversation_due(
        self, writer: JournalWriter
    ) -> None:
        options = {**OPTIONS, "snapshot_every_events": 1000}
        restart = make_event("p1", None, kind="project.started", data={"options": options})
        self.commit(writer, "k1", [restart, *messages(SNAPSHOT_ON_READ_EVENTS - 1)])
        writer.read_rehydration("p1", "c1")
        assert writer.snapshots_due() is False  # a short read
        events = self.commit(writer, "k2", messages(1))
        assert writer.read_rehydration("p1", "c1").snapshot is None
        assert writer.snapshots_due() is True
        (done,) = writer.write_snapshots()
        assert done["seq"] == events[-1].seq
        read = writer.read_rehydration("p1", "c1")
        assert (read.snapshot is not None, read.events) == (True, [])


class TestSQLiteSnapshots(SnapshotContract):
    @pytest.fixture(autouse=True)
    def _path(self, tmp_path: Path) -> None:
        self.path = str(tmp_path / "journal.sqlite")

    def open_journal(self) -> Journal:
        return Journal("sqlite", sqlite_path=self.path, redactor=_identity)


@pytest.mark.postgres
class TestPostgresSnapshots(SnapshotContract):
    @pytest.fixture(autouse=True)
    def _env(self, postgres_env: dict[str, Any]) -> None:
        self.env = postgres_env

    def open_journal(self) -> Journal:
        return Journal("postgres", env=self.env, redactor=_identity)
