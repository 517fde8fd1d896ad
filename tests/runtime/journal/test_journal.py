"""The journal contract, run against SQLite and against the real PostgreSQL server."""

from __future__ import annotations

import sqlite3
import threading
import uuid
from abc import ABC, abstractmethod
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from events.envelope import NewEvent
from events.seal import Anchor
from runtime.errors import ConcurrencyError, JournalError
from runtime.journal.seal import AnchorStore, Sealer, SealSettings
from runtime.journal.store import Batch, Journal
from runtime.journal.stored import decode_state, encode_state


def _identity(value: Any) -> Any:
    return value


def make_event(
    project: str = "p1",
    conversation: str | None = "c1",
    *,
    kind: str = "user.message",
    data: dict[str, Any] | None = None,
    event_id: str | None = None,
) -> NewEvent:
    return NewEvent(
        event_id=event_id or str(uuid.uuid4()),
        type=kind,
        at="2026-11-22T10:00:00.000Z",
        project_id=project,
        conversation_id=conversation,
        correlation_id="corr-00000000000000000001",
        data=data if data is not None else {"content": "hello"},
    )


class JournalContract(ABC):
    """Behaviour every journal store must have."""

    writers = 1
    """Journals that may append to the store at once (each to its own projects)."""

    @abstractmethod
    def open_journal(self, **kwargs: Any) -> Journal:
        """Open a journal on this contract's store (a second call: the same store)."""

    @abstractmethod
    def delete_events(self, seqs: list[int]) -> None:
        """Delete stored events behind the journal's back, as a database-only attacker."""

    @pytest.fixture
    def sealer(self, tmp_path: Path) -> Sealer:
        """Seals every 3 events, with anchors in a temporary directory."""
        anchors = AnchorStore(str(tmp_path / "anchors"))
        return Sealer(b"k" * 32, anchors, SealSettings(every_events=3, interval_s=0))

    @pytest.fixture
    def journal(self) -> Iterator[Journal]:
        j = self.open_journal()
        yield j
        j.close()

    def test_append_assigns_increasing_seqs_and_per_stream_versions(self, journal: Journal) -> None:
        out = journal.append(
            [make_event(conversation="c1"), make_event(conversation=None), make_event()]
        )
        seqs = [e.seq for e in out]
        assert seqs == sorted(seqs) and len(set(seqs)) == 3
        assert [e.stream_version for e in out] == [1, 1, 2]
        assert [e.conversation_id for e in out] == ["c1", None, "c1"]

    def test_a_retried_batch_with_the_same_key_is_not_appended_twice(
        self, journal: Journal
    ) -> None:
        batch = [make_event(), make_event()]
        first = journal.append(batch, key="batch-1")
        again = journal.append(batch, key="batch-1")
        assert again == first
        assert len(journal.read_project("p1")) == 2

    def test_a_key_committed_in_a_multi_batch_append_is_recognised_alone(
        self, journal: Journal
    ) -> None:
        a, b = [make_event()], [make_event(project="p2")]
        first = journal.append_batches([Batch(events=a, key="ka"), Batch(events=b, key="kb")])
        mixed = journal.append_batches(
            [Batch(events=b, key="kb"), Batch(events=[make_event()], key="kc")]
        )
        assert mixed[0] == first[1]
        assert mixed[1][0].stream_version == 2
        assert len(journal.read_project("p1")) == 2
        assert len(journal.read_project("p2")) == 1

    def test_two_batches_sharing_a_key_in_one_append_are_refused(self, journal: Journal) -> None:
        with pytest.raises(JournalError, match=r"^two batches in one append share"):
            journal.append_batches(
                [Batch(events=[make_event()], key="k"), Batch(events=[make_event()], key="k")]
            )

    def test_reads_by_project_conversation_and_global_position_agree(
        self, journal: Journal
    ) -> None:
        journal.append([make_event("p1", "c1"), make_event("p2", "c9"), make_event("p1", "c2")])
        journal.append([make_event("p1", "c1")])
        p1 = journal.read_project("p1")
        assert [e.conversation_id for e in p1] == ["c1", "c2", "c1"]
        assert [e.stream_version for e in journal.read_conversation("p1", "c1")] == [1, 2]
        everything = journal.read_all(after_seq=0, limit=100)
        assert [e.seq for e in everything] == sorted(e.seq for e in everything)
        assert len(everything) == 4
        tail = journal.read_all(after_seq=everything[1].seq, limit=1)
        assert tail == [everything[2]]
        assert list(journal.iter_all(page=1)) == everything
        assert journal.max_seq() == everything[-1].seq

    def test_the_hash_chain_links_every_event_of_a_project(self, journal: Journal) -> None:
        journal.append([make_event(), make_event(conversation=None)])
        journal.append([make_event(conversation="c2")])
        events = journal.read_project("p1")
        assert events[0].prev_hash == "0" * 64
        assert [e.prev_hash for e in events[1:]] == [e.hash for e in events[:-1]]
        report = journal.verify("p1")
        assert (report.ok, report.checked_events) == (True, 3)

    def test_a_reopened_journal_continues_the_chain_and_versions(self) -> None:
        first = self.open_journal()
        first.append([make_event(), make_event()])
        first.close()
        second = self.open_journal()
        try:
            out = second.append([make_event()])
            assert out[0].stream_version == 3
            assert second.verify("p1").ok
        finally:
            second.close()

    def test_a_second_writer_on_the_same_project_gets_a_concurrency_error(
        self, journal: Journal
    ) -> None:
        journal.append([make_event()])
        other = self.open_journal()
        try:
            other.append([make_event()])
            with pytest.raises(ConcurrencyError, match=r"^another writer appended to p1"):
                journal.append([make_event()])
        finally:
            other.close()
        journal.forget("p1")
        assert journal.append([make_event()])[0].stream_version == 3

    def test_data_is_redacted_before_it_is_appended(self) -> None:
        def redactor(value: Any) -> Any:
            if isinstance(value, dict):
                return {k: ("[REDACTED]" if k == "secret" else v) for k, v in value.items()}
            return value

        j = self.open_journal(redactor=redactor)
        try:
            out = j.append([make_event(data={"secret": "hunter2", "content": "x"})])
            assert out[0].data == {"secret": "[REDACTED]", "content": "x"}
            stored = j.read_project("p1")[0]
            assert stored.data == {"secret": "[REDACTED]", "content": "x"}
            assert j.verify("p1").ok
        finally:
            j.close()

    def test_a_project_is_sealed_every_n_events_by_chained_checkpoints(
        self, sealer: Sealer
    ) -> None:
        with self.open_journal(sealer=sealer) as j:
            acked = [j.append([make_event()]) for _ in range(7)]
            assert all(len(a) == 1 for a in acked)  # checkpoints are not in a batch's answer
            events = j.read_project("p1")
            audit = j.audit("p1")
        assert [e.type for e in events] == (["user.message"] * 3 + ["journal.checkpoint"]) * 2 + [
            "user.message"
        ]
        first, second = events[3].data, events[7].data
        assert (first["index"], first["head_position"], first["head_hash"]) == (
            1,
            3,
            events[2].hash,
        )
        assert (first["reason"], first["prev_checkpoint"]) == ("count", "0" * 64)
        assert (second["index"], second["prev_checkpoint"]) == (2, first["mac"])
        assert (events[3].conversation_id, events[3].stream_version) == (None, 1)
        assert audit.seals is not None
        assert (audit.seals.ok, audit.seals.sealed_through, audit.seals.unsealed_events) == (
            True,
            8,
            1,
        )
        stored = sealer.anchors.read("p1")
        assert isinstance(stored, Anchor)
        assert (stored.checkpoint.mac, stored.checkpoint_seq, stored.closed) == (
            second["mac"],
            events[7].seq,
            False,
        )

    def test_a_stopping_project_is_sealed_in_the_same_transaction(self, sealer: Sealer) -> None:
        with self.open_journal(sealer=sealer) as j:
            j.append([make_event()])
            out = j.append([make_event(kind="project.stopped", conversation=None, data={})])
            events = j.read_project("p1")
        assert [e.type for e in events] == ["user.message", "project.stopped", "journal.checkpoint"]
        assert events[2].data["reason"] == "project_stopped"
        assert events[2].seq == out[0].seq + 1

    def test_only_the_journal_writes_checkpoints(self, sealer: Sealer) -> None:
        forged = make_event(kind="journal.checkpoint", conversation=None, data={"index": 1})
        with self.open_journal(sealer=sealer) as j:
            with pytest.raises(
                JournalError, match=r"^journal\.checkpoint events are written by the journal only$"
            ):
                j.append([forged])
            assert j.read_project("p1") == []

    def test_a_shutdown_seal_closes_the_anchor_and_the_next_writer_reopens_it(
        self, sealer: Sealer
    ) -> None:
        with self.open_journal(sealer=sealer) as j:
            j.append([make_event(), make_event()])
            assert j.seal("shutdown") == 1
            assert j.seal("shutdown") == 0  # nothing new to seal; the anchor stays closed
        closed = sealer.anchors.read("p1")
        assert isinstance(closed, Anchor)
        assert (closed.closed, closed.checkpoint.reason) == (True, "shutdown")
        with self.open_journal(sealer=sealer) as j:
            j.append([make_event()])
            reopened = sealer.anchors.read("p1")
            assert isinstance(reopened, Anchor)
            assert (reopened.closed, reopened.checkpoint) == (False, closed.checkpoint)
            audit = j.audit("p1")
        assert audit.seals is not None
        assert (audit.seals.ok, audit.seals.anchor, audit.seals.unsealed_events) == (True, "ok", 1)

    def test_a_writer_never_seals_over_a_journal_cut_below_its_anchor(self, sealer: Sealer) -> None:
        with self.open_journal(sealer=sealer) as j:
            j.append([make_event() for _ in range(4)])
            j.seal("shutdown")
            events = j.read_project("p1")
        before = sealer.anchors.read("p1")
        self.delete_events([e.seq for e in events[-2:]])  # an event and the last checkpoint
        with self.open_journal(sealer=sealer) as j:
            out = j.append([make_event() for _ in range(4)])  # appends still work, unsealed
            assert [e.stream_version for e in out] == [4, 5, 6, 7]
            j.seal("shutdown")
            audit = j.audit("p1")
        assert sealer.anchors.read("p1") == before
        assert audit.seals is not None
        assert [p["kind"] for p in audit.seals.problems] == ["truncated"]
        assert audit.seals.unsealed_events == 7

    def test_a_secret_split_over_a_rounds_deltas_is_redacted_as_one_text(self) -> None:
        j = self.open_journal(redactor=None)
        try:
            round_a, round_b = str(uuid.uuid4()), str(uuid.uuid4())
            chunks = ["key ghp_a1B2c3D4e5", "F6g7H8i9J0k1L2m3N4", "o5P6q7R8 done"]
            deltas = [
                msgspec.structs.replace(
                    make_event(kind="assistant.delta", data={"content": chunk}),
                    causation_id=round_a,
                )
                for chunk in chunks
            ]
            other = msgspec.structs.replace(  # another round: never joined with round A
                make_event(kind="assistant.delta", data={"content": "ghp_a1B2c3D4e5"}),
                causation_id=round_b,
            )
            out = j.append([*deltas, other])
            stored = [e.data["content"] for e in j.read_project("p1")]
            assert [e.data["content"] for e in out] == stored
            assert stored == ["key ", "", "[REDACTED:github_token] done", "ghp_a1B2c3D4e5"]
            assert [e.event_id for e in out] == [e.event_id for e in [*deltas, other]]
            assert j.verify("p1").ok
        finally:
            j.close()

    def test_the_deterministic_models_delta_chunks_are_redacted_as_one_text(self) -> None:
        j = self.open_journal(redactor=None)
        try:
            llm = {"assistant_text": "ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"}
            llm["delta_chunks"] = ["ghp_a1B2c3D4e5F6g7", "H8i9J0k1L2m3N4o5P6q7R8"]
            out = j.append([make_event(data={"content": "go", "llm": llm})])
            assert out[0].data["llm"] == {
                "assistant_text": "[REDACTED:github_token]",
                "delta_chunks": ["", "[REDACTED:github_token]"],
            }
        finally:
            j.close()

    def test_a_secret_in_a_correlation_or_causation_id_is_redacted(self) -> None:
        j = self.open_journal(redactor=None)
        try:
            event = msgspec.structs.replace(
                make_event(),
                correlation_id="corr-sk-proj-abcDEF1234567890abcdefGHIJ",
                causation_id="ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8",
            )
            out = j.append([event])
            stored = j.read_project("p1")[0]
            assert (stored.correlation_id, stored.causation_id) == (
                "corr-[REDACTED:openai_key]",
                "[REDACTED:github_token]",
            )
            assert (out[0].correlation_id, out[0].causation_id) == (
                stored.correlation_id,
                stored.causation_id,
            )
            assert j.verify("p1").ok
        finally:
            j.close()

    def test_a_journals_own_redactor_replaces_the_whole_step(self, journal: Journal) -> None:
        event = msgspec.structs.replace(
            make_event(kind="assistant.delta", data={"content": "ghp_a1B2c3D4e5"}),
            correlation_id="corr-ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8",
        )
        stored = journal.append([event])
        assert stored[0].correlation_id == event.correlation_id
        assert stored[0].data == {"content": "ghp_a1B2c3D4e5"}

    def test_the_store_reports_integrity_ok(self, journal: Journal) -> None:
        journal.append([make_event()])
        assert journal.integrity_check() == "ok"

    def test_a_tailing_reader_misses_no_event_that_concurrent_writers_commit(self) -> None:
        # seq is commit order, which `tail` relies on: a reader that asks for what comes
        # after the last seq it saw never finds a lower seq committed later.
        writers = [self.open_journal() for _ in range(self.writers)]
        reader = self.open_journal()
        start = reader.max_seq()
        errors: list[BaseException] = []

        def write(journal: Journal, project: str) -> None:
            try:
                for _ in range(80 // len(writers)):
                    journal.append([make_event(project) for _ in range(3)])
            except BaseException as e:
                errors.append(e)

        threads = [threading.Thread(target=write, args=(w, f"p{i}")) for i, w in enumerate(writers)]
        for t in threads:
            t.start()
        seen: list[int] = []
        cursor = start
        try:
            while any(t.is_alive() for t in threads):
                chunk = reader.read_all(after_seq=cursor, limit=1000)
                seen.extend(e.seq for e in chunk)
                cursor = chunk[-1].seq if chunk else cursor
            for t in threads:
                t.join()
            seen.extend(e.seq for e in reader.read_all(after_seq=cursor, limit=1000))
            everything = [e.seq for e in reader.read_all(after_seq=start, limit=1000)]
        finally:
            for j in (*writers, reader):
                j.close()
        assert errors == []
        assert len(everything) == 80 * 3
        assert seen == everything


class TestSQLiteJournal(JournalContract):
    """The contract on the default SQLite file (its one writer is the Journal actor)."""

    @pytest.fixture(autouse=True)
    def _path(self, tmp_path: Path) -> None:
        self.path = str(tmp_path / "journal.sqlite")

    def open_journal(self, **kwargs: Any) -> Journal:
        kwargs.setdefault("redactor", _identity)
        return Journal("sqlite", sqlite_path=self.path, **kwargs)

    def delete_events(self, seqs: list[int]) -> None:
        conn = sqlite3.connect(self.path)
        with conn:
            conn.executemany("DELETE FROM stored_events WHERE rowid=?", [(s,) for s in seqs])
        conn.close()

    def test_the_file_is_in_wal_mode_with_full_sync(self, journal: Journal) -> None:
        journal.append([make_event()])
        conn = sqlite3.connect(self.path)
        try:
            assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        finally:
            conn.close()
        pool = journal._app.factory.datastore.pool  # type: ignore[attr-defined]
        conn_wrapper = pool.get_connection(is_writer=False)
        try:
            sync = conn_wrapper._sqlite_conn.execute("PRAGMA synchronous").fetchone()[0]
        finally:
            pool.put_connection(conn_wrapper)
        assert sync == 2  # FULL

    def test_verify_detects_a_changed_event_in_the_file(self, journal: Journal) -> None:
        journal.append([make_event(), make_event(), make_event()])
        conn = sqlite3.connect(self.path)
        row = conn.execute(
            "SELECT rowid, (SELECT topic FROM roost_topics WHERE number=stored_events.topic), "
            "state FROM stored_events ORDER BY rowid LIMIT 1 OFFSET 1"
        ).fetchone()
        envelope = decode_state(row[2], row[1], row[0])
        tampered = msgspec.structs.replace(envelope, data={**envelope.data, "content": "tampered"})
        with conn:
            conn.execute(
                "UPDATE stored_events SET state=? WHERE rowid=?",
                (encode_state(tampered), row[0]),
            )
        conn.close()
        report = journal.verify("p1")
        assert report.ok is False
        assert [(b.seq, b.reason) for b in report.breaks] == [(row[0], "hash_mismatch")]

    def test_verify_detects_a_removed_event_in_the_file(self, journal: Journal) -> None:
        out = journal.append([make_event(), make_event(), make_event()])
        conn = sqlite3.connect(self.path)
        with conn:
            conn.execute("DELETE FROM stored_events WHERE rowid=?", (out[1].seq,))
        conn.close()
        report = journal.verify("p1")
        assert [(b.seq, b.reason) for b in report.breaks] == [(out[2].seq, "prev_hash_mismatch")]

    def test_opening_a_journal_in_a_missing_directory_fails_clearly(self, tmp_path: Path) -> None:
        with pytest.raises(JournalError, match=r"^cannot open the sqlite journal"):
            Journal(
                "sqlite", sqlite_path=str(tmp_path / "missing" / "j.sqlite"), redactor=_identity
            )


class TestPostgresJournal(JournalContract):
    """The same contract on the real PostgreSQL server (skipped when none answers)."""

    writers = 2  # daemons sharing the server

    @pytest.fixture(autouse=True)
    def _env(self, postgres_env: dict[str, str]) -> None:
        self.env = postgres_env

    def open_journal(self, **kwargs: Any) -> Journal:
        kwargs.setdefault("redactor", _identity)
        return Journal("postgres", env=self.env, **kwargs)

    def delete_events(self, seqs: list[int]) -> None:
        import psycopg

        env = self.env
        with psycopg.connect(
            dbname=env["POSTGRES_DBNAME"],
            host=env["POSTGRES_HOST"],
            port=int(env["POSTGRES_PORT"]),
            user=env["POSTGRES_USER"],
            password=env["POSTGRES_PASSWORD"] or None,
            autocommit=True,
        ) as conn:
            conn.execute(
                f'DELETE FROM "{env["POSTGRES_SCHEMA"]}".roostjournal_events '
                "WHERE notification_id = ANY(%s)",
                (seqs,),
            )
