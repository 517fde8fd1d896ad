"""The daemon's settings, resolved once: a flag, else its variable, else the config file.

Every setting of the daemon is declared once in :data:`SETTINGS`: its key in the config
file (TOML: ``HOME/config.toml``, or the file ``--config`` names), the environment
variable that sets it too, and its rule. :func:`resolve_settings` takes each from a flag
of ``roost daemon start`` (:data:`FLAG_SETTINGS`), else its variable, else the file, else
its default, and checks it: an unknown key or a bad value is a ``ConfigError``
(``bad_config``, ``details.reason``) and the daemon does not start. The daemon then sets
the variables of what a flag or the file gave in its own environment
(:meth:`Settings.environ`), so the code that reads them (the journal, logging, seals,
``eventsourcing``'s ``POSTGRES_*``) and every actor process see the one result;
``roost daemon status`` shows each value and its source (:meth:`Settings.report`).
``runtime.daemon.config`` re-exports this module's API.
"""

from __future__ import annotations

import math
import os
import stat
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypedDict

import msgspec

from runtime.errors import ConfigError
from runtime.guard.home.roost_home import resolve_home
from runtime.settings_table import CONFIG_NAME, FLAG_SETTINGS, SETTINGS, Rule, Setting

__all__ = [
    "CONFIG_NAME",
    "FLAG_SETTINGS",
    "SETTINGS",
    "Setting",
    "SettingReport",
    "SettingValue",
    "Settings",
    "daemon_argv",
    "read_config_file",
    "resolve_settings",
]


MAX_CONFIG_BYTES = 1 << 20


_RULES: dict[str, str] = {
    "count": "a non-negative integer",
    "positive_count": "a positive integer",
    "seconds": "a non-negative number",
    "positive_seconds": "a positive number of seconds",
    "umask": "an octal umask such as '022' (a string)",
    "text": "a non-empty string",
    "path": "an absolute path (a string)",
}


SettingValue = str | int | float | None
"""A setting's value once checked (None: unset, the reader's default applies)."""

_Checker = Callable[[Setting, Any, bool], SettingValue]
"""A rule's check: ``(setting, raw value, read from text) -> value``, else ``ValueError``."""


class SettingReport(TypedDict):
    """One setting as ``daemon status`` shows it."""

    value: SettingValue
    """Its value (a secret as ``***``)."""
    source: str
    """``flag``, ``env``, ``file`` or ``default``."""


class Settings(msgspec.Struct, frozen=True, kw_only=True):
    """The daemon's settings, resolved: each value and where it came from."""

    config_file: str | None
    """The config file read (None: there was none)."""
    values: dict[str, Any]
    """Key → value (None: unset, the reader's default applies)."""
    sources: dict[str, str]
    """Key → ``flag``, ``env``, ``file`` or ``default``."""

    def environ(self) -> dict[str, str]:
        """The variables to set in the daemon's environment: what a flag or the file gave."""
        by_key = {s.key: s for s in SETTINGS}
        return {
            by_key[key].env: _as_env(self.values[key])
            for key, source in self.sources.items()
            if source in ("flag", "file")
        }

    def report(self) -> dict[str, SettingReport]:
        """Key → ``{value, source}`` for ``daemon status`` (secrets shown as ``***``)."""
        out: dict[str, SettingReport] = {}
        for setting in SETTINGS:
            value = self.values.get(setting.key)
            source = self.sources.get(setting.key, "default")
            if setting.key.startswith("postgres.") and value is None:
                continue  # unset PostgreSQL settings: not worth a line each
            shown = "***" if setting.secret and value is not None else value
            out[setting.key] = {"value": shown, "source": source}
        return out


def _as_env(value: SettingValue) -> str:
    return str(value)


def _choice(setting: Setting, value: Any, from_text: bool) -> SettingValue:
    text = value.strip().lower() if from_text and isinstance(value, str) else value
    if text not in setting.choices:
        raise ValueError(f"one of {', '.join(repr(c) for c in setting.choices)}")
    return text


def _number(value: Any, from_text: bool, parse: Callable[[str], float]) -> Any:
    """``value`` read from text (None when it does not parse), or as given; a bool is None."""
    if isinstance(value, bool):
        return None
    if not from_text:
        return value
    try:
        return parse(str(value).strip())
    except ValueError:
        return None


def _ruled(read: Callable[[Setting, Any, bool], Any], ok: Callable[[Any], bool]) -> _Checker:
    """``read`` a value, then refuse it (``ValueError``: what its rule wants) unless ``ok``."""

    def check(setting: Setting, value: Any, from_text: bool) -> SettingValue:
        read_value: SettingValue = read(setting, value, from_text)
        if not ok(read_value):
            raise ValueError(_RULES[setting.rule])
        return read_value

    return check


def _count(lowest: int) -> _Checker:
    return _ruled(
        lambda setting, value, from_text: _number(value, from_text, int),
        lambda number: isinstance(number, int) and number >= lowest,
    )


def _seconds(above: Callable[[float], bool]) -> _Checker:
    return _ruled(
        lambda setting, value, from_text: _number(value, from_text, float),
        lambda number: isinstance(number, int | float) and above(number) and number < math.inf,
    )


def _string(setting: Setting, value: Any) -> str:
    """``value`` as a string, non-empty but for a secret (a password may be empty)."""
    if isinstance(value, bool):
        raise ValueError(_RULES[setting.rule])
    if not isinstance(value, str) or not (value.strip() or setting.secret):
        raise ValueError("a string" if setting.secret else _RULES[setting.rule])
    return value


def _text(setting: Setting, value: Any, from_text: bool) -> SettingValue:
    return _string(setting, value)


_umask = _ruled(
    lambda setting, value, from_text: _string(setting, value).strip(),
    lambda text: (
        1 <= len(text) <= 4 and all(c in "01234567" for c in text) and int(text, 8) <= 0o777
    ),
)


def _path(setting: Setting, value: Any, from_text: bool) -> SettingValue:
    path = os.path.expanduser(_string(setting, value))
    if not from_text and not os.path.isabs(path):
        raise ValueError(_RULES[setting.rule])  # a variable keeps its old meaning: as given
    return path


_CHECKS: dict[Rule, _Checker] = {
    "choice": _choice,
    "count": _count(0),
    "positive_count": _count(1),
    "seconds": _seconds(lambda n: n >= 0),
    "positive_seconds": _seconds(lambda n: n > 0),
    "umask": _umask,
    "text": _text,
    "path": _path,
}
"""Each rule's check: ``(setting, value, from_text) -> value``; ``ValueError`` names what
the value must be."""


def _check(setting: Setting, value: Any, *, from_text: bool) -> SettingValue:
    """``value`` as the setting's type; ``ValueError`` (what it must be) when it is not."""
    return _CHECKS[setting.rule](setting, value, from_text)


def _flat(document: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
    """The config file's ``(key, value)`` pairs, ``[postgres]``'s as ``postgres.<key>``."""
    for key, value in document.items():
        if key == "postgres" and isinstance(value, dict):
            yield from ((f"postgres.{k}", v) for k, v in value.items())
        else:
            yield key, value


_FILE_RULES: tuple[tuple[Callable[[os.stat_result, bool], bool], str, str], ...] = (
    (
        lambda info, in_home: not stat.S_ISREG(info.st_mode),
        "config_unreadable",
        "the config file {path} is not a regular file",
    ),
    (
        lambda info, in_home: (
            info.st_uid != os.geteuid() or bool(info.st_mode & 0o022 and not in_home)
        ),
        "config_not_private",
        "the config file {path} can be changed by another user than the daemon's; "
        "make it yours and `chmod go-w {path}`",
    ),
)
"""What the config file must be (``(broken, reason, message)``; ``in_home``: the home's own
file, whose private directory keeps others out, may be group- or world-writable)."""


def read_config_file(path: str, *, in_home: bool = False) -> dict[str, SettingValue]:
    """The settings of a TOML config file, flat (``postgres.host``), checked.

    It must be the daemon user's and, unless it is the home's own (``in_home``: the home
    is private, ``0700``), not writable by group or others.

    Raises ``ConfigError`` (``bad_config``, ``details.reason``: ``config_unreadable``,
    ``config_not_private``, ``invalid_toml``, ``unknown_setting``, ``invalid_setting``).
    """
    import tomllib  # noqa: PLC0415 - only a daemon's start reads a config file

    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as e:
        raise ConfigError(
            f"cannot read the config file {path}: {e.strerror or e}",
            reason="config_unreadable",
            file=path,
        ) from e
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        for broken, reason, message in _FILE_RULES:
            if broken(info, in_home):
                raise ConfigError(message.format(path=path), reason=reason, file=path)
        raw = f.read(MAX_CONFIG_BYTES + 1)
    try:
        if len(raw) > MAX_CONFIG_BYTES:
            raise ValueError(f"over {MAX_CONFIG_BYTES} bytes")
        document = tomllib.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        raise ConfigError(
            f"the config file {path} is not valid TOML: {e}", reason="invalid_toml", file=path
        ) from e
    by_key = {s.key: s for s in SETTINGS}
    out: dict[str, SettingValue] = {}
    for key, value in dict(_flat(document)).items():  # a key given twice: the last wins
        setting = by_key.get(key)
        if setting is None:
            import difflib  # noqa: PLC0415 - only for this error (the CLI imports this module)

            close = difflib.get_close_matches(key, list(by_key), n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise ConfigError(
                f"unknown setting {key!r} in the config file {path}; {hint}"
                "the settings are listed in docs/configuration.md",
                reason="unknown_setting",
                file=path,
                key=key,
            )
        try:
            out[key] = _check(setting, value, from_text=False)
        except ValueError as e:
            shown = "***" if setting.secret else repr(value)
            raise ConfigError(
                f"{key} in the config file {path} must be {e}, got {shown}",
                reason="invalid_setting",
                file=path,
                key=key,
            ) from None
    return out


def resolve_settings(
    home: str | None,
    *,
    config_file: str | None = None,
    flags: Mapping[str, str | None] | None = None,
    environ: Mapping[str, str] | None = None,
) -> Settings:
    """Resolve every setting: a flag, else its variable, else the config file, else default.

    The config file is ``config_file``, else ``HOME/config.toml`` when it exists. Raises
    ``ConfigError`` (``bad_config``) for a file that cannot be used (see
    :func:`read_config_file`), an unknown flag and a bad value of a flag or a variable
    (``details.reason: invalid_setting``), naming the value and what it must be.
    """
    env = os.environ if environ is None else environ
    own = os.path.join(resolve_home(home), CONFIG_NAME)
    if config_file is None:
        config_file = own if os.path.lexists(own) else None
    else:
        config_file = os.path.abspath(os.path.expanduser(config_file))
    in_home = config_file == own
    from_file = read_config_file(config_file, in_home=in_home) if config_file else {}
    given = {k: v for k, v in (flags or {}).items() if v is not None}
    values: dict[str, SettingValue] = {}
    sources: dict[str, str] = {}
    for setting in SETTINGS:
        raw_env = env.get(setting.env, "")
        if setting.key in given:
            source, raw, name = "flag", given.pop(setting.key), f"--{setting.key.replace('_', '-')}"
        elif raw_env.strip():
            source, raw, name = "env", raw_env, setting.env
        elif setting.key in from_file:
            values[setting.key], sources[setting.key] = from_file[setting.key], "file"
            continue
        else:
            values[setting.key], sources[setting.key] = setting.default, "default"
            continue
        try:
            values[setting.key] = _check(setting, raw, from_text=True)
        except ValueError as e:
            shown = "***" if setting.secret else repr(raw)
            raise ConfigError(
                f"{name} must be {e}, got {shown}", reason="invalid_setting", key=setting.key
            ) from None
        sources[setting.key] = source
    if given:
        raise ConfigError(f"unknown settings {sorted(given)}", reason="unknown_setting")
    return Settings(config_file=config_file, values=values, sources=sources)


def daemon_argv(config_file: str | None, flags: Mapping[str, str | None] | None) -> list[str]:
    """The arguments of ``python -m runtime.daemon`` for a config file and flags."""
    args = ["--config", os.path.abspath(config_file)] if config_file else []
    for key, value in (flags or {}).items():
        if value is not None:
            args += [f"--{key.replace('_', '-')}", value]
    return args
