"""The daemon's settings: flag > environment > config file > default, checked once."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from runtime.daemon.config import SETTINGS, DaemonConfig, config_for_home, resolve_settings
from runtime.daemon.settings import daemon_argv
from runtime.errors import ConfigError
from runtime.journal.seal import SealSettings
from runtime.logfiles import rotation_settings


def write(path: Path, text: str, mode: int = 0o600) -> str:
    path.write_text(text, encoding="utf-8")
    path.chmod(mode)
    return str(path)


def test_each_setting_comes_from_a_flag_else_the_environment_else_the_file_else_default(
    tmp_path: Path,
) -> None:
    config = write(
        tmp_path / "roost.toml",
        'journal = "postgres"\nlog_level = "error"\nidle_timeout_s = 7\n'
        '[postgres]\nhost = "db.internal"\npassword = "hunter2-secret"\n',
    )
    env = {"ROOST_LOG_LEVEL": "warning", "ROOST_IDLE_TIMEOUT_S": "12.5"}
    settings = resolve_settings(
        str(tmp_path / "home"), config_file=config, flags={"journal": "sqlite"}, environ=env
    )
    report = settings.report()
    assert report["journal"] == {"value": "sqlite", "source": "flag"}
    assert report["log_level"] == {"value": "warning", "source": "env"}
    assert report["idle_timeout_s"] == {"value": 12.5, "source": "env"}
    assert report["postgres.host"] == {"value": "db.internal", "source": "file"}
    assert report["postgres.password"] == {"value": "***", "source": "file"}
    assert report["max_connections"] == {"value": 1024, "source": "default"}
    assert "postgres.user" not in report  # unset PostgreSQL settings are left out
    # what a flag or the file gave is set in the daemon's environment; the rest is not
    assert settings.environ() == {
        "ROOST_JOURNAL": "sqlite",
        "POSTGRES_HOST": "db.internal",
        "POSTGRES_PASSWORD": "hunter2-secret",
    }
    daemon = config_for_home(str(tmp_path / "home"), settings=settings)
    assert (daemon.journal, daemon.idle_timeout_s, daemon.config_file) == ("sqlite", 12.5, config)
    assert daemon.settings == report


def test_the_homes_config_toml_is_read_when_no_file_is_named(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    assert resolve_settings(str(home), environ={}).config_file is None
    write(home / "config.toml", "max_connections = 3\n")
    settings = resolve_settings(str(home), environ={})
    assert settings.config_file == str(home / "config.toml")
    assert settings.report()["max_connections"] == {"value": 3, "source": "file"}


@pytest.mark.parametrize(
    ("text", "reason", "message"),
    [
        ('log_levl = "debug"\n', "unknown_setting", "unknown setting 'log_levl' in the config"),
        ("[postgres]\nhots = 'x'\n", "unknown_setting", "did you mean 'postgres.host'?"),
        ('journal = "mysql"\n', "invalid_setting", "journal in the config file"),
        ("idle_timeout_s = 0\n", "invalid_setting", "a positive number of seconds, got 0"),
        ('max_connections = "10"\n', "invalid_setting", "a positive integer, got '10'"),
        ("log_backups = true\n", "invalid_setting", "a non-negative integer, got True"),
        ("project_umask = 22\n", "invalid_setting", "an octal umask such as '022'"),
        ('project_umask = "999"\n', "invalid_setting", "an octal umask"),
        ('journal_key_file = "key"\n', "invalid_setting", "an absolute path"),
        ("[postgres]\npassword = 5\n", "invalid_setting", "got ***"),
        ('[postgres]\nhost = ""\n', "invalid_setting", "a non-empty string"),
        ("journal = \n", "invalid_toml", "is not valid TOML"),
    ],
)
def test_a_bad_config_file_is_bad_config_naming_the_key_and_the_fix(
    tmp_path: Path, text: str, reason: str, message: str
) -> None:
    config = write(tmp_path / "c.toml", text)
    with pytest.raises(ConfigError) as caught:
        resolve_settings(str(tmp_path / "home"), config_file=config, environ={})
    assert caught.value.code == "bad_config"
    assert caught.value.details["reason"] == reason
    assert message in caught.value.message
    assert config in caught.value.message


def test_a_config_file_others_may_change_or_that_is_missing_is_refused(tmp_path: Path) -> None:
    shared = write(tmp_path / "shared.toml", 'log_level = "debug"\n', mode=0o664)
    with pytest.raises(ConfigError, match=r"chmod go-w") as caught:
        resolve_settings(str(tmp_path), config_file=shared, environ={})
    assert caught.value.details["reason"] == "config_not_private"
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    write(home / "config.toml", "log_backups = 2\n", mode=0o664)  # the private home's own: ok
    assert resolve_settings(str(home), environ={}).values["log_backups"] == 2
    with pytest.raises(ConfigError, match=r"cannot read the config file .*missing\.toml"):
        resolve_settings(str(tmp_path), config_file=str(tmp_path / "missing.toml"), environ={})


def test_a_bad_variable_or_flag_is_bad_config_too(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^ROOST_MAX_CONNECTIONS must be a positive integer"):
        resolve_settings(str(tmp_path), environ={"ROOST_MAX_CONNECTIONS": "many"})
    with pytest.raises(ConfigError, match=r"^--log-level must be one of"):
        resolve_settings(str(tmp_path), flags={"log_level": "loud"}, environ={})
    with pytest.raises(ConfigError, match=r"^POSTGRES_PORT must be a positive integer, got 'x'$"):
        resolve_settings(str(tmp_path), environ={"POSTGRES_PORT": "x"})


def test_every_setting_has_its_own_key_and_variable() -> None:
    assert len({s.key for s in SETTINGS}) == len({s.env for s in SETTINGS}) == len(SETTINGS)


def test_the_defaults_status_shows_are_those_of_the_code_that_reads_the_settings() -> None:
    shown = {s.key: s.default for s in SETTINGS}
    daemon = DaemonConfig(home="/h", socket_path="/h/s", pid_path="/h/p", log_path="/h/l")
    seals = SealSettings()
    assert shown["journal"] == daemon.journal
    assert shown["idle_timeout_s"] == daemon.idle_timeout_s
    assert shown["max_connections"] == daemon.max_connections
    assert (shown["log_max_bytes"], shown["log_backups"]) == rotation_settings({})
    assert (shown["seal_every_events"], shown["seal_interval_s"]) == (
        seals.every_events,
        seals.interval_s,
    )


def test_the_daemon_process_gets_the_file_and_flags_as_arguments(tmp_path: Path) -> None:
    argv = daemon_argv("c.toml", {"journal": "sqlite", "log_level": None})
    assert argv == ["--config", os.path.abspath("c.toml"), "--journal", "sqlite"]
