"""What counts as a secret: sensitive key names, token shapes, and the text rules that find them.

:mod:`runtime.guard.secrets.redaction` walks values and calls :func:`redact_string` on every string;
this module holds the decisions. Each :class:`Rule` is one compiled pattern with the cheap
lower-case literals ("triggers") that must occur in a string before the pattern runs at all,
so clean text costs one ``str.lower()`` and a few substring tests.

Every pattern is linear: possessive quantifiers or bounded repeats, no nested quantifiers
over the same characters, and most start with a literal so ``re`` can skip ahead quickly.
A rule that needs judgement (is this name sensitive? is this value a placeholder?) matches
generously and then declines in its ``accept`` hook, which keeps the regexes simple.
"""

from __future__ import annotations

import enum
import functools
import itertools
import re
from collections.abc import Callable, Iterable

__all__ = [
    "REDACTED",
    "RULES",
    "Rule",
    "SecretKind",
    "SpanMap",
    "has_trigger",
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
    COMMAND_CREDENTIALS = "command_credentials"
    SENSITIVE_KEY = "sensitive_key"
    SECRET_VALUE = "secret_value"
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


_SEGMENT = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
_ENV_STYLE = re.compile(r"[A-Z][A-Z0-9_]*")
_PASS_SEGMENTS = frozenset({"pass", "passcode"})
_SHORT_PASS_SEGMENTS = frozenset({"pwd", "pw"})
_KEY_QUALIFIERS = frozenset(
    {
        "access",
        "account",
        "api",
        "app",
        "auth",
        "client",
        "consumer",
        "crypt",
        "decryption",
        "deploy",
        "encryption",
        "gpg",
        "hmac",
        "license",
        "master",
        "pgp",
        "private",
        "rsa",
        "secret",
        "service",
        "session",
        "signing",
        "ssh",
        "subscription",
        "webhook",
    }
)
_BENIGN_KEY_QUALIFIERS = frozenset(
    {
        "cache",
        "composite",
        "dedup",
        "foreign",
        "group",
        "hash",
        "host",
        "idempotency",
        "index",
        "known",
        "lookup",
        "map",
        "object",
        "partition",
        "primary",
        "pub",
        "public",
        "routing",
        "row",
        "shard",
        "sort",
        "unique",
    }
)


def _segments_say_secret(key: str) -> bool:
    """The names that only their words give away: ``DB_PASS``, ``mysql_pwd``, ``STRIPE_KEY``.

    ``pass`` as a word that is not the first of several (``DB_PASS``, ``SMTP_PASS_PROD``,
    ``pass``; not ``pass_rate``); ``pwd``/``pw`` as the last word after another
    (``MYSQL_PWD``; not the shell's ``PWD``); ``key`` as the last word after another when
    the name is an environment variable (``STRIPE_KEY``) or the word before it names a
    secret (``ssh_key``, ``encryptionKey``), except keys that are not secrets
    (``PRIMARY_KEY``, ``idempotency_key``).
    """
    words = [w.lower() for w in _SEGMENT.findall(key)]
    if not words:
        return False
    if any(w in _PASS_SEGMENTS for w in words[1:]) or words == ["pass"]:
        return True
    if len(words) < 2:
        return False
    last, before = words[-1], words[-2]
    if last in _SHORT_PASS_SEGMENTS:
        return True
    if last != "key" or before in _BENIGN_KEY_QUALIFIERS:
        return False
    return before in _KEY_QUALIFIERS or _ENV_STYLE.fullmatch(key) is not None


@functools.lru_cache(maxsize=4096)
def _classify_key(key: str) -> bool:
    name = key.lower().translate(_SEPARATORS)
    if name.endswith(_REFERENCE_SUFFIXES):
        # ``llm_api_key_env``, ``password_file``: the value names where a secret lives.
        return False
    if any(word in name for word in _SENSITIVE_WORDS):
        for fragment in _BENIGN_LONGEST_FIRST:
            name = name.replace(fragment, " ")
        if any(word in name for word in _SENSITIVE_WORDS):
            return True
    return _segments_say_secret(key)


def is_sensitive_key(key: str) -> bool:
    """Tell whether the value under ``key`` is a secret.

    Case-insensitive, ignoring ``-``, ``_``, ``.`` and spaces: a name containing token,
    secret, password, passwd, passphrase, api_key, authorization, credential, private_key,
    access_key or cookie, except token counts and options (``max_tokens``, ``token_budget``,
    ``tokenizer``) and names of places where a secret lives (``llm_api_key_env``,
    ``password_file``). Also names whose words say so: ``DB_PASS``, ``MYSQL_PWD``,
    ``STRIPE_KEY``, ``ssh_key`` (see :func:`_segments_say_secret`).
    """
    return _classify_key(key)


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
        "within_lines",
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
        within_lines: bool = False,
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
        self.within_lines = within_lines
        """Every match lies on one line holding a trigger: in long text, scan only those."""

    def apply(
        self, text: str, lowered: str, kinds: list[str] | None, spans: SpanMap | None = None
    ) -> str:
        """Replace every accepted match in ``text`` (``lowered`` is ``text.lower()``).

        Appends the kind to ``kinds`` for each replacement, and records the replaced
        ranges in ``spans``; returns ``text`` itself when nothing was replaced.
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
        edits: list[tuple[int, int]] | None = [] if spans is not None else None
        pieces: list[str] = []
        done = 0
        windows = None
        if self.within_lines and len(subject) > _WINDOWS_FROM and len(lowered) == len(text):
            windows = _trigger_lines(lowered, self.triggers)
        if windows is None:
            matches: Iterable[re.Match[str]] = pattern.finditer(subject)
        else:
            matches = itertools.chain.from_iterable(
                pattern.finditer(subject, a, b) for a, b in windows
            )
        for match in matches:
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
            if edits is not None:
                edits.append((start, end))
            pieces.append(text[done:start])
            pieces.append(replacement)
            done = end
        if not pieces:
            return text
        pieces.append(text[done:])
        if spans is not None and edits:
            spans.record(edits, len(replacement))
        return "".join(pieces)


_WINDOWS_FROM = 4096
_MAX_WINDOWS = 4096


def _trigger_lines(lowered: str, triggers: tuple[str, ...]) -> list[tuple[int, int]] | None:
    """The lines of ``lowered`` holding a trigger, merged, as ``(start, end)`` ranges.

    None when scanning them would not pay: few lines at all, more than
    :data:`_MAX_WINDOWS` of them, or together more than half the text.
    """
    if lowered.count("\n", 0, _WINDOWS_FROM) < 8:
        return None  # long lines: a window would be most of the text
    found: list[tuple[int, int]] = []
    for trigger in triggers:
        at = lowered.find(trigger)
        while at >= 0:
            start = lowered.rfind("\n", 0, at) + 1
            end = lowered.find("\n", at)
            end = len(lowered) if end < 0 else end
            found.append((start, end))
            if len(found) > _MAX_WINDOWS:
                return None
            at = lowered.find(trigger, end)
    found.sort()
    merged: list[tuple[int, int]] = []
    covered = 0
    for start, end in found:
        if merged and start <= merged[-1][1] + 1:
            last = merged[-1]
            covered += max(0, end - last[1])
            merged[-1] = (last[0], max(last[1], end))
        else:
            merged.append((start, end))
            covered += end - start
    return None if covered * 2 > len(lowered) else merged


_ALNUM_CHAR = re.compile(r"[^\W_]")


def _plausible_value(value: str) -> bool:
    """Tell a value worth hiding from nothing: empty, a number, ``$VAR``, a marker, ``...``.

    A value without any letter or digit (``...``, ``…``, ``***``) is a placeholder.
    """
    bare = value.strip().strip("\"'").strip()
    return (
        bool(bare)
        and not bare.isdigit()
        and bare[0] != "$"
        and "[REDACTED" not in bare
        and _ALNUM_CHAR.search(bare) is not None
    )


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


_PLAIN_WORDS = re.compile(r"[a-z]++(?:[_.\-][a-z]++)*+")
_IDENTIFIER_VALUE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*+(?:\.[A-Za-z_][A-Za-z0-9_]*+)*+[,)\]}]*+")


def _accept_assignment(match: re.Match[str], value: str) -> bool:
    """Accept ``NAME=value`` mid-line; a lower-case name with a bare identifier is code.

    ``PGPASSWORD=x psql`` and ``DB_PASS=x`` (environment variables), quoted literals
    (``password='x'``) and ``password=hunter2`` in a sentence are secrets;
    ``login(password=password)`` and ``token=self.token`` pass a variable, not a secret.
    """
    if not _accept_named(match, value):
        return False
    name = match.group("name")
    if match.start("v3") < 0:
        if " " not in match.group("op") and "\t" not in match.group("op"):
            return True  # password='x', DB_PASS="x": a keyword argument or a shell variable
        # Code: OPENAI_KEY = "openai_key" names a thing; a secret has a digit or a capital.
        words = value.lower()
        return _PLAIN_WORDS.fullmatch(value) is None and words != name.lower()
    if _ENV_STYLE.fullmatch(name):
        return True
    if _IDENTIFIER_VALUE.fullmatch(value) is None:
        return True
    if "." in value:
        return False  # a reference: password=settings.DB_PASSWORD
    start = match.start()
    before = match.string[max(0, start - 64) : start].rstrip(" \t")[-1:]
    return before not in ("(", ",")  # a keyword argument: login(password=password)


_AUTH_SCHEME = re.compile(r"(?:basic|bearer|token|digest|negotiate|ntlm|apikey)[ \t]", re.I)


def _accept_header(match: re.Match[str], value: str) -> bool:
    """Accept ``X-Api-Key: v`` anywhere; a bare ``Authorization:`` needs a credential."""
    name = match.group("name")
    if "-" in name:
        lowered = name.lower()
        return any(t in lowered for t in _HEADER_TRIGGERS) and _accept_named(match, value)
    if name.lower() != "authorization" or not _plausible_value(value):
        return False
    return bool(_AUTH_SCHEME.match(value)) or len(value) >= 20 or any(c.isdigit() for c in value)


def _accept_credential(match: re.Match[str], value: str) -> bool:
    """Accept a password given to a client; not a number (``-u 1000:1000``) nor a path."""
    return _plausible_value(value) and value.lstrip("\"'")[:1] not in ("/", "~")


def _accept_userinfo(match: re.Match[str], value: str) -> bool:
    """Accept a lone URL userinfo that looks like a token: letters and digits, 16+ long."""
    return any(c.isdigit() for c in value) and any(c.isalpha() for c in value)


_ALNUM = "A-Za-z0-9"
_B64URL = "A-Za-z0-9_\\-"
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


def _client_rule(programs: tuple[str, ...], flag: str, *, separate: bool) -> Rule:
    """``PROGRAM ... FLAG<password>`` (and ``FLAG <password>`` when ``separate``).

    The rule's trigger is the flag (``-p``), not the program: every match holds both, and
    the few flags keep the gate that every string passes short (the programs would add a
    dozen literals, ``http`` among them, to the journal's hot path).
    """
    gap = "[ \t]*+" if separate else ""
    return Rule(
        SecretKind.COMMAND_CREDENTIALS,
        rf"(?:{_program(*programs)})[a-z\-]*+(?:\.exe)?(?![\w\-.]){_args_before(*programs)}"
        rf"[ \t]++{flag}{gap}(?P<value>{_SHELL_VALUE})",
        (flag.lower(),),
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
    # Passwords given to command-line clients.
    Rule(  # --user user:pw, --proxy-user user:pw, --auth user:pw (curl, wget, httpie)
        SecretKind.COMMAND_CREDENTIALS,
        rf"--(?<![^\s\"'=]--)(?:proxy-user|user|auth)(?:=|[ \t]++){_USERINFO}"
        r"(?P<value>[^\s\"']++)",
        ("-u", "-a"),  # --user, --proxy-user, --auth
        value_groups=("value",),
        accept=_accept_credential,
    ),
    Rule(  # curl -u user:pw, smbclient -U user%pw, http -a user:pw
        SecretKind.COMMAND_CREDENTIALS,
        rf"(?:{_program('curl', 'smbclient', 'rpcclient', 'smbget', 'smbmap', 'http', 'xh')})"
        rf"s?(?:\.exe)?(?![\w\-./:]){_args_before('curl', 'smb', 'rpcclient', 'http', 'xh')}"
        rf"[ \t]++-(?:[uU][ \t]*+|a[ \t]++){_USERINFO}(?P<value>[^\s\"']++)",
        ("-u", "-a"),  # the flags, not the programs (see _client_rule)
        value_groups=("value",),
        accept=_accept_credential,
    ),
    *_CLIENT_RULES,  # mysql -ppw, sshpass -p pw, redis-cli -a pw, docker login -p pw, ...
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


class SpanMap:
    """Where the replacements of one :func:`redact_string` call lie in the original text.

    ``spans`` is a sorted list of disjoint ``[orig_start, orig_end, cur_start, cur_end]``:
    ``original[orig_start:orig_end]`` became ``redacted[cur_start:cur_end]`` (a marker, or
    markers and the text between them when a later rule replaced text around an earlier
    marker). Outside the spans both texts are the same characters, shifted. Used to cut a
    redacted stream where its chunks were cut
    (:func:`runtime.guard.secrets.redaction.redact_stream`).
    """

    __slots__ = ("spans",)

    def __init__(self) -> None:
        self.spans: list[list[int]] = []
        """``[orig_start, orig_end, cur_start, cur_end]`` of every replaced range, in order."""

    def record(self, edits: list[tuple[int, int]], width: int) -> None:
        """One rule replaced each ``(start, end)`` of the current text by ``width`` characters."""
        old, new = self.spans, []
        i = 0
        drift = 0  # current - original, for positions after old[:i]
        shift = 0  # after these edits - before them, for positions after the edits so far
        for a, b in edits:
            while i < len(old) and old[i][3] <= a:
                o0, o1, c0, c1 = old[i]
                new.append([o0, o1, c0 + shift, c1 + shift])
                drift += (c1 - c0) - (o1 - o0)
                i += 1
            lo, orig_lo = a, a - drift
            hi, orig_hi = b, -1
            while i < len(old) and old[i][2] < b:  # an earlier span the edit overlaps
                o0, o1, c0, c1 = old[i]
                if c0 < lo:
                    lo, orig_lo = c0, o0
                if c1 > hi:
                    hi, orig_hi = c1, o1
                drift += (c1 - c0) - (o1 - o0)
                i += 1
            if orig_hi < 0:
                orig_hi = b - drift
            start = lo + shift
            new.append([orig_lo, orig_hi, start, start + (a - lo) + width + (hi - b)])
            shift += width - (b - a)
        for o0, o1, c0, c1 in old[i:]:
            new.append([o0, o1, c0 + shift, c1 + shift])
        self.spans = new


_ALL_TRIGGERS = {trigger for rule in RULES for trigger in rule.triggers}
_GATE = tuple(sorted(t for t in _ALL_TRIGGERS if not any(u != t and u in t for u in _ALL_TRIGGERS)))
_MIN_SECRET_LEN = 7  # "token=x" is the shortest text any rule can match


def _gate_plan() -> tuple[tuple[str, ...], tuple[Callable[[str], object], ...]]:
    """The gate as lone literals plus one small pattern per first letter they share.

    ``x in text`` costs about the same for any short literal, so literals that start alike
    (``-a``, ``-p``, ``-u``, ``-w``; ``ghp_`` … ``github_pat_``) are searched together:
    ``re`` skips to their first letter and tests the rest there, half the time of one
    search each (measured on a journal event's JSON: ~2.2 µs against ~4.1 µs).
    """
    groups: dict[str, list[str]] = {}
    for trigger in _GATE:
        groups.setdefault(trigger[0], []).append(trigger)
    literals = tuple(g[0] for g in groups.values() if len(g) == 1)
    searches = tuple(
        re.compile(
            re.escape(first)
            + "(?:"
            + "|".join(re.escape(t[1:]) for t in sorted(g, key=len, reverse=True))
            + ")"
        ).search
        for first, g in groups.items()
        if len(g) > 1
    )
    return literals, searches


_GATE_LITERALS, _GATE_SEARCHES = _gate_plan()


def has_trigger(lowered: str) -> bool:
    """Tell whether lower-cased text holds a literal some rule needs (else nothing matches)."""
    for literal in _GATE_LITERALS:
        if literal in lowered:
            return True
    return any(search(lowered) for search in _GATE_SEARCHES)


def _apply_rules(
    text: str, lowered: str, kinds: list[str] | None, spans: SpanMap | None = None
) -> str:
    result = text
    seen: dict[str, bool] = {}  # trigger -> in lowered (rules share most of their triggers)
    for rule in RULES:
        for trigger in rule.triggers:
            present = seen.get(trigger)
            if present is None:
                present = seen[trigger] = trigger in lowered
            if present:
                changed = rule.apply(result, lowered, kinds, spans)
                if changed is not result:
                    result = changed
                    lowered = changed.lower()
                    seen.clear()
                break
    return result


_MAX_PASSES = 4


def redact_string(text: str, kinds: list[str] | None = None, spans: SpanMap | None = None) -> str:
    """Return ``text`` with every known secret shape replaced by ``[REDACTED:<kind>]``.

    Returns ``text`` itself when nothing was found. With ``kinds``, appends the kind of
    every replacement to it, in rule order; with ``spans``, records where each replacement
    lies. A text that changed is run through the rules again until it stops changing: a
    replacement can shift how quotes or separators pair up in malformed text, and
    redaction must be idempotent.
    """
    if len(text) < _MIN_SECRET_LEN:
        return text
    lowered = text.lower()
    if not has_trigger(lowered):
        return text
    result = _apply_rules(text, lowered, kinds, spans)
    passes = 1
    while result is not text and passes < _MAX_PASSES:
        text, passes = result, passes + 1
        result = _apply_rules(text, text.lower(), kinds, spans)
    return result
