"""The PostgreSQL settings, checked before the journal opens: one line naming what is wrong.

``eventsourcing`` reports a missing setting as a bare ``OSError``, keeps retrying a server
that refuses connections for ``POSTGRES_CONNECT_TIMEOUT`` (30 s by default) before a
``PoolTimeout`` that no longer says why, and fails on a missing schema deep inside its table
creation. :func:`check_postgres_settings` connects once, directly, and raises
:class:`~runtime.errors.JournalError` (``journal_error``) with ``{setting, fix}`` details and
a message that names the setting to change.
"""

from __future__ import annotations

from collections.abc import Mapping

from runtime.errors import JournalError

__all__ = ["check_postgres_settings"]

_REQUIRED = (
    ("POSTGRES_DBNAME", "the database name"),
    ("POSTGRES_HOST", "the server's host name or address"),
    ("POSTGRES_USER", "the user name"),
    (
        "POSTGRES_PASSWORD",
        "the password; set it empty (POSTGRES_PASSWORD=) for trust authentication",
    ),
)

CHECK_TIMEOUT_S = 5
"""Seconds the check waits for the server (less when ``POSTGRES_CONNECT_TIMEOUT`` is lower)."""


def check_postgres_settings(env: Mapping[str, str]) -> None:
    """Raise ``JournalError`` when the ``POSTGRES_*`` settings in ``env`` cannot work.

    Checks that the required settings are present, that the server answers and accepts the
    user, and that ``POSTGRES_SCHEMA`` (when set) exists. ``POSTGRES_GET_PASSWORD_TOPIC``
    replaces the password; such a setup is left to ``eventsourcing``.
    """
    if env.get("POSTGRES_GET_PASSWORD_TOPIC"):
        return
    for name, what in _REQUIRED:
        if env.get(name) is None:
            raise JournalError(
                f"{name} is not set, and the PostgreSQL journal (ROOST_JOURNAL=postgres) "
                f"needs it in the daemon's environment: {what}",
                setting=name,
                fix=f"set {name}",
            )
    import psycopg  # noqa: PLC0415 - only a PostgreSQL journal needs it

    host, port = env["POSTGRES_HOST"], env.get("POSTGRES_PORT") or "5432"
    where = f"{env['POSTGRES_USER']}@{host}:{port}/{env['POSTGRES_DBNAME']}"
    timeout = CHECK_TIMEOUT_S
    if (env.get("POSTGRES_CONNECT_TIMEOUT") or "").strip().isdigit():
        timeout = max(1, min(timeout, int(env["POSTGRES_CONNECT_TIMEOUT"])))
    try:
        conn = psycopg.connect(
            dbname=env["POSTGRES_DBNAME"],
            host=host,
            port=port,
            user=env["POSTGRES_USER"],
            password=env["POSTGRES_PASSWORD"] or None,
            connect_timeout=timeout,
            autocommit=True,
        )
    except psycopg.Error as e:
        raise JournalError(
            f"cannot connect to PostgreSQL as {where}: {_first_line(e)}; check POSTGRES_HOST, "
            "POSTGRES_PORT, POSTGRES_USER, POSTGRES_PASSWORD and POSTGRES_DBNAME",
            setting="POSTGRES_HOST",
            server=f"{host}:{port}",
            fix="check the POSTGRES_* settings",
        ) from None
    with conn:
        schema = env.get("POSTGRES_SCHEMA") or ""
        if schema:
            found = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,))
            if found.fetchone() is None:
                raise JournalError(
                    f"the schema POSTGRES_SCHEMA={schema!r} does not exist in {where}: create "
                    f'it (CREATE SCHEMA "{schema}") or set POSTGRES_SCHEMA to an existing one',
                    setting="POSTGRES_SCHEMA",
                    schema=schema,
                    fix=f'CREATE SCHEMA "{schema}"',
                )


def _first_line(error: BaseException) -> str:
    """The first line of a driver error (psycopg adds hints on further lines)."""
    text = str(error).strip()
    return (text.splitlines() or [type(error).__name__])[0].strip()
