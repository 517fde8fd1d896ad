"""The recorder interface (runtime.journal.recorder), run on every backend.

eventsourcing's own recorder test cases (its application-recorder suite, and its check that
two writers' positions never interleave, on which "seq is commit order" rests) run against
Roost's recorder of each kind; the journal-level contract is ``test_journal.py``.
"""

from __future__ import annotations

import os
import tempfile
import uuid
from typing import Any

import pytest
from eventsourcing.persistence import InfrastructureFactory
from eventsourcing.tests.persistence import (
    ApplicationRecorderTestCase,
    NonInterleavingNotificationIDsBaseCase,
)

from runtime.errors import JournalError
from runtime.journal.postgres import RoostPostgresRecorder
from runtime.journal.recorder import JournalBackend, JournalRecorder, journal_backend
from runtime.journal.sqlite import RoostSQLiteRecorder
from runtime.journal.store import journal_env
from runtime.settings_table import JOURNAL_KINDS
from tests.conftest import postgres_skip_reason

_SKIP_TIMED = "benchmarks are measured by soak.journal_bench, never by timed tests"


@pytest.mark.parametrize("kind", JOURNAL_KINDS)
def test_every_journal_kind_has_a_backend_whose_recorder_is_a_journal_recorder(
    kind: str,
) -> None:
    backend = journal_backend(kind)
    assert isinstance(backend, JournalBackend)
    assert issubclass(backend.factory.application_recorder_class, JournalRecorder)


def test_a_kind_outside_the_settings_table_has_no_backend() -> None:
    with pytest.raises(
        JournalError, match=r"^unknown journal kind 'mysql'; use one of 'sqlite', 'postgres'$"
    ):
        journal_backend("mysql")


class SQLiteRecorders:
    """Recorders on a SQLite file in a temporary directory."""

    def setUp(self) -> None:
        self._dir = tempfile.TemporaryDirectory()
        self._factories: list[Any] = []

    def tearDown(self) -> None:
        # eventsourcing's concurrency test leaves reader threads finishing their last
        # select; closing the connections under them crashes sqlite3, so the factories
        # are left to the garbage collector (their files are in a temporary directory).
        self._dir.cleanup()

    def create_recorder(self) -> RoostSQLiteRecorder:
        path = os.path.join(self._dir.name, "recorder.sqlite")
        factory = InfrastructureFactory.construct(journal_env("sqlite", sqlite_path=path))
        self._factories.append(factory)
        recorder = factory.application_recorder()
        assert isinstance(recorder, RoostSQLiteRecorder)
        return recorder


class PostgresRecorders:
    """Recorders in a fresh schema of the real PostgreSQL server (skipped without one)."""

    def setUp(self) -> None:
        reason = postgres_skip_reason()
        if reason:
            pytest.skip(reason)
        import psycopg

        from tests.conftest import POSTGRES_ENV

        self._schema = "roost_rec_" + uuid.uuid4().hex[:12]
        self._conninfo = dict(
            dbname=POSTGRES_ENV["POSTGRES_DBNAME"],
            host=POSTGRES_ENV["POSTGRES_HOST"],
            port=int(POSTGRES_ENV["POSTGRES_PORT"]),
            user=POSTGRES_ENV["POSTGRES_USER"],
            autocommit=True,
        )
        with psycopg.connect(**self._conninfo) as conn:  # type: ignore[arg-type]
            conn.execute(f'CREATE SCHEMA "{self._schema}"')
        self._env = {**POSTGRES_ENV, "POSTGRES_SCHEMA": self._schema}
        self._factories: list[Any] = []

    def tearDown(self) -> None:
        import psycopg

        for factory in self._factories:
            factory.close()
        with psycopg.connect(**self._conninfo) as conn:  # type: ignore[arg-type]
            conn.execute(f'DROP SCHEMA IF EXISTS "{self._schema}" CASCADE')

    def create_recorder(self) -> RoostPostgresRecorder:
        factory = InfrastructureFactory.construct(journal_env("postgres", extra=self._env))
        self._factories.append(factory)
        recorder = factory.application_recorder()
        assert isinstance(recorder, RoostPostgresRecorder)
        return recorder


class TestRoostSQLiteRecorder(SQLiteRecorders, ApplicationRecorderTestCase[RoostSQLiteRecorder]):
    """eventsourcing's application-recorder suite on the durable SQLite recorder."""

    def test_performance(self) -> None:
        pytest.skip(_SKIP_TIMED)

    def test_concurrent_throughput(self) -> None:
        pytest.skip(_SKIP_TIMED)


class TestRoostPostgresRecorder(
    PostgresRecorders, ApplicationRecorderTestCase[RoostPostgresRecorder]
):
    """eventsourcing's application-recorder suite on the PostgreSQL recorder."""

    def test_performance(self) -> None:
        pytest.skip(_SKIP_TIMED)

    def test_concurrent_throughput(self) -> None:
        pytest.skip(_SKIP_TIMED)


class TestSQLiteSeqIsCommitOrder(SQLiteRecorders, NonInterleavingNotificationIDsBaseCase):
    """Two writers' inserts on SQLite get positions that do not interleave."""


class TestPostgresSeqIsCommitOrder(PostgresRecorders, NonInterleavingNotificationIDsBaseCase):
    """Two writers' inserts on PostgreSQL get positions that do not interleave."""
