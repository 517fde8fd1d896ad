"""What counts as a secret: sensitive key names, token shapes, and the text rules that find them.

:mod:`runtime.guard.redaction` walks values and calls :func:`redact_string` on every string; this
module holds the decisions. Each :class:`Rule` is one compiled pattern with the cheap
lower-case literals ("triggers") that must occur in a string before the pattern runs at all,
so clean text costs one ``str.lower()`` and a few substring tests.

Every pattern is linear: possessive quantifiers or bounded repeats, no nested quantifiers
over the same characters, and most start with a literal so ``re`` can skip ahead quickly.
A rule that needs judgement (is this name sensitive? is this value a placeholder?) matches
generously and then declines in its ``accept`` hook, which keeps the regexes simple.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable

__all__ = [
    "REDACTED",
    "RULES",
    "Rule",
    "SecretKind",
    "is_redaction_marker",
    "is_sensitive_key",
    "marker",
    "redact_string",
]

REDACTED = "[REDACTED]"
"""What the value under a sensitive key becomes."""


class SecretKind(enum.StrEnum):
    """The stable names of what was found; they appear in findings and in markers."""

    OPENAI_KEY = "openai_key"
    ANTHROPIC_KEY = "anthropic_key"
    GITHUB_TOKEN = "github_token"
    AWS_ACCESS_KEY_ID = "aws_access_key_id"
    AWS_SECRET_ACCESS_KEY = "aws_secret_access_key"
    SLACK_TOKEN = "slack_token"
    SLACK_WEBHOOK = "slack_webhook"
    BEARER_TOKEN = "bearer_token"
    BASIC_AUTH = "basic_auth"
    PRIVATE_KEY = "private_key"
    JWT = "jwt"
    URL_CREDENTIALS = "url_credentials"
    SENSITIVE_KEY = "sensitive_key"
    DEPTH_LIMIT = "depth_limit"


def marker(kind: str) -> str:
    """Return the text that replaces a secret of ``kind`` inside a string."""
    return f"[REDACTED:{kind}]"


_MARKERS = frozenset({REDACTED} | {marker(kind.value) for kind in SecretKind})


def is_redaction_marker(text: str) -> bool:
    """Tell whether ``text`` is exactly a redaction marker (already redacted)."""
    return text in _MARKERS


# --- sensitive key names -----------------------------------------------------------------

_SENSITIVE_WORDS = (
    "token",
    "secret",
    "password",
    "passwd",
    "passphrase",
    "apikey",
    "authorization",
    "credential",
    "privatekey",
    "accesskey",
    "cookie",
)
_BENIGN_FRAGMENTS = (
    # Counts, limits and options that merely mention tokens (their values are numbers),
    "maxtokens",
    "mintokens",
    "numtokens",
    "prompttokens",
    "completiontokens",
    "totaltokens",
    "inputtokens",
    "outputtokens",
    "cachedtokens",
    "reasoningtokens",
    "tokensused",
    "tokenbudget",
    "tokencount",
    "tokenlimit",
    "tokenusage",
    # and descriptions of a token mechanism rather than a token.
    "tokenizer",
    "tokentype",
    "tokenurl",
    "tokenuri",
    "tokenendpoint",
)
_BENIGN_LONGEST_FIRST = sorted(_BENIGN_FRAGMENTS, key=len, reverse=True)
_REFERENCE_SUFFIXES = ("env", "envvar", "path", "file", "filename", "dir")
_SEPARATORS = str.maketrans("", "", "-_. ")
_KEY_CACHE: dict[str, bool] = {}
_KEY_CACHE_MAX = 4096


def _classify_key(key: str) -> bool:
    name = key.lower().translate(_SEPARATORS)
    if not any(word in name for word in _SENSITIVE_WORDS):
        return False
    if name.endswith(_REFERENCE_SUFFIXES):
        # ``llm_api_key_env``, ``password_file``: the value names where a secret lives.
        return False
    for fragment in _BENIGN_LONGEST_FIRST:
        name = name.replace(fragment, " ")
    return any(word in name for word in _SENSITIVE_WORDS)


def is_sensitive_key(key: str) -> bool:
    """Tell whether the value under ``key`` is a secret.

    Case-insensitive, ignoring ``-``, ``_``, ``.`` and spaces: a name containing token,
    secret, password, passwd, passphrase, api_key, authorization, credential, private_key,
    access_key or cookie, except token counts and options (``max_tokens``, ``token_budget``,
    ``tokenizer``) and names of places where a secret lives (``llm_api_key_env``,
    ``password_file``).
    """
    hit = _KEY_CACHE.get(key)
    if hit is None:
        hit = _classify_key(key)
        if len(_KEY_CACHE) >= _KEY_CACHE_MAX:
            _KEY_CACHE.clear()
        _KEY_CACHE[key] = hit
    return hit


# --- text rules ----------------------------------------------------------------------------

Accept = Callable[[re.Match[str], str], bool]
"""A rule's second opinion on a match: ``(match, value) -> redact?``."""


class Rule:
    r"""One secret shape: a pattern, the literals that gate it, and what to replace.

    ``fold``: the pattern is written in lower case and runs on the lowered text (a literal
    prefix keeps it fast; case-insensitive patterns are several times slower).
    ``line_start``: the pattern begins with ``\n`` and runs on the text with a newline
    prepended, so "at the start of a line" is a literal the regex engine can search for.
    """

    __slots__ = (
        "accept",
        "fallback",
        "fold",
        "kind",
        "line_start",
        "pattern",
        "triggers",
        "value_groups",
    )

    def __init__(
        self,
        kind: SecretKind,
        pattern: str,
        triggers: tuple[str, ...],
        *,
        value_groups: tuple[str, ...] = (),
        accept: Accept | None = None,
        fold: bool = False,
        line_start: bool = False,
    ) -> None:
        self.kind: str = kind.value
        """The :class:`SecretKind` value reported for a match."""
        self.pattern = re.compile(pattern)
        """The compiled, linear-time pattern."""
        self.fallback = re.compile(pattern, re.IGNORECASE) if fold else self.pattern
        """For ``fold`` rules: the case-insensitive form, for text whose length lowering changes."""
        self.triggers = triggers
        """Lower-case literals; the rule runs only if the lowered text contains one."""
        self.value_groups = value_groups
        """Groups holding the secret (the first that matched); empty: the whole match."""
        self.accept = accept
        """Declines a match when it returns false (the text is then left as it was)."""
        self.fold = fold
        """Match on the lowered text."""
        self.line_start = line_start
        """Match on the text with a newline prepended."""

    def apply(self, text: str, lowered: str, kinds: list[str] | None) -> str:
        """Replace every accepted match in ``text`` (``lowered`` is ``text.lower()``).

        Appends the kind to ``kinds`` for each replacement; returns ``text`` itself when
        nothing was replaced.
        """
        pattern = self.pattern
        subject = text
        if self.fold:
            if len(lowered) == len(text):
                subject = lowered
            else:
                pattern = self.fallback
        shift = 0
        if self.line_start:
            subject = "\n" + subject
            shift = 1
        replacement = marker(self.kind)
        pieces: list[str] = []
        done = 0
        for match in pattern.finditer(subject):
            start, end = match.span()
            for group in self.value_groups:
                if match.start(group) >= 0:
                    start, end = match.span(group)
                    break
            start -= shift
            end -= shift
            if self.accept is not None and not self.accept(match, text[start:end]):
                continue
            if kinds is not None:
                kinds.append(self.kind)
            pieces.append(text[done:start])
            pieces.append(replacement)
            done = end
        if not pieces:
            return text
        pieces.append(text[done:])
        return "".join(pieces)


def _plausible_value(value: str) -> bool:
    """Tell a value worth hiding from an empty one, a number, a ``$VAR`` or a marker."""
    bare = value.strip().strip("\"'").strip()
    return bool(bare) and not bare.isdigit() and bare[0] != "$" and "[REDACTED" not in bare


def _accept_named(match: re.Match[str], value: str) -> bool:
    return is_sensitive_key(match.group("name")) and _plausible_value(value)


def _accept_flag(match: re.Match[str], value: str) -> bool:
    return not value.startswith("-") and _accept_named(match, value)


def _accept_mixed(match: re.Match[str], value: str) -> bool:
    """Accept random-looking keys; ``sk-learn-style-slugs`` have no digit or capital."""
    return any(c.isdigit() or c.isupper() for c in value)


def _accept_bearer(match: re.Match[str], value: str) -> bool:
    """Accept a token with a digit or of 20+ characters (prose: "Bearer authentication")."""
    return len(value) >= 20 or any(c.isdigit() for c in value)


def _accept_unredacted(match: re.Match[str], value: str) -> bool:
    return not value.startswith("[REDACTED")


def _accept_aws_label(match: re.Match[str], value: str) -> bool:
    """Accept ``secret_access_key`` / ``SecretAccessKey``; ``secret_key`` only after ``aws``."""
    if match.start("access") >= 0:
        return True
    before = match.string[max(0, match.start() - 4) : match.start()].lower()
    return before.rstrip("_-. ").endswith("aws")


def _accept_basic(match: re.Match[str], value: str) -> bool:
    """Accept ``Basic`` credentials only right after an ``Authorization`` label."""
    before = match.string[max(0, match.start() - 40) : match.start()].lower()
    return "authorization" in before


_ALNUM = "A-Za-z0-9"
_B64URL = "A-Za-z0-9_\\-"
_SENSITIVE_TRIGGERS = (
    "token",
    "secret",
    "passw",
    "passphrase",
    "key",
    "authorization",
    "credential",
    "cookie",
)

RULES: tuple[Rule, ...] = (
    Rule(
        SecretKind.PRIVATE_KEY,
        r"-----BEGIN [A-Z0-9 ]{0,40}?PRIVATE KEY(?: BLOCK)?-----"
        r"[^-]*+(?:-(?!----)[^-]*+)*+"
        r"(?:-----END [A-Z0-9 ]{0,40}?PRIVATE KEY(?: BLOCK)?-----)?",
        ("private key",),
    ),
    Rule(
        SecretKind.URL_CREDENTIALS,
        r"://[^\s:/?#@\[\]\"'<>]{0,256}+:"
        r"(?!\[REDACTED)(?P<value>[^\s/?#\"'<>@]{1,256}(?:@[^\s/?#\"'<>@]{1,256})*)"
        r"@(?=[A-Za-z0-9\[])",
        ("://",),
        value_groups=("value",),
        accept=_accept_unredacted,
    ),
    Rule(
        SecretKind.SLACK_WEBHOOK,
        r"hooks\.slack\.com/(?:services|workflows|triggers)/(?P<value>[A-Za-z0-9_/\-]{8,}+)",
        ("hooks.slack.com",),
        value_groups=("value",),
    ),
    Rule(
        SecretKind.AWS_SECRET_ACCESS_KEY,
        r"secret[_\-. ]?(?P<access>access[_\-. ]?)?key"
        r"[\"']?[ \t]*+[:=][ \t]*+[\"']?(?P<value>[a-z0-9/+=]{16,}+)",
        ("secret",),
        value_groups=("value",),
        accept=_accept_aws_label,
        fold=True,
    ),
    Rule(
        SecretKind.BEARER_TOKEN,
        r"bearer(?<![a-z0-9]bearer)[ \t]++(?P<value>[a-z0-9._~+/\-]{8,}+=*+)",
        ("bearer",),
        value_groups=("value",),
        accept=_accept_bearer,
        fold=True,
    ),
    Rule(
        SecretKind.BASIC_AUTH,
        r"basic(?<![a-z0-9]basic)[ \t]++(?P<value>[a-z0-9+/]{8,}+=*+)",
        ("basic",),
        value_groups=("value",),
        accept=_accept_basic,
        fold=True,
    ),
    Rule(
        SecretKind.ANTHROPIC_KEY,
        rf"sk-ant-(?<![{_B64URL}]sk-ant-)[{_B64URL}]{{20,}}+",
        ("sk-ant-",),
    ),
    Rule(
        SecretKind.OPENAI_KEY,
        rf"sk-(?<![{_B64URL}]sk-)[{_B64URL}]{{20,}}+",
        ("sk-",),
        accept=_accept_mixed,
    ),
    Rule(
        SecretKind.GITHUB_TOKEN,
        rf"g(?:h[pousr]_(?<![{_ALNUM}]gh[pousr]_)[{_ALNUM}]{{30,}}+"
        rf"|ithub_pat_(?<![{_ALNUM}]github_pat_)[{_ALNUM}_]{{30,}}+)",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    ),
    Rule(
        SecretKind.AWS_ACCESS_KEY_ID,
        rf"A(?:KIA|SIA)(?<![{_ALNUM}]A[KS]IA)[A-Z0-9]{{16}}(?![{_ALNUM}])",
        ("akia", "asia"),
    ),
    Rule(
        SecretKind.SLACK_TOKEN,
        rf"x(?:ox[abposr]|app)-(?<![{_ALNUM}]x(?:ox[abposr]|app)-)[A-Za-z0-9\-]{{10,}}+",
        ("xox", "xapp-"),
    ),
    Rule(
        SecretKind.JWT,
        rf"eyJ(?<![{_B64URL}]eyJ)[{_B64URL}]{{5,}}+\.[{_B64URL}]{{5,}}+\.[{_B64URL}]*+",
        ("eyj",),
    ),
    # Values named by a sensitive word, in the text forms they usually take.
    Rule(  # .env files and `env` output: NAME=value at the start of a line
        SecretKind.SENSITIVE_KEY,
        r"\n(?:[A-Za-z]{1,16}[ \t]++)?(?P<name>[A-Za-z_][A-Za-z0-9_.\-]{0,127}+)="
        r"(?!\[REDACTED)(?P<value>[^\r\n]+)",
        _SENSITIVE_TRIGGERS,
        value_groups=("value",),
        accept=_accept_named,
        line_start=True,
    ),
    Rule(  # HTTP headers and top-level YAML: Name: value at the start of a line
        SecretKind.SENSITIVE_KEY,
        r"\n(?:[<>] )?(?P<name>[A-Za-z][A-Za-z0-9\-]{0,63}+):[ \t]++"
        r"(?!\[REDACTED)(?P<value>[^\r\n]+)",
        _SENSITIVE_TRIGGERS,
        value_groups=("value",),
        accept=_accept_named,
        line_start=True,
    ),
    Rule(  # JSON and Python literals: "name": "value"
        SecretKind.SENSITIVE_KEY,
        r"(?P<q>[\"'])(?P<name>[A-Za-z0-9_.\- ]{1,64}+)(?P=q)[ \t]*+:[ \t]*+"
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
)
"""The text rules, in the order they run (specific shapes before named values)."""

_ALL_TRIGGERS = {trigger for rule in RULES for trigger in rule.triggers}
_GATE = tuple(sorted(t for t in _ALL_TRIGGERS if not any(u != t and u in t for u in _ALL_TRIGGERS)))
_MIN_SECRET_LEN = 7  # "token=x" is the shortest text any rule can match


def _apply_rules(text: str, lowered: str, kinds: list[str] | None) -> str:
    result = text
    for rule in RULES:
        for trigger in rule.triggers:
            if trigger in lowered:
                changed = rule.apply(result, lowered, kinds)
                if changed is not result:
                    result = changed
                    lowered = changed.lower()
                break
    return result


_MAX_PASSES = 4


def redact_string(text: str, kinds: list[str] | None = None) -> str:
    """Return ``text`` with every known secret shape replaced by ``[REDACTED:<kind>]``.

    Returns ``text`` itself when nothing was found. With ``kinds``, appends the kind of
    every replacement to it, in rule order. A text that changed is run through the rules
    again until it stops changing: a replacement can shift how quotes or separators pair
    up in malformed text, and redaction must be idempotent.
    """
    if len(text) < _MIN_SECRET_LEN:
        return text
    lowered = text.lower()
    for trigger in _GATE:
        if trigger in lowered:
            break
    else:
        return text
    result = _apply_rules(text, lowered, kinds)
    passes = 1
    while result is not text and passes < _MAX_PASSES:
        text, passes = result, passes + 1
        result = _apply_rules(text, text.lower(), kinds)
    return result
