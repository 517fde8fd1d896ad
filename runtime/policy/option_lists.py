"""The validators of the list-shaped runtime options, and what every validator shares.

Each list option's entries are checked and normalized one by one (an error names the
entry's ``index``); :mod:`runtime.policy.options` holds the table of every option's
validator. Nothing here touches the filesystem, the network or the environment.
"""

from __future__ import annotations

import json
import os
import re
import socket
from collections.abc import Callable, Mapping
from typing import Any

from events.catalog import PAYLOAD_TYPES
from runtime.errors import InvalidRuntimeOptError

__all__ = [
    "MAX_REASON_CODE",
    "EntryCheck",
    "Validator",
    "absolute_path",
    "as_given",
    "checked",
    "event_name",
    "fail",
    "host",
    "matching",
    "nonempty",
    "outside_root",
    "shown",
    "string_list",
]

MAX_REASON_CODE = 64
"""Longest accepted ``outside_root_allowlist`` ``reason_code``."""

_DNS_LABEL = re.compile(r"^[a-z0-9_](?:[a-z0-9_-]*[a-z0-9_])?$")
_NUMERIC_LABEL = re.compile(r"^(?:0x[0-9a-f]*|[0-9]+)$")
_WILDCARD = re.compile(r"^\*?\.")
"""A leading ``*.`` or ``.`` of a ``network_allowlist`` entry (it covers the subdomains)."""

Validator = Callable[[str, Any], Any]
"""``(key, raw value) -> normalized value``; raises ``InvalidRuntimeOptError``."""


def fail(key: str, reason: str, message: str, **details: Any) -> InvalidRuntimeOptError:
    """The refusal of option ``key``, with one of the SPEC ``reason`` codes."""
    return InvalidRuntimeOptError(message, key=key, reason=reason, **details)


def shown(value: Any) -> str:
    """Show a value as the user wrote it (JSON where possible), shortened."""
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError):
        try:
            text = repr(value)
        except ValueError:  # an int too long to print
            text = f"<{type(value).__name__}>"
    return text if len(text) <= 80 else text[:77] + "..."


def checked(
    normalize: Validator, ok: Callable[[Any], bool], reason: str, what: str, **details: Any
) -> Validator:
    """``normalize``, then refuse a value that is not ``ok``: "KEY must be WHAT, got VALUE".

    The message shows the value as given; ``details`` go with the error.
    """

    def check(key: str, value: Any) -> Any:
        normalized = normalize(key, value)
        if not ok(normalized):
            raise fail(key, reason, f"{key} must be {what}, got {shown(value)}", **details)
        return normalized

    return check


def as_given(key: str, value: Any) -> Any:
    """The value as given (a :func:`checked` that only checks)."""
    return value


_strings = checked(
    as_given,
    lambda v: isinstance(v, list | tuple) and all(isinstance(s, str) for s in v),
    "expected_list_of_strings",
    "a list of strings",
)


def string_list(entry: Callable[[str, int, str], str], *, sort: bool) -> Validator:
    """Build a validator of string lists: each entry normalized by ``entry``, then deduplicated."""

    def check(key: str, value: Any) -> Any:
        out: list[str] = []
        for index, item in enumerate(list(_strings(key, value))):
            normalized = entry(key, index, item)
            if normalized not in out:
                out.append(normalized)
        return sorted(out) if sort else out

    return check


def _bad_entry(key: str, index: int, message: str) -> InvalidRuntimeOptError:
    return fail(key, "invalid_entry", f"{key}[{index}] {message}", index=index)


EntryCheck = Callable[[str, int, str], str]
"""``(key, index, entry) -> normalized entry``; raises ``InvalidRuntimeOptError``."""


def _entry_checked(
    normalize: Callable[[str], str], ok: Callable[[str], bool], what: str
) -> EntryCheck:
    """``normalize`` an entry, then refuse one that is not ``ok``: "KEY[I] must be WHAT"."""

    def check(key: str, index: int, item: str) -> str:
        normalized = normalize(item)
        if not ok(normalized):
            raise _bad_entry(key, index, f"must be {what}, got {shown(item)}")
        return normalized

    return check


nonempty = _entry_checked(str.strip, lambda s: bool(s) and "\x00" not in s, "a non-empty string")
"""A non-empty entry without NUL, stripped."""


def matching(pattern: re.Pattern[str], what: str, *, lower: bool) -> EntryCheck:
    """An entry check: stripped (and lowered when ``lower``), it must match ``pattern``."""
    return _entry_checked(
        lambda item: item.strip().lower() if lower else item.strip(),
        lambda normalized: bool(pattern.match(normalized)),
        what,
    )


_absolute = _entry_checked(
    str.strip, lambda path: path.startswith("/") and "\x00" not in path, "an absolute path"
)


def absolute_path(key: str, index: int, item: str) -> str:
    """An absolute path below ``/``, normalized."""
    normalized = os.path.normpath(_absolute(key, index, item))
    if normalized == "/":
        # "/" would cover the whole view: $HOME, /etc's secrets, what the sandbox hides
        raise _bad_entry(key, index, "must name a directory or file below /, got '/'")
    return normalized


_known_event = _entry_checked(str.strip, lambda name: name in PAYLOAD_TYPES, "a known event type")


def event_name(key: str, index: int, item: str) -> str:
    """A known event type that is no alert (alerts on alerts would loop)."""
    name = _known_event(key, index, item)
    if name.startswith("alert."):
        raise _bad_entry(key, index, f"cannot be {name!r}: alerts on alerts would loop")
    return name


def host(key: str, index: int, item: str) -> str:
    """Normalize one ``network_allowlist`` entry to a bare lowercase IDNA host or an IP."""
    host = _WILDCARD.sub("", item.strip().lower(), count=1)
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
                f"must be a host name or IP address, without a scheme or port, got {shown(item)}",
            ) from None
    host = host.removesuffix(".")
    if not host or any(c in host for c in "/@?#*% \t\\"):
        raise _bad_entry(
            key,
            index,
            f"must be a host name or IP address (no scheme, path or wildcard "
            f"other than a leading '*.'), got {shown(item)}",
        )
    if _NUMERIC_LABEL.match(host.rsplit(".", 1)[-1]):
        # Ends in a number: an IPv4 address in any spelling (127.1, 0x7f.0.0.1, 2130706433).
        try:
            return socket.inet_ntoa(socket.inet_aton(host))
        except OSError:
            raise _bad_entry(key, index, f"is not a valid IPv4 address: {shown(item)}") from None
    try:
        ascii_host = host.encode("idna").decode("ascii").lower()
    except UnicodeError:
        raise _bad_entry(key, index, f"is not a valid host name: {shown(item)}") from None
    labels = ascii_host.split(".")
    if len(ascii_host) > 253 or not all(_DNS_LABEL.match(label) for label in labels):
        raise _bad_entry(key, index, f"is not a valid host name: {shown(item)}")
    return ascii_host


def _is_reason_code(value: Any) -> bool:
    """Any non-blank printable string of at most :data:`MAX_REASON_CODE` characters."""
    return (
        isinstance(value, str)
        and 0 < len(value) <= MAX_REASON_CODE
        and value.isprintable()
        and not value.isspace()
    )


_SHAPED = "each entry is {path or pattern, reason_code}"
_SHAPE_REASON = "expected_list_of_reason_coded_entries"


def _target_field(entry: Mapping[str, Any]) -> str:
    """Which of ``path`` and ``pattern`` an ``outside_root_allowlist`` entry names."""
    return "path" if "path" in entry else "pattern"


def _bad_target(entry: Mapping[str, Any]) -> bool:
    target = entry[_target_field(entry)]
    return not isinstance(target, str) or not target.strip() or "\x00" in target


def _extra_fields(entry: Mapping[str, Any]) -> list[str]:
    return sorted(str(k) for k in entry if k not in ("path", "pattern", "reason_code"))


_OUTSIDE_ROOT_RULES: tuple[tuple[Callable[[Any], bool], str, Callable[[Any], str]], ...] = (
    (
        lambda e: not isinstance(e, Mapping),
        _SHAPE_REASON,
        lambda e: f"must be an object: {_SHAPED}, got {shown(e)}",
    ),
    (
        lambda e: "path" not in e and "pattern" not in e,
        _SHAPE_REASON,
        lambda e: f"is missing 'path' or 'pattern': {_SHAPED}, got {shown(e)}",
    ),
    (
        lambda e: "reason_code" not in e,
        _SHAPE_REASON,
        lambda e: f"is missing 'reason_code': {_SHAPED}, got {shown(e)}",
    ),
    (
        lambda e: bool(_extra_fields(e)),
        "invalid_entry",
        lambda e: f"has unknown field(s) {', '.join(_extra_fields(e))}",
    ),
    (
        lambda e: "path" in e and "pattern" in e,
        "invalid_entry",
        lambda e: "must have exactly one of 'path' or 'pattern', not both",
    ),
    (
        lambda e: not _is_reason_code(e["reason_code"]),
        "invalid_entry",
        lambda e: (
            f"reason_code must be a non-empty string of at most {MAX_REASON_CODE} "
            "printable characters (e.g. 'shared_toolchain', 'OPS-2'), "
            f"got {shown(e['reason_code'])}"
        ),
    ),
    (
        _bad_target,
        "invalid_entry",
        lambda e: (
            f"{_target_field(e)} must be a non-empty string, got {shown(e[_target_field(e)])}"
        ),
    ),
    (
        lambda e: "path" in e and not os.path.isabs(e["path"].strip()),
        "invalid_entry",
        lambda e: f"path must be absolute, got {shown(e['path'].strip())}",
    ),
)
"""The checks of one ``outside_root_allowlist`` entry, in order: ``(broken, reason,
message)``; the first broken one refuses the entry."""

_TARGET_NORMAL: dict[str, Callable[[str], str]] = {
    # POSIX keeps a leading '//'; one is enough
    "path": lambda path: "/" + os.path.normpath(path.strip()).lstrip("/"),
    "pattern": str.strip,
}
"""How each kind of target is normalized (after :data:`_OUTSIDE_ROOT_RULES` passed)."""


_entry_list = checked(
    as_given,
    lambda v: isinstance(v, list | tuple),
    _SHAPE_REASON,
    "a list of {path or pattern, reason_code} objects",
)


def outside_root(key: str, value: Any) -> list[dict[str, str]]:
    """Validate ``outside_root_allowlist``: ``[{path | pattern, reason_code}, ...]``."""
    out: list[dict[str, str]] = []
    for index, entry in enumerate(_entry_list(key, value)):
        for broken, reason, message in _OUTSIDE_ROOT_RULES:
            if broken(entry):
                raise fail(key, reason, f"{key}[{index}] {message(entry)}", index=index)
        field = _target_field(entry)
        normalized = {
            field: _TARGET_NORMAL[field](entry[field]),
            "reason_code": entry["reason_code"],
        }
        if normalized not in out:
            out.append(normalized)
    return out
