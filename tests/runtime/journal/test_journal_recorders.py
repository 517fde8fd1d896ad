"""eventsourcing's own recorder test cases, run against Roost's recorder subclasses."""

from __future__ import annotations

import os
import tempfile
import uuid
from typing import Any

import pytest
from eventsourcing.tests.persistence import ApplicationRecorderTestCase

from runtime.journal.postgres import RoostPostgresRecorder
from runtime.journal.sqlite import RoostSQLiteRecorder
from runtime.journal.store import journal_env
from tests.conftest import postgres_skip_reason

_SKIP_TIMED = "benchmarks are measured by soak.journal_bench, never by timed tests"


class TestRoostSQLiteRecorder(ApplicationRecorderTestCase[RoostSQLiteRecorder]):
    """eventsourcing's application-recorder suite on the durable SQLite recorder."""

    def setUp(self) -> None:
        self._dir = tempfile.TemporaryDirectory()
        self._factories: list[Any] = []

    def tearDown(self) -> None:
        # eventsourcing's concurrency test leaves reader threads finishing their last
        # select; closing the connections under them crashes sqlite3, so the factories
        # are left to the garbage collector (their files are in a temporary directory).
        self._dir.cleanup()

    def create_recorder(self) -> RoostSQLiteRecorder:
        from eventsourcing.persistence import InfrastructureFactory

        path = os.path.join(self._dir.name, "recorder.sqlite")
        factory = InfrastructureFactory.construct(journal_env("sqlite", sqlite_path=path))
        self._factories.append(factory)
        recorder = factory.application_recorder()
        assert isinstance(recorder, RoostSQLiteRecorder)
        return recorder

    def test_performance(self) -> None:
        pytest.skip(_SKIP_TIMED)

    def test_concurrent_throughput(self) -> None:
        pytest.skip(_SKIP_TIMED)


class TestRoostPostgresRecorder(ApplicationRecorderTestCase[RoostPostgresRecorder]):
    """eventsourcing's application-recorder suite on the PostgreSQL recorder."""

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
        from eventsourcing.persistence import InfrastructureFactory

        factory = InfrastructureFactory.construct(journal_env("postgres", extra=self._env))
        self._factories.append(factory)
        recorder = factory.application_recorder()
        assert isinstance(recorder, RoostPostgresRecorder)
        return recorder

    def test_performance(self) -> None:
        pytest.skip(_SKIP_TIMED)

    def test_concurrent_throughput(self) -> None:
        pytest.skip(_SKIP_TIMED)
