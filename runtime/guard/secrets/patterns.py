"""The rule table: the secret shapes, in the order they run, and :func:`redact_string`.

Token shapes (OpenAI, GitHub, AWS, JWT, PEM, ...) and passwords given to command-line clients
come first, the values under a sensitive name last
(:mod:`runtime.guard.secrets.named_values`). :mod:`runtime.guard.secrets.redaction` calls
:func:`redact_string` on every string; ``docs/redaction.md`` lists the forms.
"""

from __future__ import annotations

import re

from runtime.guard.secrets.named_values import NAMED_VALUE_RULES
from runtime.guard.secrets.rule import (
    UNNOTED,
    FoldedRule,
    Recorder,
    Rule,
    SecretKind,
    plausible_value,
)

__all__ = ["RULES", "has_ascii_trigger", "has_trigger", "redact_string"]


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


def _accept_credential(match: re.Match[str], value: str) -> bool:
    """Accept a password given to a client; not a number (``-u 1000:1000``) nor a path."""
    return plausible_value(value) and value.lstrip("\"'")[:1] not in ("/", "~")


def _accept_userinfo(match: re.Match[str], value: str) -> bool:
    """Accept a lone URL userinfo that looks like a token: letters and digits, 16+ long."""
    return any(c.isdigit() for c in value) and any(c.isalpha() for c in value)


_ALNUM = "A-Za-z0-9"
_B64URL = "A-Za-z0-9_\\-"
_SHELL_VALUE = r"(?!\[REDACTED)(?:\"[^\"\n]*+\"|'[^'\n]*+'|[^\s'\"`;|&<>()]++)"
"""One shell word as a value: double-quoted, single-quoted or bare."""
_USERINFO = r"[\"']?[^\s:%\"'@]*+[:%](?!\[REDACTED)"
"""``user:`` (or ``user%`` for Samba) before a password, optionally after a quote."""


def _args_before(*programs: str) -> str:
    """Up to 16 arguments of the same command before a flag.

    Never across ``|``, ``;``, ``&`` or a newline, and never over the next occurrence of
    one of ``programs`` (that one starts its own match), so the scan stays linear.
    """
    again = "|".join(re.escape(p) for p in programs)
    return rf"(?:[ \t]++(?!{again})[^\s|;&]++){{0,16}}?"


def _program(*names: str) -> str:
    """Any of ``names`` as a whole word (literal first, so ``re`` can skip to it)."""
    return "|".join(rf"{re.escape(n)}(?<![\w./\-]{re.escape(n)})" for n in names)


def _after_blank(*flags: str) -> tuple[str, ...]:
    r"""Triggers for flags that a pattern finds only after ``[ \t]++``: each after a blank.

    A bare ``-p`` or ``-a`` is in most generated ids (``p0-c1``, ``call-a3f…``), so every
    id went through the rules (~15 µs each, about a third of a host's CPU per turn in the
    soak); with the blank, none does.
    """
    return tuple(blank + flag for flag in flags for blank in (" ", "\t"))


def _client_rule(programs: tuple[str, ...], flag: str, *, separate: bool) -> Rule:
    """``PROGRAM ... FLAG<password>`` (and ``FLAG <password>`` when ``separate``).

    The rule's triggers are the flag after a blank (`` -p``, a tab and ``-p``), not the
    program: every match holds both, and the few flags keep the gate that every string
    passes short (the programs would add a dozen literals, ``http`` among them, to the
    journal's hot path). The blank is part of every match and keeps ids such as
    ``soak-p0-c1`` or ``call-ab12`` out of the rules (:func:`_after_blank`).
    """
    gap = "[ \t]*+" if separate else ""
    return Rule(
        SecretKind.COMMAND_CREDENTIALS,
        rf"(?:{_program(*programs)})[a-z\-]*+(?:\.exe)?(?![\w\-.]){_args_before(*programs)}"
        rf"[ \t]++{flag}{gap}(?P<value>{_SHELL_VALUE})",
        _after_blank(flag.lower()),
        value_groups=("value",),
        accept=_accept_credential,
    )


_CLIENT_RULES = (
    # mysql -ppw: attached only ("-p pw" asks for a password and pw is the database)
    _client_rule(("mysql", "mariadb"), "-p", separate=False),
    _client_rule(("sshpass",), "-p", separate=True),
    _client_rule(("redis-cli",), "-a", separate=True),
    _client_rule(("mongo",), "-p", separate=True),
    _client_rule(("sqlcmd", "bcp", "osql"), "-P", separate=True),
    _client_rule(("ldap",), "-w", separate=True),
    _client_rule(("zip", "unzip", "zipcloak"), "-P", separate=True),
    _client_rule(("7z",), "-p", separate=False),
    # docker login -p pw (and podman, nerdctl, buildah, skopeo, helm registry login)
    _client_rule(("login",), "-p", separate=True),
    Rule(  # openssl ... -passin pass:pw
        SecretKind.COMMAND_CREDENTIALS,
        rf"-pass(?<![\w\-]-pass)(?:in|out|word)?[ \t]++pass:(?P<value>{_SHELL_VALUE})",
        ("pass:",),
        value_groups=("value",),
        accept=_accept_credential,
    ),
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
    Rule(  # a token alone as the userinfo: https://<token>@host
        SecretKind.URL_CREDENTIALS,
        r"://(?P<value>[A-Za-z0-9._~%\-]{16,256}+)@(?=[A-Za-z0-9\[])",
        ("://",),
        value_groups=("value",),
        accept=_accept_userinfo,
    ),
    Rule(
        SecretKind.SLACK_WEBHOOK,
        r"hooks\.slack\.com/(?:services|workflows|triggers)/(?P<value>[A-Za-z0-9_/\-]{8,}+)",
        ("hooks.slack.com",),
        value_groups=("value",),
    ),
    FoldedRule(
        SecretKind.AWS_SECRET_ACCESS_KEY,
        r"secret[_\-. ]?(?P<access>access[_\-. ]?)?key"
        r"[\"']?[ \t]*+[:=][ \t]*+[\"']?(?P<value>[a-z0-9/+=]{16,}+)",
        ("secret",),
        value_groups=("value",),
        accept=_accept_aws_label,
    ),
    FoldedRule(
        SecretKind.BEARER_TOKEN,
        r"bearer(?<![a-z0-9]bearer)[ \t]++(?P<value>[a-z0-9._~+/\-]{8,}+=*+)",
        ("bearer",),
        value_groups=("value",),
        accept=_accept_bearer,
    ),
    FoldedRule(
        SecretKind.BASIC_AUTH,
        r"basic(?<![a-z0-9]basic)[ \t]++(?P<value>[a-z0-9+/]{8,}+=*+)",
        ("basic",),
        value_groups=("value",),
        accept=_accept_basic,
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
    # Passwords given to command-line clients.
    Rule(  # --user user:pw, --proxy-user user:pw, --auth user:pw (curl, wget, httpie)
        SecretKind.COMMAND_CREDENTIALS,
        rf"--(?<![^\s\"'=]--)(?:proxy-user|user|auth)(?:=|[ \t]++){_USERINFO}"
        r"(?P<value>[^\s\"']++)",
        ("-user", "--auth"),  # --user, --proxy-user, --auth
        value_groups=("value",),
        accept=_accept_credential,
    ),
    Rule(  # curl -u user:pw, smbclient -U user%pw, http -a user:pw
        SecretKind.COMMAND_CREDENTIALS,
        rf"(?:{_program('curl', 'smbclient', 'rpcclient', 'smbget', 'smbmap', 'http', 'xh')})"
        rf"s?(?:\.exe)?(?![\w\-./:]){_args_before('curl', 'smb', 'rpcclient', 'http', 'xh')}"
        rf"[ \t]++-(?:[uU][ \t]*+|a[ \t]++){_USERINFO}(?P<value>[^\s\"']++)",
        _after_blank("-u", "-a"),  # the flags, not the programs (see _client_rule)
        value_groups=("value",),
        accept=_accept_credential,
    ),
    *_CLIENT_RULES,  # mysql -ppw, sshpass -p pw, redis-cli -a pw, docker login -p pw, ...
    *NAMED_VALUE_RULES,  # TOKEN=..., "password": "...", X-Api-Key: ..., --token ...
)
"""The text rules, in the order they run (specific shapes before named values)."""


_ALL_TRIGGERS = {trigger for rule in RULES for trigger in rule.triggers}
_GATE = tuple(sorted(t for t in _ALL_TRIGGERS if not any(u != t and u in t for u in _ALL_TRIGGERS)))
_MIN_SECRET_LEN = 7  # "token=x" is the shortest text any rule can match


def _gate_plan() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The gate as lone literals plus one small pattern per first letter they share.

    ``x in text`` costs about the same for any short literal, so literals that start alike
    (``-a``, ``-p``, ``-u``, ``-w``; ``ghp_`` … ``github_pat_``) are searched together:
    ``re`` skips to their first letter and tests the rest there, half the time of one
    search each (measured on a journal event's JSON: ~2.2 µs against ~4.1 µs). A literal
    led by a blank (`` -p``) is grouped by the letter after it and tests the blank behind
    it (a pattern led by a blank would stop at every space of prose).
    """
    groups: dict[str, list[str]] = {}
    for trigger in _GATE:
        groups.setdefault(trigger.lstrip(_BLANKS)[0], []).append(trigger)
    literals = tuple(g[0] for g in groups.values() if len(g) == 1 and g[0][0] not in _BLANKS)
    patterns = tuple(
        re.escape(first) + "(?:" + "|".join(_alternatives(g)) + ")"
        for first, g in groups.items()
        if len(g) > 1 or g[0][0] in _BLANKS
    )
    return literals, patterns


_BLANKS = " \t"


def _alternatives(group: list[str]) -> list[str]:
    """A group's literals after its first letter, longest first; a blank-led one as a lookbehind."""
    behind: dict[str, str] = {}  # the literal without its blanks -> the blanks it follows
    plain: list[str] = []
    for trigger in group:
        core = trigger.lstrip(_BLANKS)
        if core == trigger:
            plain.append(re.escape(trigger[1:]))
        else:
            behind[core] = behind.get(core, "") + trigger[: len(trigger) - len(core)]
    after = [
        re.escape(core[1:]) + f"(?<=[{re.escape(blanks)}]{re.escape(core)})"
        for core, blanks in behind.items()
    ]
    return sorted(plain, key=len, reverse=True) + after


_GATE_LITERALS, _GATE_PATTERNS = _gate_plan()
_GATE_SEARCHES = tuple(re.compile(pattern).search for pattern in _GATE_PATTERNS)
_ASCII_GATE = re.compile(
    "|".join([*map(re.escape, _GATE_LITERALS), *_GATE_PATTERNS]).encode("ascii")
).search
"""The whole gate as one search over ASCII bytes: one call into ``re`` for a document."""


def has_trigger(lowered: str) -> bool:
    """Tell whether lower-cased text holds a literal some rule needs (else nothing matches)."""
    for literal in _GATE_LITERALS:
        if literal in lowered:
            return True
    return any(search(lowered) for search in _GATE_SEARCHES)


def has_ascii_trigger(lowered: bytes) -> bool:
    """:func:`has_trigger` of lower-cased ASCII text given as bytes (no decode, no copy)."""
    return _ASCII_GATE(lowered) is not None


def _apply_rules(text: str, lowered: str, replaced: Recorder) -> str:
    result = text
    seen: dict[str, bool] = {}  # trigger -> in lowered (rules share most of their triggers)
    for rule in RULES:
        for trigger in rule.triggers:
            present = seen.get(trigger)
            if present is None:
                present = seen[trigger] = trigger in lowered
            if present:
                changed = rule.apply(result, lowered, replaced)
                if changed is not result:
                    result = changed
                    lowered = changed.lower()
                    seen.clear()
                break
    return result


_MAX_PASSES = 4


def redact_string(text: str, replaced: Recorder = UNNOTED) -> str:
    """Return ``text`` with every known secret shape replaced by ``[REDACTED:<kind>]``.

    Returns ``text`` itself when nothing was found. Each rule's replacements are noted in
    ``replaced`` (a :class:`~runtime.guard.secrets.rule.Replaced` keeps their kinds, in rule
    order, and where they lie). A text that changed is run through the rules again until
    it stops changing: a replacement can shift how quotes or separators pair up in
    malformed text, and redaction must be idempotent.
    """
    if len(text) < _MIN_SECRET_LEN:
        return text
    lowered = text.lower()
    if not has_trigger(lowered):
        return text
    result = _apply_rules(text, lowered, replaced)
    passes = 1
    while result is not text and passes < _MAX_PASSES:
        text, passes = result, passes + 1
        result = _apply_rules(text, text.lower(), replaced)
    return result
