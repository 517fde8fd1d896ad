"""Runtime options (SPEC section 5): defaults, validation, normalization, and their sources.

A project is started with a flat mapping of options. :func:`validate_options` checks every
key and value, fills in the defaults and returns the normalized set (keys sorted), the one
``project.started`` records and ``diagnostics`` shows. Anything wrong raises
:class:`runtime.errors.InvalidRuntimeOptError` with ``key`` and one of the SPEC ``reason``
codes (``REASONS``); entries of list options also carry their ``index``. Nothing here
touches the filesystem, the network or the environment, except :func:`load_options_file`.

Code reads options through :class:`runtime.option_table.RuntimeOptions`
(``RuntimeOptions.of(options)``, built once by whoever holds the options): typed fields,
with the defaults of that table and nowhere else, instead of ``options.get("x") or DEFAULT``
at each call site. The list-shaped options' validators are :mod:`runtime.policy.option_lists`'.

The CLI gathers options with :func:`load_options_file` (``--options-file``) and
:func:`parse_opt_pairs` (``--opt KEY=VALUE``) and combines them with :func:`merge_options`.
The reference for users is ``docs/configuration.md``.
"""

from __future__ import annotations

import difflib
import json
import math
import os
import re
import tomllib
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeAlias

from runtime.errors import InvalidRuntimeOptError
from runtime.guard.shapes.safe_json import (
    MAX_JSON_DEPTH,
    json_depth_exceeds,
    object_without_duplicates,
)
from runtime.option_table import defaults
from runtime.policy.a2a_agents import validate_a2a_agents
from runtime.policy.mcp_servers import validate_mcp_servers
from runtime.policy.option_lists import (
    Validator,
    absolute_path,
    as_given,
    checked,
    event_name,
    fail,
    host,
    matching,
    nonempty,
    outside_root,
    shown,
    string_list,
)

__all__ = [
    "REASONS",
    "load_options_file",
    "merge_options",
    "parse_opt_pairs",
    "validate_options",
]

REASONS: frozenset[str] = frozenset(
    {
        "unknown_option",
        "expected_positive_integer",
        "expected_non_negative_integer",
        "expected_boolean",
        "expected_list_of_strings",
        "expected_allow_or_deny",
        "expected_string_or_null",
        "expected_number_or_null",
        "expected_list_of_reason_coded_entries",
        "invalid_entry",
    }
)
"""Every ``reason`` an :class:`InvalidRuntimeOptError` from this module can carry."""

MAX_MS = 2**31 - 1
"""Largest accepted ``*_ms`` value (about 24.8 days), safe for every timer the runtime uses."""
MAX_INT = 2**53 - 1
"""Largest accepted value of any other integer option (exact in JSON everywhere)."""
MAX_OPTIONS_FILE_BYTES = 1 << 20
"""An options file larger than this is refused."""

_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
_ROUTER = re.compile(rf"^{_IDENT}(?:\.{_IDENT})*:{_IDENT}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_ENV_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\*?$")
_SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*$")
_PROTOCOL = re.compile(r"^[a-z][a-z0-9_.-]*$")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# --- scalar validators -----------------------------------------------------------------


def _or_null(check: Validator) -> Validator:
    """``check``, with null let through as it is (the option then sets no limit or value)."""

    def nullable(key: str, value: Any) -> Any:
        if value is None:
            return None
        return check(key, value)

    return nullable


def _integer(minimum: int, maximum: int, *, null_ok: bool = False) -> Validator:
    """An integer in ``[minimum, maximum]``.

    ``null_ok``: the message says null is accepted too (the caller wraps the check in
    :func:`_or_null`).
    """
    reason = "expected_positive_integer" if minimum > 0 else "expected_non_negative_integer"
    what = "a positive integer" if minimum > 0 else "a non-negative integer"
    what += " or null" if null_ok else ""
    typed = checked(as_given, lambda v: _is_int(v) and v >= minimum, reason, what)
    return checked(
        typed, lambda v: v <= maximum, "invalid_entry", f"at most {maximum}", max=maximum
    )


_boolean = checked(as_given, lambda v: isinstance(v, bool), "expected_boolean", "true or false")

_string = checked(
    as_given, lambda v: isinstance(v, str), "expected_string_or_null", "a string or null"
)
"""A string (the options that take one take null too: :func:`_or_null`)."""


def _choice(*choices: str, reason: str = "invalid_entry") -> Validator:
    return checked(
        lambda key, value: value.strip().lower() if isinstance(value, str) else "",
        lambda normalized: normalized in choices,
        reason,
        " or ".join(repr(c) for c in choices),
    )


def _base_url(key: str, value: Any) -> str:
    url: str = _string(key, value).strip()
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() not in ("http", "https") or not rest or rest[0] in "/?#":
        raise fail(
            key,
            "invalid_entry",
            f"{key} must be an http:// or https:// URL with a host, got {shown(value)}",
        )
    return scheme.lower() + "://" + rest


def _api_key_env(key: str, value: Any) -> str:
    name: str = _string(key, value)
    if not _ENV_NAME.match(name):
        # The value may be a pasted secret: never echo it.
        raise fail(
            key,
            "invalid_entry",
            f"{key} must name an environment variable (letters, digits, underscore), "
            "not hold the key itself",
        )
    return name


def _number(key: str, value: Any) -> float:
    """``value`` as a float (an overflowing integer as infinity); null is :func:`_or_null`'s."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise fail(
            key, "expected_number_or_null", f"{key} must be a number or null, got {shown(value)}"
        )
    try:
        return float(value)
    except OverflowError:
        return math.inf


_temperature = checked(
    _number, lambda n: math.isfinite(n) and n >= 0, "invalid_entry", "a finite number >= 0"
)


def _byte_size(minimum: int, *, null_ok: bool = False) -> Validator:
    """A size in bytes of at least ``minimum`` (``null_ok``: as :func:`_integer`'s)."""
    return checked(
        _integer(1, MAX_INT, null_ok=null_ok),
        lambda size: size >= minimum,
        "invalid_entry",
        f"at least {minimum} bytes ({minimum // 1024**2} MiB)",
        min=minimum,
    )


MAX_CPU_CORES = 1024.0
"""The largest ``tool_cpu_cores``."""

_cores = checked(
    _number,
    lambda n: 0.01 <= n <= MAX_CPU_CORES,
    "invalid_entry",
    f"a number of cores from 0.01 to {MAX_CPU_CORES:g}, or null",
)

_alert_router = checked(
    lambda key, value: _string(key, value).strip(),
    lambda router: bool(_ROUTER.match(router)),
    "invalid_entry",
    "'package.module:function'",
)


# --- the table -------------------------------------------------------------------------

_POS_MS = _integer(1, MAX_MS)
_POS = _integer(1, MAX_INT)

_OPTIONS: dict[str, Validator] = {
    "tool_timeout_ms": _POS_MS,
    "tool_timeout_alert_threshold": _POS,
    "tool_max_output_bytes": _POS,
    "tool_max_artifact_bytes": _POS,
    "tool_max_concurrency": _POS,
    "tool_max_concurrency_per_conversation": _integer(0, MAX_INT),
    "tool_max_processes": _POS,
    "tool_max_memory_bytes": _or_null(_byte_size(16 * 1024**2, null_ok=True)),
    "tool_cpu_cores": _or_null(_cores),
    "tool_tmpfs_bytes": _byte_size(1024**2),
    "llm_adapter": _choice("deterministic", "openai"),
    "llm_model": _or_null(_string),
    "llm_base_url": _or_null(_base_url),
    "llm_api_key_env": _or_null(_api_key_env),
    "llm_system_prompt": _or_null(_string),
    "llm_temperature": _or_null(_temperature),
    "llm_max_tokens": _or_null(_integer(1, MAX_INT, null_ok=True)),
    "llm_timeout_ms": _POS_MS,
    "max_rounds": _POS,
    "token_budget": _POS,
    "duration_budget_ms": _POS_MS,
    "context_window_chars": _integer(0, MAX_INT),
    "allow_tools": _or_null(string_list(nonempty, sort=True)),
    "deny_tools": string_list(nonempty, sort=True),
    "approval_mode": _choice("never", "sensitive", "always"),
    "network_egress_policy": _choice("allow", "deny", reason="expected_allow_or_deny"),
    "network_allowlist": string_list(host, sort=True),
    "network_allowed_schemes": string_list(
        matching(_SCHEME, "a URL scheme such as 'https'", lower=True), sort=True
    ),
    "sensitive_path_denylist": string_list(nonempty, sort=False),
    "sensitive_path_allowlist": string_list(nonempty, sort=False),
    "outside_root_allowlist": outside_root,
    "tool_env_allowlist": string_list(
        matching(_ENV_PATTERN, "an environment variable name or NAME_* prefix", lower=False),
        sort=True,
    ),
    "command_read_paths": string_list(absolute_path, sort=True),
    "command_socket_allowlist": string_list(absolute_path, sort=True),
    "protocol_allowlist": string_list(
        matching(_PROTOCOL, "a protocol name such as 'mcp'", lower=True), sort=False
    ),
    "strict_asset_loading": _boolean,
    "orchestration": _boolean,
    "max_restarts": _integer(0, MAX_INT),
    "restart_period_ms": _POS_MS,
    "idle_passivation_ms": _POS_MS,
    "snapshot_every_events": _integer(0, MAX_INT),
    "alert_signal_events": string_list(event_name, sort=True),
    "alert_router": _or_null(_alert_router),
    "mcp_servers": validate_mcp_servers,
    "a2a_agents": validate_a2a_agents,
}
"""Every option's validator; its default is :class:`runtime.option_table.RuntimeOptions`'."""


def validate_options(raw: Mapping[str, Any] | None) -> dict[str, Any]:
    """Return the full normalized options: ``raw`` checked, normalized, defaults filled.

    Keys are checked in sorted order, so the first error reported is deterministic.
    Raises :class:`InvalidRuntimeOptError` with ``key`` and ``reason`` (``REASONS``).
    """
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise fail(
            "options", "invalid_entry", f"options must be an object, got {type(raw).__name__}"
        )
    for key in sorted(raw, key=str):
        if not isinstance(key, str) or key not in _OPTIONS:
            hint = difflib.get_close_matches(str(key), list(_OPTIONS), n=1)
            fix = f"; did you mean {hint[0]!r}?" if hint else "; see docs/configuration.md"
            raise fail(str(key), "unknown_option", f"unknown option {key!r}{fix}")
    options = defaults()
    for key in sorted(raw):  # every key is known now
        options[key] = _OPTIONS[key](key, raw[key])
    return options


JsonValue: TypeAlias = bool | int | float | str | list["JsonValue"] | dict[str, "JsonValue"] | None
"""A value JSON text decodes to."""


def parse_opt_pairs(pairs: Sequence[str]) -> dict[str, JsonValue]:
    """Parse the CLI's ``--opt KEY=VALUE`` pairs; a later pair for the same key wins.

    ``VALUE`` is read as JSON when it parses (``30000``, ``true``, ``null``, ``["a"]``) and
    kept as the raw string otherwise (``llm_model=gpt-4o``). Keys are not checked here.
    """
    options: dict[str, JsonValue] = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise fail(pair, "invalid_entry", f"--opt expects KEY=VALUE, got {shown(pair)}")
        value: Any = text
        if not json_depth_exceeds(text, MAX_JSON_DEPTH):
            try:
                value = json.loads(text)
            except ValueError:
                value = text
        options[key] = value
    return options


def _json_object(text: str) -> Any:
    if json_depth_exceeds(text, MAX_JSON_DEPTH):
        raise ValueError(f"nesting deeper than {MAX_JSON_DEPTH} levels")
    return json.loads(text, object_pairs_hook=object_without_duplicates)


_LOADERS: dict[str, Callable[[str], Any]] = {".json": _json_object, ".toml": tomllib.loads}
"""How an options file is parsed, by its extension."""


def load_options_file(path: str) -> dict[str, Any]:
    """Read options from a ``.json`` or ``.toml`` file whose top level is an object.

    Any problem (missing file, other extension, bad syntax, duplicate keys, not an object)
    raises :class:`InvalidRuntimeOptError` with ``key="options_file"``,
    ``reason="invalid_entry"`` and the ``path``. The values are not validated here.
    """
    ext = os.path.splitext(path)[1].lower()

    def bad(message: str) -> InvalidRuntimeOptError:
        return fail("options_file", "invalid_entry", message, path=path)

    if ext not in _LOADERS:
        raise bad(f"options file must end in .json or .toml, got {path!r}")
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_OPTIONS_FILE_BYTES + 1)
    except FileNotFoundError as e:
        raise bad(f"options file not found: {path!r}") from e
    except OSError as e:
        raise bad(f"cannot read options file {path!r}: {e.strerror or e}") from e
    if len(data) > MAX_OPTIONS_FILE_BYTES:
        raise bad(f"options file {path!r} is larger than {MAX_OPTIONS_FILE_BYTES} bytes")
    try:
        loaded = _LOADERS[ext](data.decode("utf-8-sig"))
    except (ValueError, RecursionError) as e:  # JSONDecodeError, TOMLDecodeError, Unicode
        raise bad(f"options file {path!r} is not valid {ext[1:].upper()}: {e}") from e
    if not isinstance(loaded, dict):
        raise bad(
            f"options file {path!r} must hold an object at the top level, "
            f"got {type(loaded).__name__}"
        )
    return loaded


def merge_options(
    file_opts: Mapping[str, Any] | None, pair_opts: Mapping[str, Any] | None
) -> dict[str, Any]:
    """Combine options from a file and from ``--opt`` pairs; the pairs win."""
    return {**(file_opts or {}), **(pair_opts or {})}
