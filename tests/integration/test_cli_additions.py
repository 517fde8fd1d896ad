"""What operators expect of the CLI (issue 19, item 15), through the real ``roost`` program
and a real daemon: ``daemon restart``, ``approve --wait``, ``send -`` and ``send --file``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime.daemon import daemon_pid
from tests.integration.adversarial_helpers import run_daemon, wait_until
from tests.integration.conftest import Daemon, daemon_env, make_root

LLM_TWO_CALLS = {
    "tool_calls": [
        {"name": "command.run", "args": {"command": "true"}},
        {"name": "command.run", "args": {"command": "true"}},
    ]
}


def roost(
    home: str, *args: str, stdin: str | bytes | None = None, timeout: float = 120, **env: str
) -> subprocess.CompletedProcess[str]:
    """``roost --home HOME ARGS`` as a program (``stdin`` as its input, bytes as they are)."""
    raw = subprocess.run(
        [sys.executable, "-m", "runtime.cli", "--home", home, *args],
        env={**os.environ, **daemon_env(**env)},
        input=stdin.encode() if isinstance(stdin, str) else stdin,
        capture_output=True,
        timeout=timeout,
        check=False,
    )
    out, err = raw.stdout.decode(), raw.stderr.decode()
    return subprocess.CompletedProcess(raw.args, raw.returncode, out, err)


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert (result.returncode, result.stderr) == (0, ""), result
    return result.stdout


@pytest.fixture(scope="module")
def desk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    """One daemon: project ``p`` asks before commands (``approval_mode=sensitive``),
    ``tight`` too, with one model round per turn."""
    base = tmp_path_factory.mktemp("cliadds")
    with run_daemon(base / "home") as daemon:
        for project, opts in (
            ("p", ["--opt", "approval_mode=sensitive"]),
            ("tight", ["--opt", "approval_mode=sensitive", "--opt", "max_rounds=1"]),
        ):
            root = make_root(base / f"repo-{project}")  # a root each: one root twice is warned
            ok(roost(daemon.home, "project", "start", root, "--id", project, *opts))
        yield daemon


def _paused(home: str, project: str, conversation: str, llm: dict[str, object]) -> list[str]:
    """Start ``conversation``, send a turn that stops for approval; the pending call ids."""
    ok(roost(home, "conversation", "start", project, "--id", conversation))
    sent = roost(home, "send", project, conversation, "go", "--wait", "--llm", json.dumps(llm))
    assert "outcome:        awaiting_approval\n" in ok(sent)
    ids = ok(roost(home, "projection", project, conversation, "pending_tool_calls", "-q"))
    return ids.split()


# --- approve --wait ------------------------------------------------------------------------


def test_approve_wait_returns_the_turns_outcome(desk: Daemon) -> None:
    llm = {"tool_calls": [{"name": "command.run", "args": {"command": "true"}}]}
    [call] = _paused(desk.home, "p", "a1", llm)
    done = roost(desk.home, "--json", "approve", "p", "a1", call, "--wait")
    result = json.loads(ok(done))
    assert result["outcome"] == "llm.completed"
    assert result["call_id"] == call
    # the turn is over: nothing is pending any more
    assert ok(roost(desk.home, "projection", "p", "a1", "pending_tool_calls", "-q")) == ""


def test_approve_wait_stops_when_the_turn_awaits_approval_again(desk: Daemon) -> None:
    first, second = _paused(desk.home, "p", "a2", LLM_TWO_CALLS)
    waited = json.loads(ok(roost(desk.home, "--json", "approve", "p", "a2", first, "--wait")))
    assert waited["outcome"] == "awaiting_approval"
    assert waited["outcome_data"] == {"call_ids": [second]}
    done = roost(desk.home, "--json", "approve", "p", "a2", second, "--wait")
    assert json.loads(ok(done))["outcome"] == "llm.completed"


def test_approve_wait_exits_1_when_the_turn_fails(desk: Daemon) -> None:
    llm = {"tool_calls": [{"name": "command.run", "args": {"command": "true"}}]}
    [call] = _paused(desk.home, "tight", "a3", llm)
    failed = roost(desk.home, "approve", "tight", "a3", call, "--wait")
    assert failed.returncode == 1
    assert failed.stderr == "roost: turn_failed: budget.exceeded: max_rounds (limit 1, used 1)\n"
    assert "outcome:        budget.exceeded\n" in failed.stdout


def test_approve_wait_exits_4_after_its_timeout(desk: Daemon) -> None:
    llm = {"tool_calls": [{"name": "command.run", "args": {"command": "sleep 60"}}]}
    [call] = _paused(desk.home, "p", "a4", llm)
    late = roost(desk.home, "approve", "p", "a4", call, "--wait", "--wait-timeout", "1")
    assert late.returncode == 4, late
    assert late.stderr.startswith("roost: timeout: turn corr-")
    assert "did not end within the 1 s waited for it (--wait-timeout); it goes on" in late.stderr
    ok(roost(desk.home, "cancel", "p", "a4"))


def test_approve_wait_timeout_must_be_positive(desk: Daemon) -> None:
    bad = roost(desk.home, "approve", "p", "a1", "call-x", "--wait", "--wait-timeout", "0")
    assert bad.returncode == 2
    assert bad.stderr.startswith("roost: usage: argument --wait-timeout")


# --- send - / send --file -------------------------------------------------------------------


def _last_user_message(home: str, conversation: str) -> str:
    timeline = json.loads(ok(roost(home, "--json", "projection", "p", conversation, "timeline")))
    return str([e for e in timeline if e["type"] == "user.message"][-1]["data"]["content"])


def test_send_reads_its_text_from_stdin_or_a_file(desk: Daemon, tmp_path: Path) -> None:
    ok(roost(desk.home, "conversation", "start", "p", "--id", "s1"))
    text = 'read "README.md"\nand then stop; $HOME `x` \u00e9\n'
    ok(roost(desk.home, "send", "p", "s1", "-", "--wait", stdin=text))
    assert _last_user_message(desk.home, "s1") == text
    message = tmp_path / "message.txt"
    message.write_text("from a file\n", encoding="utf-8")
    ok(roost(desk.home, "send", "p", "s1", "--file", str(message), "--wait"))
    assert _last_user_message(desk.home, "s1") == "from a file\n"


@pytest.mark.parametrize(
    ("args", "stdin", "expected"),
    [
        ((), None, "roost: usage: a message is required: TEXT, - (read stdin) or --file PATH"),
        (("hi", "--file", "x.txt"), None, "roost: usage: give the message as TEXT or with"),
        (("--file", "/nonexistent/m.txt"), None, "roost: usage: cannot read --file"),
        (("-",), b"\xff\xfe bad", "roost: usage: stdin is not UTF-8 text"),
    ],
)
def test_send_text_usage_errors_exit_2(
    desk: Daemon, args: tuple[str, ...], stdin: bytes | None, expected: str
) -> None:
    bad = roost(desk.home, "send", "p", "s1", *args, stdin=stdin)
    assert bad.returncode == 2, bad
    assert bad.stderr.startswith(expected), bad.stderr
    assert bad.stdout == ""


# --- daemon restart ------------------------------------------------------------------------


def test_daemon_restart_replaces_the_daemon_and_keeps_its_projects(
    daemon_home: str, tmp_path: Path
) -> None:
    root = make_root(tmp_path / "repo")
    started = roost(daemon_home, "daemon", "restart")  # none runs: one is started
    assert "none was running" in ok(started)
    old = daemon_pid(daemon_home)
    ok(roost(daemon_home, "project", "start", root, "--id", "p1"))
    ok(roost(daemon_home, "conversation", "start", "p1", "--id", "c1"))
    ok(roost(daemon_home, "send", "p1", "c1", "read README.md", "--wait"))

    restarted = json.loads(ok(roost(daemon_home, "--json", "daemon", "restart")))
    assert restarted["was_running"] is True
    assert restarted["old_pid"] == old
    assert restarted["pid"] == daemon_pid(daemon_home) != old
    assert restarted["projects"] == 1
    assert ok(roost(daemon_home, "project", "list", "-q")) == "p1\n"
    again = ok(roost(daemon_home, "send", "p1", "c1", "read notes.txt", "--wait"))
    assert "outcome:        llm.completed\n" in again
    timeline = json.loads(ok(roost(daemon_home, "--json", "timeline", "p1", "c1")))
    assert [e["type"] for e in timeline["entries"]].count("user.message") == 2


def test_a_bad_setting_fails_the_restart_before_the_running_daemon_is_stopped(
    daemon_home: str,
) -> None:
    ok(roost(daemon_home, "daemon", "start"))
    pid = daemon_pid(daemon_home)
    bad = roost(daemon_home, "daemon", "restart", ROOST_LOG_MAX_BYTES="lots")
    assert bad.returncode == 1
    assert bad.stderr.startswith("roost: bad_config: ROOST_LOG_MAX_BYTES")
    assert daemon_pid(daemon_home) == pid
    ok(roost(daemon_home, "daemon", "status"))


# --- the daemon's config file ----------------------------------------------------------------


def _config(home: str, text: str) -> Path:
    os.makedirs(home, mode=0o700, exist_ok=True)
    path = Path(home) / "config.toml"
    path.write_text(text, encoding="utf-8")
    path.chmod(0o600)
    return path


def test_settings_come_from_a_flag_the_environment_and_the_config_file(daemon_home: str) -> None:
    # The file asks for PostgreSQL: only the flag keeps this daemon on SQLite.
    _config(daemon_home, 'journal = "postgres"\nlog_level = "debug"\nidle_timeout_s = 9\n')
    started = roost(
        daemon_home, "daemon", "start", "--journal", "sqlite", ROOST_IDLE_TIMEOUT_S="30"
    )
    ok(started)
    status = json.loads(ok(roost(daemon_home, "--json", "daemon", "status")))
    assert status["config_file"] == os.path.join(daemon_home, "config.toml")
    assert status["journal"] == "sqlite"
    settings = status["settings"]
    assert settings["journal"] == {"value": "sqlite", "source": "flag"}
    assert settings["idle_timeout_s"] == {"value": 30.0, "source": "env"}
    assert settings["log_level"] == {"value": "debug", "source": "file"}
    assert settings["max_connections"] == {"value": 1024, "source": "default"}
    human = ok(roost(daemon_home, "daemon", "status"))
    assert "  log_level:         debug (file)\n" in human
    # the file's log level reached the daemon: debug adds a line per request served
    log = (Path(daemon_home) / "logs" / "daemon.log").read_text()
    assert '"event":"request_served"' in log

    # a restart keeps the flag (the file alone would now move it to PostgreSQL)
    pid = daemon_pid(daemon_home)
    ok(roost(daemon_home, "daemon", "restart"))
    assert daemon_pid(daemon_home) != pid
    after = json.loads(ok(roost(daemon_home, "--json", "daemon", "status")))["settings"]
    assert after["journal"] == {"value": "sqlite", "source": "flag"}
    assert after["idle_timeout_s"] == {"value": 9, "source": "file"}  # no variable this time


def test_a_bad_config_file_stops_nothing_and_starts_nothing(daemon_home: str) -> None:
    ok(roost(daemon_home, "daemon", "start"))
    pid = daemon_pid(daemon_home)
    _config(daemon_home, 'log_levl = "debug"\n')
    bad = roost(daemon_home, "daemon", "restart")
    assert bad.returncode == 1
    expected = (
        f"roost: bad_config: unknown setting 'log_levl' in the config file {daemon_home}/"
        "config.toml; did you mean 'log_level'? the settings are listed in "
        "docs/configuration.md\n"
    )
    assert bad.stderr == expected
    assert daemon_pid(daemon_home) == pid
    ok(roost(daemon_home, "daemon", "stop"))
    _config(daemon_home, "max_connections = 0\n")
    refused = roost(daemon_home, "daemon", "start")
    assert refused.returncode == 1
    assert refused.stderr.startswith("roost: bad_config: max_connections in the config file ")
    assert refused.stderr.endswith("must be a positive integer, got 0\n")
    assert roost(daemon_home, "daemon", "status").returncode == 3
    assert not os.path.exists(os.path.join(daemon_home, "roost.pid"))


@pytest.mark.postgres
def test_a_config_file_alone_puts_the_daemon_on_postgres(
    daemon_home: str, project_root: str, postgres_env: dict[str, str]
) -> None:
    table = "\n".join(
        f"{key.removeprefix('POSTGRES_').lower()} = {json.dumps(value)}"
        for key, value in postgres_env.items()
        if key != "POSTGRES_PORT"
    )
    port = postgres_env["POSTGRES_PORT"]
    _config(daemon_home, f'journal = "postgres"\n[postgres]\nport = {port}\n{table}\n')
    unset = {key: "" for key in postgres_env}  # set and empty: not set (the file decides)
    ok(roost(daemon_home, "daemon", "start", ROOST_JOURNAL="", **unset))
    status = json.loads(ok(roost(daemon_home, "--json", "daemon", "status")))
    assert status["journal"] == "postgres"
    assert status["settings"]["postgres.schema"] == {
        "value": postgres_env["POSTGRES_SCHEMA"],
        "source": "file",
    }
    assert status["settings"]["postgres.password"] == {"value": "***", "source": "file"}
    ok(roost(daemon_home, "project", "start", project_root, "--id", "pg1"))
    ok(roost(daemon_home, "conversation", "start", "pg1", "--id", "c1"))
    ok(roost(daemon_home, "send", "pg1", "c1", "read README.md", "--wait"))
    assert not os.path.exists(os.path.join(daemon_home, "journal.sqlite"))


def test_approve_wait_exits_1_with_not_seen_when_the_project_stops_first(
    desk: Daemon, tmp_path: Path
) -> None:
    root = make_root(tmp_path / "repo")
    ok(roost(desk.home, "project", "start", root, "--id", "st", "--opt", "approval_mode=sensitive"))
    llm = {"tool_calls": [{"name": "command.run", "args": {"command": "sleep 60"}}]}
    [call] = _paused(desk.home, "st", "a5", llm)
    approve = ["approve", "st", "a5", call, "--wait", "--wait-timeout", "300"]
    waiting = subprocess.Popen(
        [sys.executable, "-m", "runtime.cli", "--home", desk.home, *approve],
        env={**os.environ, **daemon_env()},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_until(
            lambda: "tool.started" in ok(roost(desk.home, "projection", "st", "a5", "timeline")),
            timeout_s=120,
            what="the approved call to start",
        )
        ok(roost(desk.home, "project", "stop", "st"))
        out, err = waiting.communicate(timeout=120)
    finally:
        waiting.kill()
    assert waiting.returncode == 1, (out, err)
    assert err.startswith("roost: not_seen: the project stopped (seq "), err
