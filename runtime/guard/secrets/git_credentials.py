"""Credentials git keeps in a repository's own configuration, as secret values to mask.

A checkout made with a token keeps it in ``.git/config``: in a remote's URL
(``url = https://deploy:TOKEN@host/repo.git``, or the token alone as the user name), or,
as CI checkouts do, in an extra header (``http.<url>.extraheader = AUTHORIZATION: basic
base64(x-access-token:TOKEN)``). A command must be able to read ``.git/config`` (git reads
it), so ``base64 .git/config`` or ``git remote -v | rev`` would print the token in a form
no shape rule knows. :func:`git_config_values` finds these values in the file's text for
:class:`runtime.guard.secrets.sources.SecretSources`, which masks them like the values of
a sensitive file. Only credentials are taken: a remote URL without one, user names and
every other setting stay readable.
"""

from __future__ import annotations

import base64
import binascii
import re
from urllib.parse import unquote

from runtime.guard.secrets.rule import ordinary_word

__all__ = ["GIT_CONFIG_FILES", "MIN_USER_TOKEN", "git_config_values"]

GIT_CONFIG_FILES: tuple[str, ...] = (".git/config", ".git/config.worktree")
"""The repository's own configuration files, relative to the root."""

MIN_USER_TOKEN = 16
"""Shortest user name, with no password after it, taken for a token (``https://TOKEN@``)."""

_USERINFO = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://([^\s/@\"'?#]+)@")
_AUTHORIZATION = re.compile(r"(?i)authorization:\s*(basic|bearer|token)\s+([^\s\"';]+)")


def git_config_values(text: str, min_length: int = 8) -> set[str]:
    """The credentials in a git configuration file's ``text`` (see the module docstring).

    Each value is returned as the file writes it and percent-decoded; values shorter than
    ``min_length`` are left out.
    """
    found: set[str] = set()
    for match in _USERINFO.finditer(text):
        user, colon, password = match.group(1).partition(":")
        if colon:
            found |= {password, unquote(password)}
        elif len(user) >= MIN_USER_TOKEN and not ordinary_word(user):
            found |= {user, unquote(user)}
    for match in _AUTHORIZATION.finditer(text):
        scheme, credential = match.group(1).lower(), match.group(2)
        found.add(credential)
        if scheme == "basic":
            try:
                decoded = base64.b64decode(credential, validate=True).decode("utf-8")
            except (binascii.Error, UnicodeDecodeError):
                continue
            found |= {decoded, decoded.partition(":")[2]}
    return {value for value in found if len(value) >= min_length}
