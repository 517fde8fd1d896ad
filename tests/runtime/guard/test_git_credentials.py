"""Credentials in a repository's git configuration (``runtime.guard.secrets.git_credentials``)."""

from __future__ import annotations

import base64

from runtime.guard.secrets.git_credentials import git_config_values

CONFIG = """[core]
\trepositoryformatversion = 0
\tbare = false
[remote "origin"]
\turl = https://deploy:p%40ss-Word-123@git.example.com/team/repo.git
\tfetch = +refs/heads/*:refs/remotes/origin/*
[remote "mirror"]
\turl = https://ghp_abcdefghijklmnopqrstuvwxyz0123456789@github.com/team/repo.git
[remote "public"]
\turl = https://github.com/team/repo.git
[remote "named"]
\turl = ssh://git@example.com/team/repo.git
[http "https://github.com/"]
\textraheader = AUTHORIZATION: basic {header}
[http "https://other.example/"]
\textraHeader = Authorization: Bearer eyJhbGciOi.payload-part.signature
"""


def test_tokens_in_urls_and_extra_headers_are_found_and_nothing_else() -> None:
    header = base64.b64encode(b"x-access-token:ghs_0123456789abcdefABCDEF").decode()
    found = git_config_values(CONFIG.format(header=header))
    assert found == {
        "p%40ss-Word-123",
        "p@ss-Word-123",
        "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
        header,
        "x-access-token:ghs_0123456789abcdefABCDEF",
        "ghs_0123456789abcdefABCDEF",
        "eyJhbGciOi.payload-part.signature",
    }


def test_short_values_and_plain_user_names_are_left() -> None:
    text = '[remote "o"]\n\turl = https://bob:short@h/r.git\n\turl = https://deploy-bot@h/r.git\n'
    assert git_config_values(text) == set()
