"""Shared fixtures: temporary homes, the PostgreSQL server (skipped when unreachable)."""

from __future__ import annotations

import os
import signal
import uuid
from collections.abc import Iterator

import pytest

# The tests press Ctrl-C (SIGINT) on the programs they start. A suite started in the
# background by a shell without job control (`make test &` in a script, CI runners) inherits
# SIGINT ignored, every program it starts too, and Python keeps an ignored SIGINT ignored:
# `roost tail` would never see its Ctrl-C. A handler here is reset to the default in each
# program at exec, so they get SIGINT as from a terminal.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

POSTGRES_ENV = {
    "POSTGRES_DBNAME": os.environ.get("ROOST_TEST_POSTGRES_DBNAME", "test"),
    "POSTGRES_HOST": os.environ.get("ROOST_TEST_POSTGRES_HOST", "127.0.0.1"),
    "POSTGRES_PORT": os.environ.get("ROOST_TEST_POSTGRES_PORT", "5432"),
    "POSTGRES_USER": os.environ.get("ROOST_TEST_POSTGRES_USER", "postgres"),
    "POSTGRES_PASSWORD": os.environ.get("ROOST_TEST_POSTGRES_PASSWORD", ""),
}


def _postgres_unreachable_reason() -> str | None:
    try:
        import psycopg
    except ImportError:  # pragma: no cover - psycopg is a dependency
        return "psycopg is not installed"
    try:
        with psycopg.connect(
            dbname=POSTGRES_ENV["POSTGRES_DBNAME"],
            host=POSTGRES_ENV["POSTGRES_HOST"],
            port=int(POSTGRES_ENV["POSTGRES_PORT"]),
            user=POSTGRES_ENV["POSTGRES_USER"],
            password=POSTGRES_ENV["POSTGRES_PASSWORD"] or None,
            connect_timeout=3,
        ):
            return None
    except Exception as e:
        host = f"{POSTGRES_ENV['POSTGRES_HOST']}:{POSTGRES_ENV['POSTGRES_PORT']}"
        return f"no PostgreSQL reachable at {host} ({type(e).__name__}: {e})"


_PG_REASON: list[str | None] = []


def postgres_skip_reason() -> str | None:
    """Why PostgreSQL tests must skip here, or None when a server answers."""
    if not _PG_REASON:
        _PG_REASON.append(_postgres_unreachable_reason())
    return _PG_REASON[0]


@pytest.fixture
def postgres_env() -> Iterator[dict[str, str]]:
    """eventsourcing POSTGRES_* settings with a fresh schema, dropped afterwards."""
    reason = postgres_skip_reason()
    if reason:
        pytest.skip(reason)
    import psycopg

    schema = "roost_test_" + uuid.uuid4().hex[:12]
    conninfo = dict(
        dbname=POSTGRES_ENV["POSTGRES_DBNAME"],
        host=POSTGRES_ENV["POSTGRES_HOST"],
        port=int(POSTGRES_ENV["POSTGRES_PORT"]),
        user=POSTGRES_ENV["POSTGRES_USER"],
        password=POSTGRES_ENV["POSTGRES_PASSWORD"] or None,
        autocommit=True,
    )
    with psycopg.connect(**conninfo) as conn:  # type: ignore[arg-type]
        conn.execute(f'CREATE SCHEMA "{schema}"')
    try:
        yield {**POSTGRES_ENV, "POSTGRES_SCHEMA": schema}
    finally:
        with psycopg.connect(**conninfo) as conn:  # type: ignore[arg-type]
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


# Whole files whose every test starts a real daemon, runs the docs word for word or a real
# soak: the `slow` part of the suite. `make test-fast` runs everything else (`-m "not slow"`);
# a unit test that takes seconds carries `@pytest.mark.slow` itself.
_SLOW_PATHS = (
    "tests/integration/",
    "tests/soak/test_soak_run.py",
    "tests/soak/test_soak_cli.py",
    "tests/test_docs.py",
    "tests/test_quick_tour.py",
    "tests/test_readme.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the tests under ``_SLOW_PATHS`` as ``slow``."""
    root = config.rootpath
    for item in items:
        relative = item.path.relative_to(root).as_posix()
        if relative.startswith(_SLOW_PATHS):
            item.add_marker(pytest.mark.slow)
