"""Every setting of the daemon, declared once: its config-file key, its variable, its rule.

Plain data, shared by the daemon (``runtime.daemon.settings`` resolves and checks the
values) and the CLI's parser (``--journal`` and ``--log-level`` are built from it), which
must stay thin: this module imports nothing of Roost's and no third-party package.
"""

from __future__ import annotations

from typing import Any, Literal, NamedTuple, get_args

__all__ = [
    "CONFIG_NAME",
    "FLAG_SETTINGS",
    "JOURNAL_KINDS",
    "SETTINGS",
    "JournalKind",
    "Rule",
    "Setting",
]


CONFIG_NAME = "config.toml"
"""The config file a daemon reads from its home when ``--config`` names none."""

JournalKind = Literal["sqlite", "postgres"]
"""The journal backends, closed here only: each is the module ``runtime.journal.<kind>``,
whose ``BACKEND`` implements :mod:`runtime.journal.recorder` (``docs/architecture.md``)."""

JOURNAL_KINDS: tuple[JournalKind, ...] = get_args(JournalKind)
"""The kinds ``ROOST_JOURNAL`` (``journal``) may name; the first is the default."""

Rule = Literal[
    "choice", "count", "positive_count", "seconds", "positive_seconds", "umask", "text", "path"
]
"""How a setting's value is checked (``runtime.daemon.settings`` says what each must be)."""


class Setting(NamedTuple):
    """One daemon setting: its key in the config file, its variable, its rule.

    A ``NamedTuple`` (built by keyword), not a dataclass: ``dataclasses`` loads ``inspect``,
    and every ``roost`` command builds its parser from this table.
    """

    key: str
    """Its name in the config file (``postgres.host`` is ``host`` in ``[postgres]``)."""
    env: str
    """The environment variable that sets it too (and that the daemon's code reads)."""
    rule: Rule
    default: Any = None
    """Shown by ``daemon status`` (the reader's own default, which a test compares);
    None: unset, the reader decides (e.g. ``ROOST_PROJECT_UMASK``: the daemon's umask)."""
    choices: tuple[str, ...] = ()
    secret: bool = False


SETTINGS: tuple[Setting, ...] = (
    Setting(key="journal", env="ROOST_JOURNAL", rule="choice", default=JOURNAL_KINDS[0],
            choices=JOURNAL_KINDS),
    Setting(key="log_level", env="ROOST_LOG_LEVEL", rule="choice", default="info",
            choices=("debug", "info", "warning", "error")),
    Setting(key="log_max_bytes", env="ROOST_LOG_MAX_BYTES", rule="count", default=10485760),
    Setting(key="log_backups", env="ROOST_LOG_BACKUPS", rule="count", default=5),
    Setting(key="idle_timeout_s", env="ROOST_IDLE_TIMEOUT_S", rule="positive_seconds",
            default=60.0),
    Setting(key="max_connections", env="ROOST_MAX_CONNECTIONS", rule="positive_count",
            default=1024),
    Setting(key="max_inflight", env="ROOST_MAX_INFLIGHT", rule="positive_count", default=256),
    Setting(key="project_umask", env="ROOST_PROJECT_UMASK", rule="umask"),
    Setting(key="journal_key_file", env="ROOST_JOURNAL_KEY_FILE", rule="path"),
    Setting(key="seal_every_events", env="ROOST_SEAL_EVERY_EVENTS", rule="count", default=256),
    Setting(key="seal_interval_s", env="ROOST_SEAL_INTERVAL_S", rule="seconds", default=5.0),
    Setting(key="postgres.dbname", env="POSTGRES_DBNAME", rule="text"),
    Setting(key="postgres.host", env="POSTGRES_HOST", rule="text"),
    Setting(key="postgres.port", env="POSTGRES_PORT", rule="positive_count"),
    Setting(key="postgres.user", env="POSTGRES_USER", rule="text"),
    Setting(key="postgres.password", env="POSTGRES_PASSWORD", rule="text", secret=True),
    Setting(key="postgres.schema", env="POSTGRES_SCHEMA", rule="text"),
    Setting(key="postgres.connect_timeout", env="POSTGRES_CONNECT_TIMEOUT",
            rule="positive_count"),
)  # fmt: skip
"""Every setting of the daemon, once: the config file's keys, their variables and rules."""

FLAG_SETTINGS = ("journal", "log_level")
"""The settings ``roost daemon start`` (and ``python -m runtime.daemon``) take as flags."""
