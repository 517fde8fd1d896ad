"""The PostgreSQL settings check: one ``journal_error`` naming the setting and its fix."""

from __future__ import annotations

import pytest

from runtime.errors import JournalError
from runtime.journal.pg_check import check_postgres_settings

BASE = {
    "POSTGRES_DBNAME": "roost",
    "POSTGRES_HOST": "127.0.0.1",
    "POSTGRES_USER": "roost",
    "POSTGRES_PASSWORD": "",
}


@pytest.mark.parametrize("missing", sorted(BASE))
def test_a_missing_required_setting_is_named(missing: str) -> None:
    env = {k: v for k, v in BASE.items() if k != missing}
    with pytest.raises(JournalError) as caught:
        check_postgres_settings(env)
    assert caught.value.message.startswith(f"{missing} is not set, and the PostgreSQL journal")
    assert caught.value.details["setting"] == missing


def test_a_server_that_refuses_connections_is_reported_with_the_settings_to_check() -> None:
    with pytest.raises(JournalError) as caught:
        check_postgres_settings({**BASE, "POSTGRES_PORT": "1"})
    message = caught.value.message
    assert message.startswith("cannot connect to PostgreSQL as roost@127.0.0.1:1/roost: ")
    assert message.endswith(
        "; check POSTGRES_HOST, POSTGRES_PORT, POSTGRES_USER, POSTGRES_PASSWORD and POSTGRES_DBNAME"
    )
    assert "\n" not in message


@pytest.mark.postgres
def test_a_schema_that_does_not_exist_is_named_with_the_statement_that_makes_it(
    postgres_env: dict[str, str],
) -> None:
    check_postgres_settings(postgres_env)  # the fixture's own schema exists
    with pytest.raises(JournalError) as caught:
        check_postgres_settings({**postgres_env, "POSTGRES_SCHEMA": "roost_missing"})
    assert caught.value.details == {
        "setting": "POSTGRES_SCHEMA",
        "schema": "roost_missing",
        "fix": 'CREATE SCHEMA "roost_missing"',
    }
