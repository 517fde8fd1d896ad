"""Redaction of command lines, mid-line assignments and headers, streams and envelope labels."""

from __future__ import annotations

import io
import json
import re

import pytest
import structlog
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime.guard.secrets.patterns import _GATE, RULES, has_trigger
from runtime.guard.secrets.redaction import (
    is_sensitive_key,
    redact_label,
    redact_stream,
    redact_text,
    redaction_processor,
    scan,
)
from runtime.guard.secrets.rule import Rule
from tests.runtime.secret_shapes import SEPARATORS, SHAPES, SURROUNDING

_MARKER = re.compile(r"\[REDACTED(?::[a-z_]+)?\]")
M = "[REDACTED:sensitive_key]"
C = "[REDACTED:command_credentials]"

# --- the forms an auditor found missing, and the class around them --------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("curl -u bob:hunter2 https://api", f"curl -u bob:{C} https://api"),
        ("curl -sS -ubob:hunter2 https://api", f"curl -sS -ubob:{C} https://api"),
        ("curl -u 'bob:hunter2' https://api", f"curl -u 'bob:{C}' https://api"),
        ("wget --user=bob:hunter2 https://x", f"wget --user=bob:{C} https://x"),
        ("curl --proxy-user bob:hunter2 x", f"curl --proxy-user bob:{C} x"),
        ("http -a bob:hunter2 https://x", f"http -a bob:{C} https://x"),
        ("smbclient //h/s -U bob%hunter2", f"smbclient //h/s -U bob%{C}"),
        ("mysql -h db -u root -phunter2 app", f"mysql -h db -u root -p{C} app"),
        ("mysqldump -uroot -p'hunter 2' app", f"mysqldump -uroot -p{C} app"),
        ("mariadb-dump -phunter2 app", f"mariadb-dump -p{C} app"),
        ("sshpass -p hunter2 ssh host", f"sshpass -p {C} ssh host"),
        ("redis-cli -h cache -a hunter2 ping", f"redis-cli -h cache -a {C} ping"),
        ("mongosh -u admin -p hunter2 db", f"mongosh -u admin -p {C} db"),
        ("sqlcmd -S db -U sa -P hunter2", f"sqlcmd -S db -U sa -P {C}"),
        ("ldapsearch -D cn=admin -w hunter2 -b dc=x", f"ldapsearch -D cn=admin -w {C} -b dc=x"),
        ("zip -P hunter2 a.zip b", f"zip -P {C} a.zip b"),
        ("7z x -phunter2 a.7z", f"7z x -p{C} a.7z"),
        ("docker login -u bob -p hunter2 reg", f"docker login -u bob -p {C} reg"),
        ("openssl enc -passin pass:hunter2 -in x", f"openssl enc -passin pass:{C} -in x"),
        ("cd /app && PGPASSWORD=hunter2 psql -h db", f"cd /app && PGPASSWORD={M} psql -h db"),
        ("run: DB_PASS=hunter2 ./deploy", f"run: DB_PASS={M} ./deploy"),
        (
            "x; env MYSQL_PWD=hunter2 SMTP_PASS_PROD=x y",
            f"x; env MYSQL_PWD={M} SMTP_PASS_PROD={M} y",
        ),
        ("a; STRIPE_KEY=sk_live_x GH_TOKEN=abc b", f"a; STRIPE_KEY={M} GH_TOKEN={M} b"),
        ("x; CLIENT_SECRET='a b' y", f"x; CLIENT_SECRET='{M}' y"),
        ('x; DB_PASS="hunter" ./run', f'x; DB_PASS="{M}" ./run'),
        ("connect(user='u', password='hunter2')", f"connect(user='u', password='{M}')"),
        ('db = connect(passwd="hunter2")', f'db = connect(passwd="{M}")'),
        ('    password = "hunter2"', f'    password = "{M}"'),
        ('  api_key: "abc123"', f'  api_key: "{M}"'),
        ("$cfg = ['password' => 'hunter2'];", f"$cfg = ['password' => '{M}'];"),
        ("then use password=hunter2 to log in", f"then use password={M} to log in"),
        ("curl -H 'X-Api-Key: abc123' https://x", f"curl -H 'X-Api-Key: {M}' https://x"),
        ('curl -H "Authorization: token abc" x', f'curl -H "Authorization: {M}" x'),
        ("curl -H X-Auth-Token:abc123 https://x", f"curl -H X-Auth-Token:{M} https://x"),
        ("sent X-Vault-Token: s.abc123 upstream", f"sent X-Vault-Token: {M} upstream"),
        ("got Proxy-Authorization: Digest abc1 x", f"got Proxy-Authorization: {M} x"),
        ("log Authorization: token abc123 end", f"log Authorization: {M} end"),
        (
            "git clone https://0123456789abcdefXYZ@github.com/o/r",
            "git clone https://[REDACTED:url_credentials]@github.com/o/r",
        ),
    ],
)
def test_command_lines_assignments_and_headers_anywhere_are_redacted(
    text: str, expected: str
) -> None:
    assert redact_text(text) == expected
    assert scan(expected) == []


@pytest.mark.parametrize(
    "text",
    [
        "docker run -p 8080:80 nginx",
        "ssh -p 22 host",
        "psql -h db -p 5432 -U app",
        "pytest -p no:cacheprovider -x",
        "mysql -p app",
        "cp -u a:b /x",
        "docker exec -u root:root c",
        "docker run -u 1000:1000 img",
        "rsync -a host:/src /dst",
        "Enter your password below.",
        "the password: it must be long",
        "the token: is fine",
        "See Authorization: below for details.",
        "def login(password=password):",
        "x = login(user=u, password=pw)",
        "x = f(token=self.token)",
        "x = f(password=settings.DB_PASSWORD)",
        'if password == "x":',
        "a; PRIMARY_KEY=id SORT_KEY=name",
        'cache_key = "user:1"',
        "x; PWD=/home/x OLDPWD=/tmp",
        "x; pass_rate=0.93",
        "x; MAX_TOKENS=4096 GITHUB_TOKEN=$GH_TOKEN",
        "ssh://git@github.com/o/r.git",
        "https://bob@example.com/x",
        "time 12:30:45, host 127.0.0.1:8080",
        "Content-Type: application/json",
        '    OPENAI_KEY = "openai_key"',
        '    TOKEN = "token"',
        '    password = "hunter"',
        "x; GITHUB_TOKEN=... POSTGRES_PASSWORD=***",
        "send x-api-key: … as usual",
    ],
)
def test_ordinary_command_lines_code_and_prose_are_kept(text: str) -> None:
    assert redact_text(text) == text
    assert scan(text) == []


@pytest.mark.parametrize(
    "key",
    [
        "DB_PASS",
        "pass",
        "SMTP_PASS_PROD",
        "MYSQL_PWD",
        "db_pw",
        "STRIPE_KEY",
        "ssh_key",
        "encryptionKey",
        "signing-key",
        "GPG_KEY",
        "dbPass",
    ],
)
def test_names_whose_words_say_secret_are_sensitive(key: str) -> None:
    assert is_sensitive_key(key) is True


@pytest.mark.parametrize(
    "key",
    [
        "PWD",
        "pass_rate",
        "bypass",
        "passes",
        "key",
        "keys",
        "PRIMARY_KEY",
        "idempotency_key",
        "cache_key",
        "public_key",
        "sort_key",
        "DB_PASS_FILE",
        "SSH_KEY_PATH",
        "keyboard",
    ],
)
def test_names_that_only_look_like_secrets_are_not_sensitive(key: str) -> None:
    assert is_sensitive_key(key) is False


@settings(max_examples=300, deadline=None)
@given(text=st.text(alphabet="-apuwkeyhtoscrx:/_ACP \t", max_size=40))
def test_the_grouped_gate_finds_exactly_the_literals_the_rules_need(text: str) -> None:
    lowered = text.lower()
    assert has_trigger(lowered) == any(trigger in lowered for trigger in _GATE)


@pytest.mark.parametrize(
    "text", ["soak-9d9d79-p0-c1-0", "call-ae55723f81f0b045", "run-u7-w2", "x-a-p-u-w"]
)
def test_ids_with_a_flag_like_fragment_skip_the_rules(text: str) -> None:
    # -p, -a, -u, -w are command-line flags only after a blank; ids hold them everywhere
    assert has_trigger(text.lower()) is False


_COMMAND_WORDS = [
    "mysql", "curl", "sshpass", "redis-cli", "sqlcmd", "ldapsearch", "zip", "7z", "login",
    "http", "-p", "-P", "-u", "-U", "-a", "-w", "--user", "--auth", "--proxy-user", "=",
    "user:pw", "hunter2", "x", "'", " ", "\t", "\n",
]  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(words=st.lists(st.sampled_from(_COMMAND_WORDS), max_size=14))
def test_a_rule_never_matches_text_without_one_of_its_triggers(words: list[str]) -> None:
    # the triggers gate the rules: a match in text that holds none of them would be missed
    text = "".join(words)
    lowered = text.lower()
    for rule in RULES:
        if not any(trigger in lowered for trigger in rule.triggers):
            assert rule.apply(text, lowered) is text, (rule.kind, text)


# --- streams ---------------------------------------------------------------------------------

GITHUB = "ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
OPENAI = "sk-proj-abcDEF1234567890abcdefGHIJ_klmn-op"


def test_a_secret_split_over_chunks_is_found_as_in_the_whole_text() -> None:
    chunks = ["my token is ghp_a1B2c3", "D4e5F6g7H8i9J0k1", "L2m3N4o5P6q7R8 ok"]

    assert redact_stream(chunks) == ["my token is ", "", "[REDACTED:github_token] ok"]


def test_chunks_without_a_secret_come_back_unchanged() -> None:
    chunks = ["Hel", "lo, ", "world"]

    assert redact_stream(chunks) == chunks


def test_chunks_around_a_secret_keep_their_boundaries() -> None:
    chunks = ["a", "b ", f"key {GITHUB}", " c", "d"]

    assert redact_stream(chunks) == ["a", "b ", "key [REDACTED:github_token]", " c", "d"]


def test_a_name_and_its_value_in_different_chunks_are_redacted_together() -> None:
    chunks = ["cd /; PGPASS", "WORD=hun", "ter2 psql"]

    assert redact_stream(chunks) == ["cd /; PGPASS", "WORD=", f"{M} psql"]


def test_every_character_its_own_chunk_still_hides_the_secret() -> None:
    text = f"first {GITHUB} then DB_PASS=hunter2 done"

    pieces = redact_stream(list(text))

    assert len(pieces) == len(text)
    assert "".join(pieces) == redact_text(text)
    assert all(p == "" or "a1B2" not in p for p in pieces)


def test_an_empty_stream_stays_empty() -> None:
    assert redact_stream([]) == []


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shape=st.one_of(*SHAPES.values()), data=st.data())
def test_a_stream_split_anywhere_redacts_like_its_whole_text(
    shape: tuple[str, str, str], data: st.DataObject
) -> None:
    _, secret_text, secret = shape
    before, after = data.draw(SURROUNDING), data.draw(SURROUNDING)
    text = before + data.draw(SEPARATORS) + secret_text + data.draw(SEPARATORS) + after
    cuts = sorted(data.draw(st.sets(st.integers(0, len(text)), max_size=8)))
    chunks = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]

    pieces = redact_stream(chunks)

    assert len(pieces) == len(chunks)
    assert "".join(pieces) == redact_text(text)
    assert secret not in "".join(pieces)
    # Half the secret, and at least up to its first digit or capital, which the
    # lower-case surroundings cannot hold.
    marked = next((i for i, c in enumerate(secret) if c.isdigit() or c.isupper()), 0)
    probe = secret[: max(8, len(secret) // 2, marked + 1)]
    if probe not in before + after:  # a marker's own text is no leak (a secret "REDACTED0A00")
        assert all(probe not in _MARKER.sub("", piece) for piece in pieces)


# --- envelope labels -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "label",
    [None, "corr-0123456789abcdef0123", "123e4567-e89b-12d3-a456-426614174000", "c1", "turn-7"],
)
def test_ordinary_labels_come_back_as_they_are(label: str | None) -> None:
    assert redact_label(label) is label


def test_a_secret_in_a_label_is_redacted() -> None:
    assert redact_label(f"corr-{GITHUB}") == "corr-[REDACTED:github_token]"


# --- long text: the costly line rules scan only the lines holding a trigger ------------------

CLEAN_LINE = "2024-01-01T00:00:00Z INFO served path=/api/v1/items status=200 took=12ms"
LINES = st.sampled_from(
    [
        *[CLEAN_LINE] * 12,
        "cd /srv && PGPASSWORD=Sx9aB3cD psql -h db",
        "curl -H X-Auth-Token:abc123 https://x.example.com",
        "engine = connect(host='db', password='Sx9aB3cD')",
        "x = login(user=u, password=pw)",
        "the token: is fine, the key too",
        "Auth-Xtoken: abc123 is not a header we know",
        "",
    ]
)


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=st.lists(LINES, min_size=100, max_size=200))
def test_scanning_only_the_trigger_lines_finds_what_scanning_everything_finds(
    lines: list[str],
) -> None:
    text = "\n".join(lines)
    lowered = text.lower()
    assert len(text) > 4096
    for rule in RULES:
        if not rule.within_lines:
            continue
        whole = Rule.__new__(Rule)
        for slot in Rule.__slots__:
            setattr(whole, slot, getattr(rule, slot))
        whole.within_lines = False
        assert rule.apply(text, lowered) == whole.apply(text, lowered)


def test_ids_in_a_log_line_are_judged_like_envelope_labels() -> None:
    out = io.StringIO()
    logger = structlog.wrap_logger(
        structlog.PrintLogger(out),
        processors=[
            structlog.contextvars.merge_contextvars,
            redaction_processor,
            structlog.processors.JSONRenderer(),
        ],
    )

    with structlog.contextvars.bound_contextvars(correlation_id=f"corr-{OPENAI}"):
        logger.info("request_failed", project_id="p1", note=f"corr-{OPENAI}")

    assert json.loads(out.getvalue()) == {
        "event": "request_failed",
        "correlation_id": "corr-[REDACTED:openai_key]",
        "project_id": "p1",
        "note": f"corr-{OPENAI}",  # in text, "-sk-" does not start a key
    }
