"""Generated secrets of every shape redaction knows, for the property tests.

Each strategy in :data:`SHAPES` gives ``(kind, text holding the secret, the secret that must
disappear)``; the secret always mixes letters, a digit and a capital, so finding it
anywhere after redaction can only mean it leaked.
"""

from __future__ import annotations

import string

from hypothesis import strategies as st

__all__ = ["B64URL", "BASE62", "SEPARATORS", "SHAPES", "SURROUNDING"]

BASE62 = string.ascii_letters + string.digits
B64URL = BASE62 + "_-"
SURROUNDING = st.text(alphabet=string.ascii_lowercase + " .,!?", max_size=40)
SEPARATORS = st.sampled_from([" ", "\n", "\t", " (", ") ", ", "])


def _random(alphabet: str, min_size: int, max_size: int) -> st.SearchStrategy[str]:
    """Random text that mixes classes, as real secrets do (always a digit and a capital)."""
    return st.builds(
        lambda head, digit, upper, tail: head + digit + upper + tail,
        st.text(alphabet=alphabet, min_size=min_size, max_size=max_size),
        st.sampled_from(string.digits),
        st.sampled_from(string.ascii_uppercase),
        st.text(alphabet=alphabet, min_size=min_size, max_size=max_size),
    )


USERS = st.text(alphabet=string.ascii_lowercase, min_size=1, max_size=10)
PASSWORDS = st.builds(
    lambda head, digit, upper, tail: head + digit + upper + tail,
    st.text(alphabet=string.ascii_letters, min_size=3, max_size=10),
    st.sampled_from(string.digits),
    st.sampled_from(string.ascii_uppercase),
    st.text(alphabet=BASE62 + "._@#", min_size=2, max_size=10),
)
"""A password: starts with a letter, holds a digit and a capital, no shell metacharacter."""


def _pem(body: str) -> str:
    lines = "\n".join(body[i : i + 64] for i in range(0, len(body), 64))
    return f"-----BEGIN EC PRIVATE KEY-----\n{lines}\n-----END EC PRIVATE KEY-----"


SHAPES: dict[str, st.SearchStrategy[tuple[str, str, str]]] = {
    "openai_key": st.builds(
        lambda p, b: ("openai_key", p + b, p + b),
        st.sampled_from(["sk-", "sk-proj-", "sk-svcacct-"]),
        _random(B64URL, 10, 40),
    ),
    "anthropic_key": _random(B64URL, 20, 50).map(
        lambda b: ("anthropic_key", "sk-ant-api03-" + b, "sk-ant-api03-" + b)
    ),
    "github_token": st.one_of(
        st.builds(
            lambda p, b: ("github_token", p + b, p + b),
            st.sampled_from(["ghp_", "gho_", "ghu_", "ghs_", "ghr_"]),
            _random(BASE62, 17, 17),
        ),
        _random(BASE62 + "_", 20, 40).map(
            lambda b: ("github_token", "github_pat_" + b, "github_pat_" + b)
        ),
    ),
    "aws_access_key_id": st.builds(
        lambda p, b: ("aws_access_key_id", p + b, p + b),
        st.sampled_from(["AKIA", "ASIA"]),
        st.text(alphabet=string.ascii_uppercase + string.digits, min_size=16, max_size=16),
    ),
    "aws_secret_access_key": st.builds(
        lambda label, sep, v: ("aws_secret_access_key", f"{label}{sep}{v}", v),
        st.sampled_from(["aws_secret_access_key", "AWS_SECRET_ACCESS_KEY", '"SecretAccessKey"']),
        st.sampled_from(["=", " = ", ": ", ':"']),
        _random(BASE62 + "/+", 19, 19),
    ),
    "slack_token": st.builds(
        lambda p, b: ("slack_token", p + b, p + b),
        st.sampled_from(["xoxb-", "xoxp-", "xapp-1-"]),
        _random(BASE62 + "-", 10, 30),
    ),
    "slack_webhook": _random(BASE62, 8, 20).map(
        lambda b: (
            "slack_webhook",
            f"https://hooks.slack.com/services/T0/B0/{b}",
            f"T0/B0/{b}",
        )
    ),
    "bearer_token": st.builds(
        lambda word, b: ("bearer_token", f"{word} {b}", b),
        st.sampled_from(["Bearer", "bearer", "BEARER"]),
        _random(BASE62 + "._~+/-", 4, 40),
    ),
    "private_key": _random(BASE62 + "+/", 20, 300).map(lambda b: ("private_key", _pem(b), b[:40])),
    "jwt": st.builds(
        lambda h, p, s: ("jwt", f"eyJ{h}.eyJ{p}.{s}", f"eyJ{h}.eyJ{p}.{s}"),
        _random(B64URL, 3, 30),
        _random(B64URL, 3, 60),
        _random(B64URL, 3, 40),
    ),
    "url_credentials": st.builds(
        lambda scheme, user, pw, host: ("url_credentials", f"{scheme}://{user}:{pw}@{host}/x", pw),
        st.sampled_from(["https", "postgres", "redis", "amqp"]),
        st.text(alphabet=string.ascii_lowercase, min_size=1, max_size=10),
        _random(BASE62 + "!*~$%", 4, 20),
        st.from_regex(r"[a-z]{1,10}\.example\.com", fullmatch=True),
    ),
    # Passwords given to command-line clients.
    "command_credentials/curl": st.builds(
        lambda user, pw: (
            "command_credentials",
            f"curl -s -u {user}:{pw} https://api.example.com/x",
            pw,
        ),
        USERS,
        PASSWORDS,
    ),
    "command_credentials/user_flag": st.builds(
        lambda flag, user, pw: (
            "command_credentials",
            f"wget {flag}{user}:{pw} https://x.example.com/",
            pw,
        ),
        st.sampled_from(["--user=", "--user ", "--proxy-user "]),
        USERS,
        PASSWORDS,
    ),
    "command_credentials/client_flag": st.builds(
        lambda template, pw: ("command_credentials", template.format(pw=pw), pw),
        st.sampled_from(
            [
                "mysql -h db -u root -p{pw} app",
                "mysqldump -uroot -p{pw} app",
                "sshpass -p {pw} ssh deploy@host",
                "redis-cli -h cache -a {pw} ping",
                "docker login -u bob -p {pw} registry.example.com",
                "openssl enc -d -passin pass:{pw} -in x.enc",
                "smbclient //srv/share -U bob%{pw}",
                "sqlcmd -S db -U sa -P {pw}",
                "ldapsearch -x -D cn=admin -w {pw} -b dc=x",
                "7z x -p{pw} a.7z",
                # a tab before the flag (JSON writes it as an escape: the whole-document
                # check must not call such data clean)
                "mysql -h db\t-p{pw} app",
                "redis-cli\t-a {pw} ping",
            ]
        ),
        PASSWORDS,
    ),
    # Values named by a sensitive word, anywhere in a line.
    "sensitive_key/env_mid_line": st.builds(
        lambda name, pw: ("sensitive_key", f"cd /srv && {name}={pw} ./deploy.sh", pw),
        st.sampled_from(
            ["PGPASSWORD", "DB_PASS", "MYSQL_PWD", "API_TOKEN", "STRIPE_KEY", "CLIENT_SECRET"]
        ),
        PASSWORDS,
    ),
    "sensitive_key/keyword_argument": st.builds(
        lambda name, quote, pw: (
            "sensitive_key",
            f"connect(host='db', {name}={quote}{pw}{quote})",
            pw,
        ),
        st.sampled_from(["password", "passwd", "api_key", "token", "secret", "db_pass"]),
        st.sampled_from(["'", '"']),
        PASSWORDS,
    ),
    "sensitive_key/quoted_header": st.builds(
        lambda header, pw: ("sensitive_key", f"curl -H '{header}: {pw}' https://x.example.com", pw),
        st.sampled_from(["X-Api-Key", "X-Auth-Token", "Authorization", "Private-Token"]),
        PASSWORDS,
    ),
    "sensitive_key/bare_header": st.builds(
        lambda header, pw: ("sensitive_key", f"sent {header}: {pw} upstream", pw),
        st.sampled_from(["X-Api-Key", "X-Auth-Token", "X-Vault-Token", "Private-Token"]),
        PASSWORDS,
    ),
    "sensitive_key/authorization_mid_line": PASSWORDS.map(
        lambda pw: ("sensitive_key", f"the request had Authorization: token {pw} set", pw)
    ),
    "url_credentials/token_userinfo": _random(BASE62, 8, 20).map(
        lambda tok: ("url_credentials", f"git clone https://{tok}@git.example.com/o/r.git", tok)
    ),
}
