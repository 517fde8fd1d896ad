"""Sensitive key names: whether the value under a name (``api_key``, ``DB_PASS``) is a secret.

Used on the keys of JSON-like data (:mod:`runtime.guard.secrets.redaction`) and on the names
in text (:mod:`runtime.guard.secrets.named_values`); ``docs/redaction.md`` states the rule.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable

__all__ = ["is_env_name", "is_sensitive_key"]

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
_SEPARATOR_CHARS = "-_. "
_SEPARATORS = str.maketrans("", "", _SEPARATOR_CHARS)


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


def is_env_name(name: str) -> bool:
    """Tell whether ``name`` is written as an environment variable (``STRIPE_KEY``)."""
    return _ENV_STYLE.fullmatch(name) is not None


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
    if any(w in _PASS_SEGMENTS for w in words[1:]) or words == ["pass"]:
        return True
    if len(words) < 2:
        return False
    return _LAST_WORDS.get(words[-1], _not_secret)(key, words[-2])


def _not_secret(key: str, before: str) -> bool:
    return False


def _short_pass(key: str, before: str) -> bool:
    return True


def _secret_key(key: str, before: str) -> bool:
    """``key`` after a word that names a secret, or in an environment variable's name."""
    return before not in _BENIGN_KEY_QUALIFIERS and (before in _KEY_QUALIFIERS or is_env_name(key))


_LAST_WORDS: dict[str, Callable[[str, str], bool]] = {
    **dict.fromkeys(_SHORT_PASS_SEGMENTS, _short_pass),
    "key": _secret_key,
}
"""The last words of a name of several words that can make it secret, and how they decide
(given the name and the word before the last)."""


@functools.lru_cache(maxsize=4096)
def _classify_key(key: str) -> bool:
    name = key.lower().translate(_SEPARATORS)
    if name.endswith(_REFERENCE_SUFFIXES):
        # ``llm_api_key_env``, ``password_file``: the value names where a secret lives.
        return False
    if any(word in name for word in _SENSITIVE_WORDS):  # else no benign fragment matters
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
