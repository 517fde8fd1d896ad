"""The Journal's snapshot thread: writes what is due when woken, survives a failure, stops."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from runtime.agent.snapshot import CODEC
from runtime.journal.snapshot_worker import SnapshotWorker
from runtime.journal.store import Journal
from runtime.journal.writer import JournalWriter, SnapshotOutcome
from tests.runtime.journal.test_journal import _identity
from tests.runtime.journal.test_snapshots import messages, started


class _Reports:
    def __init__(self) -> None:
        self.outcomes: list[SnapshotOutcome] = []
        self.errors: list[Exception] = []
        self.changed = threading.Condition()

    def report(self, outcomes: list[SnapshotOutcome]) -> None:
        with self.changed:
            self.outcomes.extend(outcomes)
            self.changed.notify_all()

    def failed(self, error: Exception) -> None:
        with self.changed:
            self.errors.append(error)
            self.changed.notify_all()

    def wait(self, done: Any) -> None:
        with self.changed:
            assert self.changed.wait_for(done, timeout=60), (self.outcomes, self.errors)


@pytest.fixture
def writer(tmp_path: Path) -> Any:
    writer = JournalWriter(snapshots=CODEC)
    writer.store = Journal("sqlite", sqlite_path=str(tmp_path / "j.sqlite"), redactor=_identity)
    writer.commit([("k0", [started()])])  # snapshot_every_events: 4
    yield writer
    writer.close()


def test_a_woken_worker_writes_every_snapshot_due_beyond_one_call(writer: JournalWriter) -> None:
    reports = _Reports()
    worker = SnapshotWorker(writer, reports.report, reports.failed)
    worker.start()
    try:
        batch = [event for c in ("c1", "c2", "c3", "c4", "c5") for event in messages(5, c)]
        (committed,) = writer.commit([("k1", batch)])
        assert isinstance(committed, list)
        assert writer.snapshots_due()
        worker.wake()
        reports.wait(lambda: len(reports.outcomes) == 5)  # two calls of two, then one
    finally:
        worker.close()
    assert not writer.snapshots_due()
    assert sorted(o["conversation_id"] for o in reports.outcomes) == ["c1", "c2", "c3", "c4", "c5"]
    assert worker.passes == 3 and not reports.errors
    rehydration = writer.read_rehydration("p1", "c3")
    assert rehydration.snapshot is not None and rehydration.events == []


def test_a_failed_call_is_reported_and_the_next_wake_writes(
    writer: JournalWriter, monkeypatch: pytest.MonkeyPatch
) -> None:
    reports = _Reports()
    worker = SnapshotWorker(writer, reports.report, reports.failed)
    real = writer.write_snapshots
    calls = iter([OSError("disk gone"), None])

    def flaky(limit: int = 2) -> list[SnapshotOutcome]:
        error = next(calls, None)
        if error is not None:
            raise error
        return real(limit)

    monkeypatch.setattr(writer, "write_snapshots", flaky)
    worker.start()
    try:
        writer.commit([("k1", messages(5))])
        worker.wake()
        reports.wait(lambda: reports.errors)
        assert writer.snapshots_due()  # the failure left it due
        worker.wake()
        reports.wait(lambda: reports.outcomes)
    finally:
        worker.close()
    assert [type(e).__name__ for e in reports.errors] == ["OSError"]
    assert [o["conversation_id"] for o in reports.outcomes] == ["c1"]


def test_close_stops_the_thread() -> None:
    writer = JournalWriter(snapshots=CODEC)  # no store: nothing is ever due
    worker = SnapshotWorker(writer, lambda _: None, lambda _: None)
    worker.start()
    worker.close()
    assert not worker._thread.is_alive()
