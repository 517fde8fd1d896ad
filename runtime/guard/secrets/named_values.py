"""The text rules for a value under a sensitive name: ``TOKEN=...``, ``"password": "..."``.

They find a name in the forms text usually gives it (``.env`` lines, headers, JSON, query
strings, flags, assignments) and let :func:`~runtime.guard.secrets.key_names.is_sensitive_key`
decide; :mod:`runtime.guard.secrets.patterns` runs them after the secret shapes.
"""

from __future__ import annotations

import re

from runtime.guard.secrets.key_names import is_env_name, is_sensitive_key
from runtime.guard.secrets.rule import Accept, Rule, SecretKind, plausible_value

__all__ = ["NAMED_VALUE_RULES"]


def _accept_named(match: re.Match[str], value: str) -> bool:
    return is_sensitive_key(match.group("name")) and plausible_value(value)


def _accept_flag(match: re.Match[str], value: str) -> bool:
    return not value.startswith("-") and _accept_named(match, value)


_PLAIN_WORDS = re.compile(r"[a-z]++(?:[_.\-][a-z]++)*+")
_IDENTIFIER_VALUE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*+(?:\.[A-Za-z_][A-Za-z0-9_]*+)*+[,)\]}]*+")


def _accept_assignment(match: re.Match[str], value: str) -> bool:
    """Accept ``NAME=value`` mid-line; a lower-case name with a bare identifier is code.

    ``PGPASSWORD=x psql`` and ``DB_PASS=x`` (environment variables), quoted literals
    (``password='x'``) and ``password=hunter2`` in a sentence are secrets;
    ``login(password=password)`` and ``token=self.token`` pass a variable, not a secret.
    The value's form (the group that matched it) decides how it is judged.
    """
    if not _accept_named(match, value):
        return False
    return _ASSIGNED[match.lastgroup](match, value)


def _accept_quoted(match: re.Match[str], value: str) -> bool:
    """``name = "value"``: a secret, unless code names a thing with it."""
    if " " not in match.group("op") and "\t" not in match.group("op"):
        return True  # password='x', DB_PASS="x": a keyword argument or a shell variable
    # Code: OPENAI_KEY = "openai_key" names a thing; a secret has a digit or a capital.
    words = value.lower()
    return _PLAIN_WORDS.fullmatch(value) is None and words != match.group("name").lower()


def _accept_bare(match: re.Match[str], value: str) -> bool:
    """``name=value`` unquoted: a secret, unless it passes a variable or a reference."""
    if is_env_name(match.group("name")):
        return True
    if _IDENTIFIER_VALUE.fullmatch(value) is None:
        return True
    if "." in value:
        return False  # a reference: password=settings.DB_PASSWORD
    start = match.start()
    before = match.string[max(0, start - 64) : start].rstrip(" \t")[-1:]
    return before not in ("(", ",")  # a keyword argument: login(password=password)


_ASSIGNED: dict[str | None, Accept] = {
    "v1": _accept_quoted,
    "v2": _accept_quoted,
    "v3": _accept_bare,
}
"""How an assigned value is judged, by the group that matched it (the last one to close)."""


_AUTH_SCHEME = re.compile(r"(?:basic|bearer|token|digest|negotiate|ntlm|apikey)[ \t]", re.I)


def _accept_header(match: re.Match[str], value: str) -> bool:
    """Accept ``X-Api-Key: v`` anywhere; a bare ``Authorization:`` needs a credential."""
    name = match.group("name")
    if "-" in name:
        lowered = name.lower()
        return any(t in lowered for t in _HEADER_TRIGGERS) and _accept_named(match, value)
    if name.lower() != "authorization" or not plausible_value(value):
        return False
    return bool(_AUTH_SCHEME.match(value)) or len(value) >= 20 or any(c.isdigit() for c in value)


_SENSITIVE_TRIGGERS = (
    "token",
    "secret",
    "pass",
    "pw",
    "key",
    "authorization",
    "credential",
    "cookie",
)
_HEADER_TRIGGERS = (
    "authorization",
    "-token",
    "token-",
    "-key",
    "key-",
    "-api",
    "api-",
    "-secret",
    "secret-",
    "-pass",
    "pass-",
    "-pw",
    "-auth",
    "credential",
    "cookie",
)
"""A sensitive hyphenated header name holds one of these (``X-Api-Key``, ``Private-Token``)."""


NAMED_VALUE_RULES: tuple[Rule, ...] = (
    Rule(  # .env files and `env` output: NAME=value at the start of a line
        SecretKind.SENSITIVE_KEY,
        r"\n(?:[A-Za-z]{1,16}[ \t]++)?(?P<name>[A-Za-z_][A-Za-z0-9_.\-]{0,127}+)="
        r"(?!\[REDACTED)(?P<value>[^\r\n]+)",
        _SENSITIVE_TRIGGERS,
        value_groups=("value",),
        accept=_accept_named,
        prefix="\n",
    ),
    Rule(  # HTTP headers and top-level YAML: Name: value at the start of a line
        SecretKind.SENSITIVE_KEY,
        r"\n(?:[<>] )?(?P<name>[A-Za-z][A-Za-z0-9\-]{0,63}+):[ \t]++"
        r"(?!\[REDACTED)(?P<value>[^\r\n]+)",
        _SENSITIVE_TRIGGERS,
        value_groups=("value",),
        accept=_accept_named,
        prefix="\n",
    ),
    Rule(  # JSON and Python literals: "name": "value"
        SecretKind.SENSITIVE_KEY,
        r"(?P<q>[\"'])(?P<name>[A-Za-z0-9_.\- ]{1,64}+)(?P=q)[ \t]*+(?::|=>)[ \t]*+"
        r"(?:\"(?P<v1>[^\"\\\n]*+(?:\\.[^\"\\\n]*+)*+)\""
        r"|'(?P<v2>[^'\\\n]*+(?:\\.[^'\\\n]*+)*+)')",
        _SENSITIVE_TRIGGERS,
        value_groups=("v1", "v2"),
        accept=_accept_named,
    ),
    Rule(  # URL query strings: ?name=value&...
        SecretKind.SENSITIVE_KEY,
        r"[?&;](?P<name>[A-Za-z0-9_.\-]{1,64}+)=(?!\[REDACTED)(?P<value>[^&#\s\"'<>]++)",
        _SENSITIVE_TRIGGERS,
        value_groups=("value",),
        accept=_accept_named,
    ),
    Rule(  # command lines: --name=value, --name value
        SecretKind.SENSITIVE_KEY,
        r"-(?<![^\s\"']-)-?(?P<name>[A-Za-z][A-Za-z0-9_\-]{0,63}+)(?:=|[ \t]++)"
        r"(?!\[REDACTED)(?:\"(?P<v1>[^\"\n]*+)\"|'(?P<v2>[^'\n]*+)'|(?P<v3>[^\s\"'`;|&]++))",
        _SENSITIVE_TRIGGERS,
        value_groups=("v1", "v2", "v3"),
        accept=_accept_flag,
    ),
    Rule(  # assignments anywhere: PGPASSWORD=x psql, DB_PASS=x, password='x', key: "x"
        SecretKind.SENSITIVE_KEY,
        r"(?<![\w$.\-])(?P<name>[A-Za-z_][A-Za-z0-9_.]{0,127}+)"
        r"(?:=(?![=\[])(?P<v3>[^\s'\"`;|&<>()]++)"
        r"|(?P<op>[ \t]*+(?::=|=>|[:=])[ \t]*+)(?:\"(?P<v1>[^\"\\\n]*+(?:\\.[^\"\\\n]*+)*+)\""
        r"|'(?P<v2>[^'\\\n]*+(?:\\.[^'\\\n]*+)*+)'))",
        _SENSITIVE_TRIGGERS,
        value_groups=("v1", "v2", "v3"),
        accept=_accept_assignment,
        within_lines=True,
    ),
    Rule(  # a quoted header anywhere: -H 'X-Api-Key: v', "Authorization: token v"
        SecretKind.SENSITIVE_KEY,
        r"(?P<q>[\"'])(?P<name>[A-Za-z][A-Za-z0-9\-]{0,63}+):[ \t]*+"
        r"(?!\[REDACTED)(?P<value>[^\"'\r\n]++)(?P=q)",
        _SENSITIVE_TRIGGERS,
        value_groups=("value",),
        accept=_accept_named,
    ),
    Rule(  # a header anywhere, unquoted: X-Auth-Token: v, Authorization: token v
        SecretKind.SENSITIVE_KEY,
        r"(?<![\w\-./:\"'])(?P<name>[A-Za-z][A-Za-z0-9]*+(?:-[A-Za-z0-9]++)++"
        r"|(?i:authorization)):[ \t]*+"
        r"(?!\[REDACTED)(?P<value>(?:(?i:basic|bearer|token|digest|negotiate|ntlm|apikey)"
        r"[ \t]++)?[^\s\"']++)",
        _HEADER_TRIGGERS,
        value_groups=("value",),
        accept=_accept_header,
        within_lines=True,
    ),
)
"""The text rules, in the order they run (specific shapes before named values)."""
"""In the order they run: whole lines first, then quoted keys, queries, flags, anywhere."""
