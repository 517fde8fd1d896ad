"""Redaction that holds everywhere, through a real daemon, its SQLite journal and the CLI.

Three findings of an audit, each driven through the real client or ``roost`` and checked
in the journal file's bytes, the daemon log, ``roost timeline``, ``roost tail --json``
and ``roost incident --format md``:

1. a secret streamed token by token (a real OpenAI-compatible stream on loopback, every
   character its own delta) or split over the deterministic model's ``delta_chunks``;
2. a secret in an envelope field the client chooses (correlation id, idempotency key,
   project and conversation ids): refused at the gateway, nothing stored;
3. the command-line, mid-line and header forms (``curl -u``, ``PGPASSWORD=… psql``,
   ``-H 'X-Api-Key: …'``, ``DB_PASS=``, ``mysql -p…``, ``password='…'``) in a message,
   a tool's arguments and a tool's result.

The secrets are drawn fresh for the module, so finding one anywhere means it leaked.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import string
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime.client import Client
from runtime.errors import BadRequestError
from tests.integration.adversarial_helpers import run_daemon
from tests.integration.conftest import REPO_ROOT, Daemon, daemon_env, make_root
from tests.runtime.chat_server import ChatServer, StreamReply

C = "c"
_ALNUM = string.ascii_letters + string.digits


def _fresh(size: int) -> str:
    return "".join(secrets.choice(_ALNUM) for _ in range(size - 2)) + "7Q"


GITHUB = "ghp_" + _fresh(36)
STREAMED_PW = "Pw" + _fresh(14)
SPLIT = "ghp_" + _fresh(36)
FORMS = {name: "Sx" + _fresh(14) for name in ("curl", "pg", "header", "db", "mysql", "kwarg")}
"""One password per form of finding 3."""
FORMS_TEXT = (
    f"curl -s -u deploy:{FORMS['curl']} https://api.example.com/v1/items\n"
    f"cd /srv && PGPASSWORD={FORMS['pg']} psql -h db -U app\n"
    f"curl -H 'X-Api-Key: {FORMS['header']}' https://api.example.com\n"
    f"DB_PASS={FORMS['db']}\n"
    f"mysql -h db -u root -p{FORMS['mysql']} app\n"
    f"engine = connect(host='db', password='{FORMS['kwarg']}')\n"
)
ALL = [GITHUB, STREAMED_PW, SPLIT, *FORMS.values()]


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("redaction")


@pytest.fixture(scope="module")
def chat() -> Iterator[ChatServer]:
    with ChatServer() as server:
        yield server


@pytest.fixture(scope="module")
def daemon(base: Path, chat: ChatServer) -> Iterator[Daemon]:
    with run_daemon(base / "home") as running, running.client(timeout_s=60) as client:
        openai = {"llm_adapter": "openai", "llm_base_url": chat.base_url, "llm_model": "m"}
        for project, options in (("oai", openai), ("det", {})):
            root = Path(make_root(base / project))
            (root / "deploy.md").write_text(FORMS_TEXT)
            client.start_project(str(root), project_id=project, options=options)
            client.start_conversation(project, conversation_id=C)
        yield running


@pytest.fixture
def client(daemon: Daemon) -> Iterator[Client]:
    with daemon.client(timeout_s=60) as c:
        yield c


def roost(daemon: Daemon, *args: str) -> subprocess.CompletedProcess[str]:
    """Run the real CLI against the module's daemon."""
    return subprocess.run(
        [sys.executable, "-m", "runtime.cli", "--home", daemon.home, *args],
        env={**os.environ, **daemon_env()},
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def tail_json(daemon: Daemon, project: str, until_seq: int) -> list[dict[str, Any]]:
    """``roost tail PROJECT --json`` up to the event at ``until_seq``, then Ctrl-C."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "runtime.cli", "--home", daemon.home, "tail", project, "--json"],
        env={**os.environ, **daemon_env()},
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    events: list[dict[str, Any]] = []
    try:
        assert proc.stdout is not None
        while not events or events[-1]["seq"] < until_seq:
            line = proc.stdout.readline()
            assert line, f"tail ended before seq {until_seq}"
            events.append(json.loads(line))
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=120)  # bounds a hang; a loaded machine may be slow to exit
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return events


def journal_bytes(daemon: Daemon) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(Path(daemon.home).glob("journal.sqlite*")))


def shown_everywhere(daemon: Daemon, project: str, correlation: str | None = None) -> str:
    """Everything a person can see of the project's conversation: CLI outputs and files."""
    timeline = roost(daemon, "timeline", project, C, "--limit", "500")
    incident = roost(daemon, "incident", project, C, "--format", "md")
    as_json = roost(daemon, "--json", "timeline", project, C, "--limit", "500")
    assert timeline.returncode == incident.returncode == as_json.returncode == 0
    last = json.loads(as_json.stdout)["entries"][-1]["seq"]
    tailed = tail_json(daemon, project, last)
    deltas = "".join(e["data"]["content"] for e in tailed if e["type"] == "assistant.delta")
    log = (Path(daemon.home) / "logs" / "daemon.log").read_text()
    return "\n".join(
        [timeline.stdout, incident.stdout, as_json.stdout, json.dumps(tailed), deltas, log]
    )


def assert_nowhere(daemon: Daemon, project: str, *secret_values: str) -> None:
    stored = journal_bytes(daemon)
    shown = shown_everywhere(daemon, project)
    for value in secret_values:
        assert value.encode() not in stored, f"{value} is in the journal file"
        assert value not in shown, f"{value} is shown"


def round_deltas(client: Client, project: str, correlation: str) -> tuple[list[str], list[str]]:
    entries = client.incident_timeline(project, C, limit=500, correlation_id=correlation)
    deltas = [e["data"]["content"] for e in entries["entries"] if e["type"] == "assistant.delta"]
    messages = [
        e["data"]["content"] for e in entries["entries"] if e["type"] == "assistant.message"
    ]
    return deltas, messages


# --- 1. secrets split over stream chunks -----------------------------------------------------


def test_a_secret_streamed_one_character_per_delta_is_never_stored_or_shown(
    daemon: Daemon, client: Client, chat: ChatServer
) -> None:
    text = f"Your token is {GITHUB} and run PGPASSWORD={STREAMED_PW} psql -h db please."
    chat.add(StreamReply(content=list(text)))

    ack = client.send_message("oai", C, "show me the token", "corr-stream-1", wait=True)

    assert ack["outcome"] == "llm.completed"
    deltas, messages = round_deltas(client, "oai", "corr-stream-1")
    assert messages == [
        "Your token is [REDACTED:github_token] and run "
        "PGPASSWORD=[REDACTED:sensitive_key] psql -h db please."
    ]
    assert len(deltas) == len(text)  # every chunk kept its event
    assert "".join(deltas) == messages[0]
    assert client.verify("oai")["ok"] is True
    assert_nowhere(daemon, "oai", GITHUB, STREAMED_PW, GITHUB[4:20], STREAMED_PW[:10])


def test_a_secret_split_over_the_deterministic_models_chunks_is_never_stored_or_shown(
    daemon: Daemon, client: Client
) -> None:
    chunks = ["here: ", SPLIT[:9], SPLIT[9:25], SPLIT[25:] + " done"]

    ack = client.send_message(
        "det", C, "split it", "corr-split-1", wait=True, llm={"delta_chunks": chunks}
    )

    assert ack["outcome"] == "llm.completed"
    deltas, messages = round_deltas(client, "det", "corr-split-1")
    assert messages == ["here: [REDACTED:github_token] done"]
    assert "".join(deltas) == messages[0]
    assert_nowhere(daemon, "det", SPLIT, SPLIT[:9] + SPLIT[9:25])


# --- 2. envelope fields ----------------------------------------------------------------------


def test_a_secret_correlation_id_is_refused_by_the_cli_and_nothing_is_stored(
    daemon: Daemon, client: Client
) -> None:
    before = client.incident_timeline("det", C, limit=500)["total_entries"]
    corr = f"corr-{GITHUB}"
    runs = [
        roost(daemon, "send", "det", C, "hi", "--correlation-id", corr),
        roost(daemon, "cancel", "det", C, "--correlation-id", corr),
        roost(
            daemon,
            "run-tool",
            "det",
            "fs.read",
            "--args",
            '{"path": "README.md"}',
            "--conversation",
            C,
            "--correlation-id",
            corr,
        ),
        roost(daemon, "event", "det", C, "--type", "user.message", "--correlation-id", corr),
    ]

    for done in runs:
        assert (done.returncode, done.stdout) == (1, "")
        assert done.stderr == (
            "roost: bad_request: correlation_id looks like a secret (it would be stored and "
            "shown in the clear); choose another\n"
        )
    assert client.incident_timeline("det", C, limit=500)["total_entries"] == before
    assert client.send_message("det", C, "still here", wait=True)["outcome"] == "llm.completed"
    assert_nowhere(daemon, "det", GITHUB)


@pytest.mark.parametrize(
    ("call", "reason", "field"),
    [
        (
            lambda c: c.send_event(
                "det", C, {"type": "user.message", "content": "x"}, idempotency_key=f"key-{GITHUB}"
            ),
            "invalid_idempotency_key",
            "idempotency_key",
        ),
        (
            lambda c: c.start_conversation("det", conversation_id=GITHUB),
            "invalid_conversation_id",
            "conversation_id",
        ),
        (
            lambda c: c.start_project("/", project_id=f"p-{GITHUB}"),
            "invalid_project_id",
            "project_id",
        ),
    ],
    ids=["idempotency_key", "conversation_id", "project_id"],
)
def test_a_secret_id_is_refused_and_the_daemon_keeps_serving(
    daemon: Daemon, client: Client, call: Any, reason: str, field: str
) -> None:
    with pytest.raises(BadRequestError) as caught:
        call(client)

    assert caught.value.details == {"reason": reason, "field": field}
    assert GITHUB not in caught.value.message
    assert [p["project_id"] for p in client.list_projects()] == ["det", "oai"]
    assert client.diagnostics("det")["conversations"] == [C]
    assert GITHUB.encode() not in journal_bytes(daemon)


# --- 3. command-line, mid-line and header forms ----------------------------------------------


def test_passwords_in_commands_assignments_and_headers_are_redacted_everywhere(
    daemon: Daemon, client: Client
) -> None:
    said = client.send_message("det", C, FORMS_TEXT, "corr-forms-1", wait=True)
    read = client.run_tool(
        "det",
        {
            "name": "fs.read",
            "args": {"path": "deploy.md"},
            "meta": {"conversation_id": C, "correlation_id": "corr-forms-2"},
        },
    )
    ran = client.run_tool(
        "det",
        {
            "name": "command.run",
            "args": {"command": FORMS_TEXT.splitlines()[0]},
            "meta": {"conversation_id": C, "correlation_id": "corr-forms-3"},
        },
    )

    assert said["outcome"] == "llm.completed"
    assert read["status"] == "ok"
    assert read["risk_flags"] == ["sensitive_artifact_detected"]
    assert read["sensitivity_findings_count"] == 6
    assert read["sensitivity_finding_kinds"] == ["command_credentials", "sensitive_key"]
    assert read["result"]["content"] == (
        "curl -s -u deploy:[REDACTED:command_credentials] https://api.example.com/v1/items\n"
        "cd /srv && PGPASSWORD=[REDACTED:sensitive_key] psql -h db -U app\n"
        "curl -H 'X-Api-Key: [REDACTED:sensitive_key]' https://api.example.com\n"
        "DB_PASS=[REDACTED:sensitive_key]\n"
        "mysql -h db -u root -p[REDACTED:command_credentials] app\n"
        "engine = connect(host='db', password='[REDACTED:sensitive_key]')\n"
    )
    assert (ran["status"], ran["reason"]["code"]) == ("error", "network_denied")
    requested = [
        e["data"]
        for e in client.incident_timeline("det", C, limit=500, correlation_id="corr-forms-3")[
            "entries"
        ]
        if e["type"] == "tool.requested"
    ]
    assert requested[0]["args"]["command"] == (
        "curl -s -u deploy:[REDACTED:command_credentials] https://api.example.com/v1/items"
    )
    assert_nowhere(daemon, "det", *FORMS.values())
    assert FORMS["mysql"] in (Path(daemon.home).parent / "det" / "deploy.md").read_text()


def test_a_secret_in_a_tool_name_or_a_cancel_reason_is_redacted_in_the_journal(
    daemon: Daemon, client: Client
) -> None:
    result = client.run_tool(
        "det",
        {
            "name": f"x.{GITHUB}",
            "args": {},
            "meta": {"conversation_id": C, "correlation_id": "t-1"},
        },
    )
    client.cancel("det", C, correlation_id="t-2", reason=f"token {GITHUB} leaked")
    client.resume("det", C)

    assert (result["status"], result["reason"]["code"]) == ("error", "unknown_tool")
    entries = client.incident_timeline("det", C, limit=500)["entries"]
    failed = [e["data"] for e in entries if e["correlation_id"] == "t-1"]
    assert failed[-1]["name"] == "x.[REDACTED:github_token]"
    cancel = [e["data"] for e in entries if e["type"] == "conversation.cancel"]
    assert cancel[-1]["reason"] == "token [REDACTED:github_token] leaked"
    assert_nowhere(daemon, "det", GITHUB)
