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
at each call site. ``DEFAULTS`` and ``RuntimeOptions`` are named here too for the modules
that still import them from this one.

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
import socket
import tomllib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from events.catalog import PAYLOAD_TYPES
from runtime.errors import InvalidRuntimeOptError
from runtime.guard.shapes.safe_json import (
    MAX_JSON_DEPTH,
    json_depth_exceeds,
    object_without_duplicates,
)
from runtime.option_table import defaults
from runtime.policy.a2a_agents import validate_a2a_agents
from runtime.policy.mcp_servers import validate_mcp_servers

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
MAX_REASON_CODE = 64
"""Longest accepted ``outside_root_allowlist`` ``reason_code``."""
MAX_OPTIONS_FILE_BYTES = 1 << 20
"""An options file larger than this is refused."""

_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
_ROUTER = re.compile(rf"^{_IDENT}(?:\.{_IDENT})*:{_IDENT}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_ENV_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\*?$")
_SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*$")
_PROTOCOL = re.compile(r"^[a-z][a-z0-9_.-]*$")
_DNS_LABEL = re.compile(r"^[a-z0-9_](?:[a-z0-9_-]*[a-z0-9_])?$")
_NUMERIC_LABEL = re.compile(r"^(?:0x[0-9a-f]*|[0-9]+)$")

Validator = Callable[[str, Any], Any]
"""``(key, raw value) -> normalized value``; raises ``InvalidRuntimeOptError``."""


def _fail(key: str, reason: str, message: str, **details: Any) -> InvalidRuntimeOptError:
    return InvalidRuntimeOptError(message, key=key, reason=reason, **details)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _got(value: Any) -> str:
    """Show a value as the user wrote it (JSON where possible), shortened."""
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError):
        try:
            text = repr(value)
        except ValueError:  # an int too long to print
            text = f"<{type(value).__name__}>"
    return text if len(text) <= 80 else text[:77] + "..."


# --- scalar validators -----------------------------------------------------------------


def _integer(minimum: int, maximum: int, *, nullable: bool = False) -> Validator:
    reason = "expected_positive_integer" if minimum > 0 else "expected_non_negative_integer"
    what = "a positive integer" if minimum > 0 else "a non-negative integer"
    what += " or null" if nullable else ""

    def check(key: str, value: Any) -> Any:
        if value is None and nullable:
            return None
        if not _is_int(value) or value < minimum:
            raise _fail(key, reason, f"{key} must be {what}, got {_got(value)}")
        if value > maximum:
            raise _fail(
                key,
                "invalid_entry",
                f"{key} must be at most {maximum}, got {_got(value)}",
                max=maximum,
            )
        return value

    return check


def _boolean(key: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise _fail(key, "expected_boolean", f"{key} must be true or false, got {_got(value)}")
    return value


def _string_or_null(key: str, value: Any) -> str | None:
    if value is not None and not isinstance(value, str):
        raise _fail(
            key, "expected_string_or_null", f"{key} must be a string or null, got {_got(value)}"
        )
    return value


def _choice(*choices: str, reason: str = "invalid_entry") -> Validator:
    listed = " or ".join(repr(c) for c in choices)

    def check(key: str, value: Any) -> str:
        normalized = value.strip().lower() if isinstance(value, str) else ""
        if normalized not in choices:
            raise _fail(key, reason, f"{key} must be {listed}, got {_got(value)}")
        return normalized

    return check


def _base_url(key: str, value: Any) -> str | None:
    url = _string_or_null(key, value)
    if url is None:
        return None
    url = url.strip()
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() not in ("http", "https") or not rest or rest[0] in "/?#":
        raise _fail(
            key,
            "invalid_entry",
            f"{key} must be an http:// or https:// URL with a host, got {_got(value)}",
        )
    return scheme.lower() + "://" + rest


def _api_key_env(key: str, value: Any) -> str | None:
    name = _string_or_null(key, value)
    if name is not None and not _ENV_NAME.match(name):
        # The value may be a pasted secret: never echo it.
        raise _fail(
            key,
            "invalid_entry",
            f"{key} must name an environment variable (letters, digits, underscore), "
            "not hold the key itself",
        )
    return name


def _number_or_null(key: str, value: Any) -> float | None:
    """``value`` as a float (an overflowing integer as infinity), ``None`` for null."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _fail(
            key, "expected_number_or_null", f"{key} must be a number or null, got {_got(value)}"
        )
    try:
        return float(value)
    except OverflowError:
        return math.inf


def _temperature(key: str, value: Any) -> float | None:
    number = _number_or_null(key, value)
    if number is None:
        return None
    if not math.isfinite(number) or number < 0:
        raise _fail(key, "invalid_entry", f"{key} must be a finite number >= 0, got {_got(value)}")
    return number


def _byte_size(minimum: int, *, nullable: bool = False) -> Validator:
    """A size in bytes of at least ``minimum`` (``null`` too when ``nullable``: no limit)."""
    check_type = _integer(1, MAX_INT, nullable=nullable)

    def check(key: str, value: Any) -> Any:
        value = check_type(key, value)
        if value is not None and value < minimum:
            raise _fail(
                key,
                "invalid_entry",
                f"{key} must be at least {minimum} bytes ({minimum // 1024**2} MiB), "
                f"got {_got(value)}",
                min=minimum,
            )
        return value

    return check


MAX_CPU_CORES = 1024.0
"""The largest ``tool_cpu_cores``."""


def _cores(key: str, value: Any) -> float | None:
    number = _number_or_null(key, value)
    if number is None:
        return None
    if not 0.01 <= number <= MAX_CPU_CORES:
        raise _fail(
            key,
            "invalid_entry",
            f"{key} must be a number of cores from 0.01 to {MAX_CPU_CORES:g}, or null, "
            f"got {_got(value)}",
        )
    return number


def _alert_router(key: str, value: Any) -> str | None:
    router = _string_or_null(key, value)
    if router is None:
        return None
    router = router.strip()
    if not _ROUTER.match(router):
        raise _fail(
            key,
            "invalid_entry",
            f"{key} must be 'package.module:function', got {_got(value)}",
        )
    return router


# --- list validators -------------------------------------------------------------------


def _strings(key: str, value: Any) -> list[str]:
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise _fail(
            key,
            "expected_list_of_strings",
            f"{key} must be a list of strings, got {_got(value)}",
        )
    return list(value)


def _string_list(
    entry: Callable[[str, int, str], str], *, sort: bool, nullable: bool = False
) -> Validator:
    """Build a validator of string lists: each entry normalized by ``entry``, then deduplicated."""

    def check(key: str, value: Any) -> Any:
        if value is None and nullable:
            return None
        out: list[str] = []
        for index, item in enumerate(_strings(key, value)):
            normalized = entry(key, index, item)
            if normalized not in out:
                out.append(normalized)
        return sorted(out) if sort else out

    return check


def _bad_entry(key: str, index: int, message: str) -> InvalidRuntimeOptError:
    return _fail(key, "invalid_entry", f"{key}[{index}] {message}", index=index)


def _nonempty(key: str, index: int, item: str) -> str:
    stripped = item.strip()
    if not stripped or "\x00" in stripped:
        raise _bad_entry(key, index, f"must be a non-empty string, got {_got(item)}")
    return stripped


def _matching(pattern: re.Pattern[str], what: str, *, lower: bool) -> Callable[..., str]:
    def check(key: str, index: int, item: str) -> str:
        normalized = item.strip().lower() if lower else item.strip()
        if not pattern.match(normalized):
            raise _bad_entry(key, index, f"must be {what}, got {_got(item)}")
        return normalized

    return check


def _absolute_path(key: str, index: int, item: str) -> str:
    path = item.strip()
    if not path.startswith("/") or "\x00" in path:
        raise _bad_entry(key, index, f"must be an absolute path, got {_got(item)}")
    normalized = os.path.normpath(path)
    if normalized == "/":
        # "/" would cover the whole view: $HOME, /etc's secrets, what the sandbox hides
        raise _bad_entry(key, index, "must name a directory or file below /, got '/'")
    return normalized


def _event_name(key: str, index: int, item: str) -> str:
    name = item.strip()
    if name not in PAYLOAD_TYPES:
        raise _bad_entry(key, index, f"must be a known event type, got {_got(item)}")
    if name.startswith("alert."):
        raise _bad_entry(key, index, f"cannot be {name!r}: alerts on alerts would loop")
    return name


def _host(key: str, index: int, item: str) -> str:
    """Normalize one ``network_allowlist`` entry to a bare lowercase IDNA host or an IP."""
    host = item.strip().lower()
    if host.startswith("*."):
        host = host[2:]
    elif host.startswith("."):
        host = host[1:]
    bracketed = host.startswith("[") and host.endswith("]")
    if bracketed:
        host = host[1:-1]
    if bracketed or ":" in host:
        try:
            return socket.inet_ntop(socket.AF_INET6, socket.inet_pton(socket.AF_INET6, host))
        except OSError:
            raise _bad_entry(
                key,
                index,
                f"must be a host name or IP address, without a scheme or port, got {_got(item)}",
            ) from None
    host = host.removesuffix(".")
    if not host or any(c in host for c in "/@?#*% \t\\"):
        raise _bad_entry(
            key,
            index,
            f"must be a host name or IP address (no scheme, path or wildcard "
            f"other than a leading '*.'), got {_got(item)}",
        )
    if _NUMERIC_LABEL.match(host.rsplit(".", 1)[-1]):
        # Ends in a number: an IPv4 address in any spelling (127.1, 0x7f.0.0.1, 2130706433).
        try:
            return socket.inet_ntoa(socket.inet_aton(host))
        except OSError:
            raise _bad_entry(key, index, f"is not a valid IPv4 address: {_got(item)}") from None
    try:
        ascii_host = host.encode("idna").decode("ascii").lower()
    except UnicodeError:
        raise _bad_entry(key, index, f"is not a valid host name: {_got(item)}") from None
    labels = ascii_host.split(".")
    if len(ascii_host) > 253 or not all(_DNS_LABEL.match(label) for label in labels):
        raise _bad_entry(key, index, f"is not a valid host name: {_got(item)}")
    return ascii_host


def _is_reason_code(value: Any) -> bool:
    """Any non-blank printable string of at most :data:`MAX_REASON_CODE` characters."""
    return (
        isinstance(value, str)
        and 0 < len(value) <= MAX_REASON_CODE
        and value.isprintable()
        and not value.isspace()
    )


def _outside_root(key: str, value: Any) -> list[dict[str, str]]:
    """Validate ``outside_root_allowlist``: ``[{path | pattern, reason_code}, ...]``."""
    shape = "a list of {path or pattern, reason_code} objects"
    if not isinstance(value, list | tuple):
        raise _fail(
            key,
            "expected_list_of_reason_coded_entries",
            f"{key} must be {shape}, got {_got(value)}",
        )
    out: list[dict[str, str]] = []
    for index, entry in enumerate(value):
        if not isinstance(entry, Mapping):
            problem = "must be an object"
        elif "path" not in entry and "pattern" not in entry:
            problem = "is missing 'path' or 'pattern'"
        elif "reason_code" not in entry:
            problem = "is missing 'reason_code'"
        else:
            problem = ""
        if problem:
            raise _fail(
                key,
                "expected_list_of_reason_coded_entries",
                f"{key}[{index}] {problem}: each entry is {{path or pattern, reason_code}}, "
                f"got {_got(entry)}",
                index=index,
            )
        extra = sorted(str(k) for k in entry if k not in ("path", "pattern", "reason_code"))
        if extra:
            raise _bad_entry(key, index, f"has unknown field(s) {', '.join(extra)}")
        if "path" in entry and "pattern" in entry:
            raise _bad_entry(key, index, "must have exactly one of 'path' or 'pattern', not both")
        reason_code = entry["reason_code"]
        if not _is_reason_code(reason_code):
            raise _bad_entry(
                key,
                index,
                f"reason_code must be a non-empty string of at most {MAX_REASON_CODE} printable "
                f"characters (e.g. 'shared_toolchain', 'OPS-2'), got {_got(reason_code)}",
            )
        field = "path" if "path" in entry else "pattern"
        target = entry[field]
        if not isinstance(target, str) or not target.strip() or "\x00" in target:
            raise _bad_entry(key, index, f"{field} must be a non-empty string, got {_got(target)}")
        target = target.strip()
        if field == "path":
            if not os.path.isabs(target):
                raise _bad_entry(key, index, f"path must be absolute, got {_got(target)}")
            target = os.path.normpath(target)
            target = "/" + target.lstrip("/")  # POSIX keeps a leading '//'; one is enough
        normalized = {field: target, "reason_code": reason_code}
        if normalized not in out:
            out.append(normalized)
    return out


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
    "tool_max_memory_bytes": _byte_size(16 * 1024**2, nullable=True),
    "tool_cpu_cores": _cores,
    "tool_tmpfs_bytes": _byte_size(1024**2),
    "llm_adapter": _choice("deterministic", "openai"),
    "llm_model": _string_or_null,
    "llm_base_url": _base_url,
    "llm_api_key_env": _api_key_env,
    "llm_system_prompt": _string_or_null,
    "llm_temperature": _temperature,
    "llm_max_tokens": _integer(1, MAX_INT, nullable=True),
    "llm_timeout_ms": _POS_MS,
    "max_rounds": _POS,
    "token_budget": _POS,
    "duration_budget_ms": _POS_MS,
    "context_window_chars": _integer(0, MAX_INT),
    "allow_tools": _string_list(_nonempty, sort=True, nullable=True),
    "deny_tools": _string_list(_nonempty, sort=True),
    "approval_mode": _choice("never", "sensitive", "always"),
    "network_egress_policy": _choice("allow", "deny", reason="expected_allow_or_deny"),
    "network_allowlist": _string_list(_host, sort=True),
    "network_allowed_schemes": _string_list(
        _matching(_SCHEME, "a URL scheme such as 'https'", lower=True), sort=True
    ),
    "sensitive_path_denylist": _string_list(_nonempty, sort=False),
    "sensitive_path_allowlist": _string_list(_nonempty, sort=False),
    "outside_root_allowlist": _outside_root,
    "tool_env_allowlist": _string_list(
        _matching(_ENV_PATTERN, "an environment variable name or NAME_* prefix", lower=False),
        sort=True,
    ),
    "command_read_paths": _string_list(_absolute_path, sort=True),
    "command_socket_allowlist": _string_list(_absolute_path, sort=True),
    "protocol_allowlist": _string_list(
        _matching(_PROTOCOL, "a protocol name such as 'mcp'", lower=True), sort=False
    ),
    "strict_asset_loading": _boolean,
    "orchestration": _boolean,
    "max_restarts": _integer(0, MAX_INT),
    "restart_period_ms": _POS_MS,
    "idle_passivation_ms": _POS_MS,
    "snapshot_every_events": _integer(0, MAX_INT),
    "alert_signal_events": _string_list(_event_name, sort=True),
    "alert_router": _alert_router,
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
        raise _fail(
            "options", "invalid_entry", f"options must be an object, got {type(raw).__name__}"
        )
    for key in sorted(raw, key=str):
        if not isinstance(key, str) or key not in _OPTIONS:
            hint = difflib.get_close_matches(str(key), list(_OPTIONS), n=1)
            fix = f"; did you mean {hint[0]!r}?" if hint else "; see docs/configuration.md"
            raise _fail(str(key), "unknown_option", f"unknown option {key!r}{fix}")
    options = defaults()
    for key, check in sorted(_OPTIONS.items()):
        if key in raw:
            options[key] = check(key, raw[key])
    return options


def parse_opt_pairs(pairs: Sequence[str]) -> dict[str, Any]:
    """Parse the CLI's ``--opt KEY=VALUE`` pairs; a later pair for the same key wins.

    ``VALUE`` is read as JSON when it parses (``30000``, ``true``, ``null``, ``["a"]``) and
    kept as the raw string otherwise (``llm_model=gpt-4o``). Keys are not checked here.
    """
    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise _fail(pair, "invalid_entry", f"--opt expects KEY=VALUE, got {_got(pair)}")
        value: Any = text
        if not json_depth_exceeds(text, MAX_JSON_DEPTH):
            try:
                value = json.loads(text)
            except ValueError:
                value = text
        options[key] = value
    return options


def load_options_file(path: str) -> dict[str, Any]:
    """Read options from a ``.json`` or ``.toml`` file whose top level is an object.

    Any problem (missing file, other extension, bad syntax, duplicate keys, not an object)
    raises :class:`InvalidRuntimeOptError` with ``key="options_file"``,
    ``reason="invalid_entry"`` and the ``path``. The values are not validated here.
    """
    ext = os.path.splitext(path)[1].lower()

    def bad(message: str) -> InvalidRuntimeOptError:
        return _fail("options_file", "invalid_entry", message, path=path)

    if ext not in (".json", ".toml"):
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
        text = data.decode("utf-8-sig")
        if ext == ".json" and json_depth_exceeds(text, MAX_JSON_DEPTH):
            raise ValueError(f"nesting deeper than {MAX_JSON_DEPTH} levels")
        if ext == ".json":
            loaded = json.loads(text, object_pairs_hook=object_without_duplicates)
        else:
            loaded = tomllib.loads(text)
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
