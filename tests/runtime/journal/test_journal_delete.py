"""``Journal.delete_project``: a project's events, batch keys and anchor go; a signed record stays.

The same contract on SQLite and on the real PostgreSQL server.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from events.catalog import JournalProjectDeleted
from events.deletion import DELETIONS_STREAM, deletion_findings, deletion_mac
from runtime.errors import JournalError, ProjectNotFoundError
from runtime.journal.seal import AnchorStore, Sealer, SealSettings
from runtime.journal.store import Batch, Journal
from tests.runtime.journal.test_journal import _identity, make_event

KEY = b"k" * 32


class DeleteContract(ABC):
    """What deleting a project must do on every store."""

    @abstractmethod
    def open_journal(self, sealer: Sealer) -> Journal:
        """A journal on this contract's store (a second call: the same store)."""

    @pytest.fixture
    def sealer(self, tmp_path: Path) -> Sealer:
        anchors = AnchorStore(str(tmp_path / "anchors"))
        return Sealer(KEY, anchors, SealSettings(every_events=3, interval_s=0))

    @pytest.fixture
    def journal(self, sealer: Sealer) -> Iterator[Journal]:
        j = self.open_journal(sealer)
        yield j
        j.close()

    def test_deleting_removes_the_events_keys_and_anchor_and_keeps_a_signed_record(
        self, journal: Journal, sealer: Sealer
    ) -> None:
        journal.append([make_event("p1"), make_event("p1"), make_event("p1")], key="k1")
        journal.append([make_event("p2")], key="k2")
        journal.append([make_event("p1", None, kind="project.stopped", data={})], key="k3")
        assert Path(sealer.anchors.path("p1")).exists()
        stored = len(journal.read_project("p1"))

        result = journal.delete_project("p1", deleted_by="ops@host")

        assert result["deleted_events"] == stored
        assert journal.read_project("p1") == []
        assert not Path(sealer.anchors.path("p1")).exists()
        assert len(journal.read_project("p2")) == 1  # another project is untouched
        (record,) = journal.deletions("p1")
        assert record.seq == result["deletion_seq"]
        assert record.project_id == DELETIONS_STREAM
        deleted = msgspec.convert(record.data, JournalProjectDeleted)
        summary = (deleted.project_id, deleted.events, deleted.deleted_by)
        assert summary == ("p1", stored, "ops@host")
        assert deleted.checkpoint_index >= 1
        assert deleted.mac == deletion_mac(KEY, deleted)
        # The deletion log is sealed at once and verifies like a project.
        audit = journal.audit(DELETIONS_STREAM)
        assert audit.chain.ok and audit.seals is not None and audit.seals.ok, audit.seals
        assert audit.seals.unsealed_events == 0

    def test_a_deleted_key_is_a_new_batch_again_and_the_id_starts_a_new_chain(
        self, journal: Journal, sealer: Sealer
    ) -> None:
        journal.append([make_event("p1"), make_event("p1")], key="k1")
        journal.delete_project("p1")
        again = journal.append([make_event("p1")], key="k1")  # not the deleted batch
        assert [(e.stream_version, e.prev_hash) for e in again] == [(1, "0" * 64)]
        audit = journal.audit("p1")
        assert audit.chain.ok and audit.seals is not None and audit.seals.ok, audit.seals

    def test_a_reopened_writer_chains_the_id_anew_and_seals_it(self, sealer: Sealer) -> None:
        first = self.open_journal(sealer)
        first.append([make_event("p1") for _ in range(4)])
        first.seal("shutdown")
        first.delete_project("p1")
        first.close()
        second = self.open_journal(sealer)
        try:
            second.append([make_event("p1") for _ in range(4)])
            events = second.read_project("p1")
            assert events[0].prev_hash == "0" * 64
            audit = second.audit("p1")
            assert audit.seals is not None and audit.seals.ok, audit.seals
            assert audit.seals.checkpoints >= 1
        finally:
            second.close()

    def test_the_deletion_log_stays_sealed_across_writers(self, sealer: Sealer) -> None:
        first = self.open_journal(sealer)
        first.append([make_event("p1"), make_event("p2")])
        first.delete_project("p1")
        first.seal("shutdown")
        first.close()
        second = self.open_journal(sealer)
        try:
            second.delete_project("p2")
            audit = second.audit(DELETIONS_STREAM)
            assert audit.chain.ok and audit.seals is not None and audit.seals.ok, audit.seals
            assert audit.seals.checkpoints == 2 and audit.seals.anchor == "ok"
            assert second.deletion_audit("p1")[1] == [] and second.deletion_audit("p2")[1] == []
        finally:
            second.close()

    def test_new_events_take_positions_above_the_deleted_ones(self, journal: Journal) -> None:
        out = journal.append([make_event("p1"), make_event("p1")])
        result = journal.delete_project("p1")
        assert result["deletion_seq"] > out[-1].seq
        later = journal.append([make_event("p3")])
        assert later[0].seq > result["deletion_seq"]

    def test_a_batch_of_two_projects_keeps_its_key_for_the_other(self, journal: Journal) -> None:
        first = journal.append_batches(
            [Batch(events=[make_event("p1"), make_event("p2")], key="both")]
        )
        journal.delete_project("p1")
        (again,) = journal.append_batches(
            [Batch(events=[make_event("p1"), make_event("p2")], key="both")]
        )
        assert again == [e for e in first[0] if e.project_id == "p2"]
        assert journal.read_project("p1") == []

    def test_a_project_without_events_is_not_found(self, journal: Journal) -> None:
        with pytest.raises(ProjectNotFoundError, match="no project 'nope'"):
            journal.delete_project("nope")

    def test_nobody_appends_to_the_deletion_log_or_writes_a_deletion_record(
        self, journal: Journal
    ) -> None:
        with pytest.raises(JournalError, match="written by the journal only"):
            journal.append([make_event(DELETIONS_STREAM, None)])
        with pytest.raises(JournalError, match="written by the journal only"):
            journal.append(
                [make_event("p1", None, kind="journal.project_deleted", data={"project_id": "x"})]
            )
        with pytest.raises(JournalError, match="deletion log"):
            journal.delete_project(DELETIONS_STREAM)

    def test_a_forged_record_is_reported_and_a_true_one_is_not(self, journal: Journal) -> None:
        journal.append([make_event("p1")])
        journal.delete_project("p1", deleted_by="ops")
        log = journal.read_project(DELETIONS_STREAM)
        deletions, problems = deletion_findings(log, "p1", KEY)
        assert [d["valid"] for d in deletions] == [True] and problems == []
        _, problems = deletion_findings(log, "p1", b"x" * 32)
        assert [p["kind"] for p in problems] == ["deletion_record_invalid"]


class TestSQLiteDelete(DeleteContract):
    @pytest.fixture(autouse=True)
    def _path(self, tmp_path: Path) -> None:
        self.path = str(tmp_path / "journal.sqlite")

    def open_journal(self, sealer: Sealer) -> Journal:
        return Journal("sqlite", sqlite_path=self.path, redactor=_identity, sealer=sealer)


@pytest.mark.postgres
class TestPostgresDelete(DeleteContract):
    @pytest.fixture(autouse=True)
    def _env(self, postgres_env: dict[str, Any]) -> None:
        self.env = postgres_env

    def open_journal(self, sealer: Sealer) -> Journal:
        return Journal("postgres", env=self.env, redactor=_identity, sealer=sealer)
