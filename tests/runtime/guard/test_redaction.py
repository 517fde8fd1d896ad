"""Secret redaction: token shapes, sensitive keys, scanning, the log processor, properties."""

from __future__ import annotations

import io
import json
import string
from typing import Any

import msgspec
import pytest
import structlog
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime.guard.secrets.clean_check import json_looks_clean
from runtime.guard.secrets.patterns import _ALL_TRIGGERS, has_ascii_trigger, has_trigger
from runtime.guard.secrets.redaction import (
    MAX_DEPTH,
    REDACTED,
    Finding,
    SecretKind,
    finding_kinds,
    is_sensitive_key,
    redact,
    redact_encoded,
    redact_text,
    redact_with_findings,
    redaction_processor,
    scan,
)
from tests.runtime.secret_shapes import SEPARATORS, SHAPES, SURROUNDING

OPENAI = "sk-proj-abcDEF1234567890abcdefGHIJ_klmn-op"
ANTHROPIC = "sk-ant-api03-abcDEF1234567890abcdefGHIJ_klmn-opAA"
GITHUB = "ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
GITHUB_PAT = "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFG"
AWS_ID = "AKIAIOSFODNN7EXAMPLE"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJlX2hlcmU"
PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\n"
    "MIIEowIBAAKCAQEAx4fQ\n"
    "Zm9vYmFyYmF6cXV4==\n"
    "-----END RSA PRIVATE KEY-----"
)


# --- token shapes ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"key {OPENAI} done", "key [REDACTED:openai_key] done"),
        ("key sk-Abc1234567890defghijKLMNOP", "key [REDACTED:openai_key]"),
        (f"key {ANTHROPIC} done", "key [REDACTED:anthropic_key] done"),
        (f"token {GITHUB}.", "token [REDACTED:github_token]."),
        (f"token gho_{'x9' * 18}", "token [REDACTED:github_token]"),
        (f"token {GITHUB_PAT}", "token [REDACTED:github_token]"),
        (f"id {AWS_ID} here", "id [REDACTED:aws_access_key_id] here"),
        ("id ASIAY34FZKBOKMUTVV7A", "id [REDACTED:aws_access_key_id]"),
        (
            f"aws_secret_access_key = {AWS_SECRET}",
            "aws_secret_access_key = [REDACTED:aws_secret_access_key]",
        ),
        (
            f'"SecretAccessKey": "{AWS_SECRET}"',
            '"SecretAccessKey": "[REDACTED:aws_secret_access_key]"',
        ),
        (
            f"AWS_SECRET_KEY={AWS_SECRET}",
            "AWS_SECRET_KEY=[REDACTED:aws_secret_access_key]",
        ),
        ("slack xoxb-1234567890-0987654321-AbCdEfGhIj end", "slack [REDACTED:slack_token] end"),
        ("app xapp-1-A0123456789-abcdef0123", "app [REDACTED:slack_token]"),
        (
            "post https://hooks.slack.com/services/T0000/B0000/XXXXXXXXXXXXXXXX now",
            "post https://hooks.slack.com/services/[REDACTED:slack_webhook] now",
        ),
        (
            "curl -H 'Authorization: Bearer abc123def456ghi' x",
            "curl -H 'Authorization: Bearer [REDACTED:bearer_token]' x",
        ),
        ("auth bearer abcdefghijklmnopqrstuvwxyz", "auth bearer [REDACTED:bearer_token]"),
        (
            "Authorization: Basic dXNlcjpwYXNzd29yZA==",
            "Authorization: Basic [REDACTED:basic_auth]",
        ),
        (f"before\n{PEM}\nafter", "before\n[REDACTED:private_key]\nafter"),
        (
            "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk=\n"
            "-----END OPENSSH PRIVATE KEY-----",
            "[REDACTED:private_key]",
        ),
        (f"jwt {JWT} end", "jwt [REDACTED:jwt] end"),
        (
            "db postgres://bob:s3cr3t@db.example.com:5432/app",
            "db postgres://bob:[REDACTED:url_credentials]@db.example.com:5432/app",
        ),
        ("redis://:hunter2@cache:6379", "redis://:[REDACTED:url_credentials]@cache:6379"),
    ],
)
def test_each_token_shape_is_replaced_by_its_kind_marker(text: str, expected: str) -> None:
    assert redact_text(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "DB_PASSWORD=hunter2\nDEBUG=1\n",
            "DB_PASSWORD=[REDACTED:sensitive_key]\nDEBUG=1\n",
        ),
        ("export API_TOKEN='abc def'", "export API_TOKEN=[REDACTED:sensitive_key]"),
        ("Cookie: session=abc\nAccept: */*", "Cookie: [REDACTED:sensitive_key]\nAccept: */*"),
        ("password: hunter2", "password: [REDACTED:sensitive_key]"),
        (
            '{"access_token": "ya29.a0Af", "token_type": "Bearer", "expires_in": 3600}',
            '{"access_token": "[REDACTED:sensitive_key]", "token_type": "Bearer", '
            '"expires_in": 3600}',
        ),
        ("{'password': 'hunter2'}", "{'password': '[REDACTED:sensitive_key]'}"),
        (
            "https://api.example.com/v1?api_key=abc123&q=x",
            "https://api.example.com/v1?api_key=[REDACTED:sensitive_key]&q=x",
        ),
        (
            "mysql --password=hunter2 --user bob --token abc",
            "mysql --password=[REDACTED:sensitive_key] --user bob --token [REDACTED:sensitive_key]",
        ),
    ],
)
def test_values_named_by_a_sensitive_word_in_text_are_replaced(text: str, expected: str) -> None:
    assert redact_text(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "MAX_TOKENS=4096",
        "export GITHUB_TOKEN=$GH_TOKEN",
        '{"token": "", "max_tokens": "100", "token_type": "Bearer"}',
        "--api-key-env OPENAI_API_KEY --token-budget 5000",
        "?max_tokens=50&tokenizer=cl100k",
        "token: [REDACTED:github_token]",
        "    api_key: str | None = None",
        "def login(password=password):",
    ],
)
def test_numbers_references_and_code_in_named_text_values_are_kept(text: str) -> None:
    assert redact_text(text) == text


@pytest.mark.parametrize(
    "text",
    [
        "3f786850e387550fdab836ed7e6dc881de23001b",
        "123e4567-e89b-12d3-a456-426614174000",
        "project/src/token_utils.py",
        "C:\\Users\\bob\\.ssh\\id_rsa",
        "file:///etc/hosts",
        "sk",
        "sk-learn and sk-",
        "sk-learn-compatible-estimator-module",
        "risk-assessment-of-the-deployment-pipeline",
        "the token is valid",
        "Use Bearer authentication for the API.",
        "a basic understanding of the basics",
        "123456789012345678901234567890",
        "ssh://git@github.com/org/repo.git",
        "https://example.com:8080/path?q=1&page=2",
        "eyJ alone",
        "AKIAshort",
    ],
)
def test_ordinary_text_is_not_redacted(text: str) -> None:
    assert redact_text(text) == text
    assert scan(text) == []


def test_an_unterminated_private_key_block_is_redacted_to_the_end() -> None:
    text = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\nMIIEpAIBAAKCAQEA"

    assert redact_text(text) == "[REDACTED:private_key]"


def test_a_url_password_containing_an_at_sign_is_redacted_whole() -> None:
    text = "postgres://bob:p@ss:w0rd@db.example.com/app"

    assert redact_text(text) == "postgres://bob:[REDACTED:url_credentials]@db.example.com/app"


def test_text_whose_length_changes_when_lowered_is_still_redacted() -> None:
    text = "İstanbul Bearer abc123def456ghi"

    assert redact_text(text) == "İstanbul Bearer [REDACTED:bearer_token]"


def test_a_bearer_token_in_an_authorization_header_line_is_reported_once() -> None:
    text = "GET / HTTP/1.1\nAuthorization: Bearer abc123def456ghi\n"

    assert redact_text(text) == "GET / HTTP/1.1\nAuthorization: Bearer [REDACTED:bearer_token]\n"
    assert scan(text) == [Finding("bearer_token", "$")]


def test_every_kind_is_a_stable_snake_case_string() -> None:
    assert sorted(kind.value for kind in SecretKind) == [
        "anthropic_key",
        "aws_access_key_id",
        "aws_secret_access_key",
        "basic_auth",
        "bearer_token",
        "command_credentials",
        "depth_limit",
        "github_token",
        "jwt",
        "openai_key",
        "private_key",
        "secret_value",
        "sensitive_key",
        "slack_token",
        "slack_webhook",
        "url_credentials",
    ]


# --- sensitive keys --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "key",
    [
        "token",
        "access_token",
        "X-Auth-Token",
        "refreshToken",
        "client_secret",
        "PASSWORD",
        "db_passwd",
        "api_key",
        "apiKey",
        "x-api-key",
        "Authorization",
        "credentials",
        "private_key",
        "aws_access_key_id",
        "Set-Cookie",
        "passphrase",
        "access_tokens",
    ],
)
def test_sensitive_keys_are_recognised_ignoring_case_and_separators(key: str) -> None:
    assert is_sensitive_key(key) is True


@pytest.mark.parametrize(
    "key",
    [
        "max_tokens",
        "llm_max_tokens",
        "token_budget",
        "tokens_used",
        "prompt_tokens",
        "completion_tokens",
        "total_tokens",
        "tokenizer",
        "token_type",
        "llm_api_key_env",
        "password_file",
        "author",
        "content",
        "denied_keys",
        "session_id",
    ],
)
def test_counts_options_and_references_are_not_sensitive_keys(key: str) -> None:
    assert is_sensitive_key(key) is False


def test_values_under_sensitive_keys_are_redacted_at_any_depth() -> None:
    data = {
        "password": "hunter2",
        "result": {"items": [{"name": "a", "api_key": "k-123"}, {"headers": {"X-Token": "t"}}]},
    }

    assert redact(data) == {
        "password": REDACTED,
        "result": {
            "items": [{"name": "a", "api_key": REDACTED}, {"headers": {"X-Token": REDACTED}}]
        },
    }


def test_numbers_booleans_null_and_empty_strings_under_sensitive_keys_are_kept() -> None:
    data = {"max_tokens": 100, "token": 5, "secret": True, "password": None, "api_key": ""}

    assert redact(data) == data
    assert scan(data) == []


def test_every_string_inside_a_structure_under_a_sensitive_key_is_redacted() -> None:
    data = {"credentials": {"user": "bob", "expires": 3600, "scopes": ["read", "write"]}}

    assert redact(data) == {
        "credentials": {"user": REDACTED, "expires": 3600, "scopes": [REDACTED, REDACTED]}
    }


def test_dict_keys_are_kept_and_tuples_become_lists() -> None:
    data = {"password": ("a", 1), ("x", 1): f"see {GITHUB}"}

    assert redact(data) == {"password": [REDACTED, 1], ("x", 1): "see [REDACTED:github_token]"}


def test_clean_data_comes_back_as_the_same_object() -> None:
    data = {"call_id": "call-1", "result": {"lines": ["a", "b"], "n": 3}, "flags": []}

    assert redact(data) is data


def test_a_password_flag_after_a_tab_is_redacted_inside_data() -> None:
    # JSON writes the tab as an escape, which once hid the flag from the clean check.
    data = {"command": "mysql\t-pS3cretValue9 app", "nested": ["psql\t-w", "redis-cli\t-a x"]}

    assert redact(data)["command"] == "mysql\t-p[REDACTED:command_credentials] app"
    assert redact_encoded(data, msgspec.json.encode(data)) == redact_with_findings(data)[0]


def test_every_trigger_either_survives_json_or_holds_the_one_escape_the_check_refuses() -> None:
    """The clean check reads JSON text: a trigger JSON writes otherwise would hide there.

    A new rule whose trigger holds a quote, a backslash or a control character other than
    the tab fails here until the clean check learns to refuse that escape too.
    """
    for trigger in sorted(_ALL_TRIGGERS):
        encoded = msgspec.json.encode(trigger).decode()[1:-1]
        assert trigger in encoded or "\t" in trigger, trigger
        assert not json_looks_clean(msgspec.json.encode({"text": f"x {trigger} y"})), trigger


def test_redact_leaves_its_input_unchanged() -> None:
    data = {"result": {"content": f"key={OPENAI}", "items": [GITHUB]}, "token": "t"}
    before = json.dumps(data)

    redact(data)

    assert json.dumps(data) == before


def test_containers_nested_deeper_than_the_limit_are_replaced_whole() -> None:
    deep: Any = ["leaf"]
    for _ in range(MAX_DEPTH + 5):
        deep = [deep]

    out = redact({"x": deep})

    node = out["x"]
    for _ in range(MAX_DEPTH - 1):
        node = node[0]
    assert node == "[REDACTED:depth_limit]"
    assert scan({"x": deep}) == [Finding("depth_limit", "$.x" + "[0]" * (MAX_DEPTH - 1))]


# --- scan ------------------------------------------------------------------------------------


def test_scan_lists_kind_and_path_of_every_secret_in_document_order() -> None:
    data = {
        "result": {
            "items": [
                {"content": "nothing"},
                {"content": f"a {GITHUB} b {JWT}"},
                {"content": f"id {AWS_ID}"},
            ]
        },
        "meta": {"password": "x"},
    }

    assert scan(data) == [
        Finding("github_token", "$.result.items[1].content"),
        Finding("jwt", "$.result.items[1].content"),
        Finding("aws_access_key_id", "$.result.items[2].content"),
        Finding("sensitive_key", "$.meta.password"),
    ]


def test_scan_names_the_token_shape_found_under_a_sensitive_key() -> None:
    assert scan({"api_key": OPENAI}) == [Finding("openai_key", "$.api_key")]


def test_scan_quotes_keys_that_are_not_identifiers() -> None:
    assert scan({"X-Api-Key": "abc", "a b": [OPENAI]}) == [
        Finding("sensitive_key", '$["X-Api-Key"]'),
        Finding("openai_key", '$["a b"][0]'),
    ]


def test_scan_changes_nothing() -> None:
    data = {"password": "p", "text": OPENAI}

    scan(data)

    assert data == {"password": "p", "text": OPENAI}


def test_redact_with_findings_gives_both_results_in_one_walk() -> None:
    data = {"token": "t", "items": [f"key {OPENAI}"]}

    assert redact_with_findings(data) == (
        {"token": REDACTED, "items": ["key [REDACTED:openai_key]"]},
        [Finding("sensitive_key", "$.token"), Finding("openai_key", "$.items[0]")],
    )


def test_finding_kinds_are_distinct_and_sorted() -> None:
    findings = scan([JWT, GITHUB, JWT, {"token": "t"}])

    assert finding_kinds(findings) == ["github_token", "jwt", "sensitive_key"]


# --- structlog -------------------------------------------------------------------------------


def _logger(out: io.StringIO) -> Any:
    return structlog.wrap_logger(
        structlog.PrintLogger(out),
        processors=[
            structlog.processors.format_exc_info,
            redaction_processor,
            structlog.processors.JSONRenderer(),
        ],
    )


def test_the_log_processor_redacts_every_value_of_a_log_line() -> None:
    out = io.StringIO()

    _logger(out).info(
        "request_sent",
        password="hunter2",
        header="Authorization: Bearer abc123def456ghi",
        body={"client_secret": "s", "n": 2},
        max_tokens=100,
    )

    assert json.loads(out.getvalue()) == {
        "event": "request_sent",
        "password": REDACTED,
        "header": "Authorization: Bearer [REDACTED:bearer_token]",
        "body": {"client_secret": REDACTED, "n": 2},
        "max_tokens": 100,
    }


def test_the_log_processor_judges_ids_strictly_and_tabs_in_lines_that_look_plain() -> None:
    line = {
        "event": "turn_ended",
        "seq": 3,
        "correlation_id": f"corr-{OPENAI}",
        "command": "mysql\t-pS3cretValue9",
    }

    event = redaction_processor(None, "info", dict(line))

    assert event == {
        "event": "turn_ended",
        "seq": 3,
        "correlation_id": "corr-[REDACTED:openai_key]",
        "command": "mysql\t-p[REDACTED:command_credentials]",
    }


def test_the_log_processor_returns_a_clean_line_unchanged() -> None:
    line = {"event": "turn_ended", "seq": 3, "project_id": "p-1", "outcome": "ok", "ms": [1]}
    values = list(line.values())

    event = redaction_processor(None, "info", line)

    assert event == line
    assert all(new is old for new, old in zip(event.values(), values, strict=True))


GATE_TEXT = st.lists(
    st.one_of(
        st.sampled_from(sorted(_ALL_TRIGGERS)).map(lambda t: t[: len(t) // 2 + 1]),
        st.sampled_from(sorted(_ALL_TRIGGERS)),
        st.text(alphabet=string.printable, max_size=6),
    ),
    max_size=8,
).map("".join)


@settings(max_examples=300, deadline=None)
@given(text=GATE_TEXT)
def test_the_gate_on_ascii_bytes_agrees_with_the_gate_on_text(text: str) -> None:
    lowered = text.lower()

    assert has_ascii_trigger(lowered.encode("ascii")) == has_trigger(lowered)


@pytest.mark.parametrize("trigger", sorted(_ALL_TRIGGERS))
def test_the_gate_on_ascii_bytes_finds_every_trigger(trigger: str) -> None:
    assert has_ascii_trigger(f"x {trigger} y".encode("ascii"))


def test_the_log_processor_redacts_tracebacks() -> None:
    out = io.StringIO()

    try:
        raise ValueError(f"bad key {OPENAI}")
    except ValueError:
        _logger(out).exception("call_failed")

    line = json.loads(out.getvalue())
    assert OPENAI not in line["exception"]
    assert "ValueError: bad key [REDACTED:openai_key]" in line["exception"]


def test_the_log_processor_redacts_the_repr_of_other_objects() -> None:
    class Connection:
        def __repr__(self) -> str:
            return "Connection(postgres://bob:s3cr3t@db/app)"

    plain = object()
    event = redaction_processor(None, "info", {"event": "x", "conn": Connection(), "o": plain})

    assert event == {
        "event": "x",
        "conn": "Connection(postgres://bob:[REDACTED:url_credentials]@db/app)",
        "o": plain,
    }


def test_the_log_processor_redacts_sets_and_objects_nested_in_a_value() -> None:
    # The walk passed sets and objects inside a dict or list through untouched, and the
    # renderer then wrote a set's items or an object's repr: the token reached the log.
    class Config:
        def __repr__(self) -> str:
            return f"Config(token={GITHUB})"

    line = {
        "event": "x",
        "v": {"names": {GITHUB}, "items": [Config()], "password": frozenset({"hunter2"})},
        "clean": {"n": 1, "s": ["a"]},
    }
    clean = line["clean"]

    event = redaction_processor(None, "info", dict(line))

    rendered = json.dumps(event, default=repr)
    assert GITHUB not in rendered and "hunter2" not in rendered
    assert event["v"]["names"] == ["[REDACTED:github_token]"]
    assert event["v"]["password"] == ["[REDACTED]"]
    assert event["clean"] is clean


def test_the_log_processor_leaves_exc_info_to_format_exc_info() -> None:
    error = ValueError(f"bad key {OPENAI}")

    event = redaction_processor(None, "error", {"event": "x", "exc_info": error})

    assert event["exc_info"] is error


# --- large and pathological input ------------------------------------------------------------


def test_a_megabyte_of_log_text_is_redacted_completely() -> None:
    line = "2024-01-01T00:00:00Z INFO served path=/api/v1/items status=200 took=12ms\n"
    chunk = line * 12 + f"Authorization: Bearer abc123def456ghi\nkey {OPENAI}\n"
    text = chunk * (1_000_000 // len(chunk))

    out = redact_text(text)

    count = text.count(chunk)
    assert "abc123def456ghi" not in out
    assert OPENAI not in out
    assert out.count("[REDACTED:bearer_token]") == count
    assert out.count("[REDACTED:openai_key]") == count
    assert len(scan(text)) == 2 * count


@pytest.mark.parametrize(
    "unit",
    [
        "sk-",
        "://a:",
        "-----BEGIN RSA PRIVATE KEY-----",
        "eyJ",
        "bearer ",
        "\nTOKEN=$",
        '"token": "',
        "?token=",
        " --token",
        "secret_access_key=",
        "ghp_",
        "AKIA",
        "xoxb-",
        '"',
        "a",
        "mysql ",
        "curl -u ",
        " -u a:",
        "DB_PASS=",
        "x-api-key: ",
        "password='",
        "-passin pass:x ",
        "docker login ",
        "(password=p, ",
        "://abcdefghij0123456789@",
    ],
)
@pytest.mark.slow
def test_pathological_repetitions_of_a_megabyte_are_handled(unit: str) -> None:
    text = unit * (1_000_000 // len(unit))

    out = redact_text(text)

    assert redact_text(out) == out
    assert scan(out) == []


# --- properties ------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", sorted(SHAPES))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_generated_secret_in_random_text_never_survives_redaction(
    shape: str, data: st.DataObject
) -> None:
    found_kind, secret_text, secret = data.draw(SHAPES[shape])
    text = (
        data.draw(SURROUNDING)
        + data.draw(SEPARATORS)
        + secret_text
        + data.draw(SEPARATORS)
        + data.draw(SURROUNDING)
    )

    assert secret not in redact_text(text)
    assert secret not in redact({"result": {"items": [text]}})["result"]["items"][0]
    assert found_kind in {finding.kind for finding in scan({"content": text})}


HEX = "0123456789abcdef"
WORDS = st.lists(st.text(alphabet=string.ascii_letters, min_size=1, max_size=12), max_size=12)
CLEAN = st.one_of(
    st.text(alphabet=HEX, min_size=40, max_size=40),
    st.uuids().map(str),
    WORDS.map(" ".join),
    WORDS.map(lambda parts: "/" + "/".join(parts) + ".py"),
    st.integers().map(str),
    st.floats(allow_nan=False).map(repr),
)


@settings(max_examples=200, deadline=None)
@given(text=CLEAN)
def test_shas_uuids_words_paths_and_numbers_pass_unchanged(text: str) -> None:
    assert redact_text(text) == text
    assert redact({"value": text}) == {"value": text}
    assert scan(text) == []


SECRET_TEXT = st.one_of(*SHAPES.values()).map(lambda shape: shape[1])
LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.text(max_size=30),
    SECRET_TEXT,
    st.builds(lambda a, b: a + " " + b, SURROUNDING, SECRET_TEXT),
)
KEYS = st.one_of(
    st.sampled_from(["token", "max_tokens", "content", "api_key", "items", "Authorization"]),
    st.text(max_size=8),
)
DOCUMENTS = st.recursive(
    LEAVES,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(KEYS, children, max_size=4)
    ),
    max_leaves=20,
)


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(document=DOCUMENTS)
def test_redaction_is_idempotent_and_leaves_nothing_to_find(document: Any) -> None:
    once = redact(document)

    assert redact(once) == once
    assert scan(once) == []


@settings(max_examples=150, deadline=None)
@given(document=DOCUMENTS)
def test_redacting_with_the_encoded_text_redacts_what_redact_does(document: Any) -> None:
    try:
        encoded = msgspec.json.encode(document, order="sorted")
    except TypeError:  # a dict with keys of several types cannot be sorted
        encoded = msgspec.json.encode(document)

    full_walk = redact_with_findings(document)[0]  # no clean check: what it must equal
    assert redact_encoded(document, encoded) == redact(document) == full_walk


@settings(max_examples=150, deadline=None)
@given(text=st.text(max_size=200))
def test_redacting_arbitrary_text_is_idempotent(text: str) -> None:
    once = redact_text(text)

    assert redact_text(once) == once
