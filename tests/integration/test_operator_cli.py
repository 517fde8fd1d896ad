"""The operator's desk through the real ``roost`` program and a real daemon (real actors).

Exit statuses, failed turns, the model's failure message, stopped conversations,
``conversation list``, ``-q``, ``run-tool`` output, ``tail`` ends, and the daemon's log:
no logging errors, ``component`` on every line, nothing written to the file in the
foreground, no ``journal.sock`` left after ``kill -9`` and ``daemon stop``.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime.daemon import stop_daemon
from tests.integration.adversarial_helpers import run_daemon, wait_until
from tests.integration.conftest import Daemon, alive, daemon_env, make_root, tree
from tests.integration.conftest import roost_cli as roost
from tests.runtime.chat_server import ChatServer, ErrorReply, RecordedRequest, StreamReply

MISSING_MODEL = "The model 'nope' does not exist or you do not have access to it."


def _answer(request: RecordedRequest) -> ErrorReply | StreamReply:
    if isinstance(request.body, dict) and request.body.get("model") == "nope":
        return ErrorReply(status=404, message=MISSING_MODEL)
    return StreamReply(content=["Hel", "lo"], usage={"prompt_tokens": 3, "completion_tokens": 2})


@pytest.fixture(scope="module")
def chat() -> Iterator[ChatServer]:
    with ChatServer(responder=_answer) as server:
        yield server


@pytest.fixture(scope="module")
def desk(tmp_path_factory: pytest.TempPathFactory, chat: ChatServer) -> Iterator[Daemon]:
    """One daemon with projects: ``det`` (deterministic model), ``oai`` (the chat server),
    ``gone`` (a model the server does not have), ``tight`` (one round per turn)."""
    base = tmp_path_factory.mktemp("desk")
    root = make_root(base / "repo")
    with run_daemon(base / "home") as daemon:
        openai = ["--opt", "llm_adapter=openai", "--opt", f"llm_base_url={chat.base_url}"]
        for project, opts in (
            ("det", ["--opt", "approval_mode=sensitive"]),
            ("oai", [*openai, "--opt", "llm_model=m"]),
            ("gone", [*openai, "--opt", "llm_model=nope"]),
            ("tight", ["--opt", "max_rounds=1"]),
        ):
            assert (
                roost(daemon.home, "project", "start", root, "--id", project, *opts).returncode == 0
            )
            assert (
                roost(daemon.home, "conversation", "start", project, "--id", "c1").returncode == 0
            )
        yield daemon


def test_a_turn_the_model_fails_exits_1_with_the_providers_message(
    desk: Daemon, chat: ChatServer
) -> None:
    done = roost(desk.home, "send", "gone", "c1", "hello", "--wait", "--correlation-id", "corr-g")
    message = f"HTTP 404 from {chat.base_url}/chat/completions: {MISSING_MODEL}"
    assert done.returncode == 1
    assert done.stderr == f"roost: turn_failed: llm.failed: provider_error: {message}\n"
    assert "outcome:        llm.failed\n" in done.stdout
    timeline = json.loads(
        roost(desk.home, "--json", "timeline", "gone", "c1", "--correlation-id", "corr-g").stdout
    )
    failed = [e["data"] for e in timeline["entries"] if e["type"] == "llm.failed"]
    assert failed == [{"reason": "provider_error", "message": message}]
    report = roost(desk.home, "incident", "gone", "c1", "--correlation-id", "corr-g").stdout
    assert f"`llm.failed` — provider_error: HTTP 404 from {chat.base_url}" in report


def test_a_turn_that_runs_out_of_rounds_exits_1(desk: Daemon) -> None:
    done = roost(desk.home, "send", "tight", "c1", "read README.md", "--wait")
    assert (done.returncode, done.stderr) == (
        1,
        "roost: turn_failed: budget.exceeded: max_rounds (limit 1, used 1)\n",
    )


def test_a_turn_that_completes_exits_0_and_one_awaiting_approval_too(desk: Daemon) -> None:
    done = roost(desk.home, "send", "oai", "c1", "hi", "--wait")
    assert (done.returncode, done.stderr) == (0, "")
    assert "outcome:        llm.completed\n" in done.stdout
    llm = '{"tool_calls": [{"name": "command.run", "args": {"command": "true"}}]}'
    paused = roost(desk.home, "send", "det", "c1", "go", "--wait", "--llm", llm)
    assert (paused.returncode, paused.stderr) == (0, "")
    assert "outcome:        awaiting_approval\n" in paused.stdout
    ids = roost(desk.home, "projection", "det", "c1", "pending_tool_calls", "-q")
    assert ids.returncode == 0
    approved = roost(desk.home, "approve", "det", "c1", ids.stdout.strip())
    assert approved.returncode == 0
    assert ids.stdout.strip().startswith("call-")
    assert "\n" not in ids.stdout.strip()


def test_a_stopped_conversation_says_it_is_stopped_and_can_be_started_again(
    desk: Daemon,
) -> None:
    assert roost(desk.home, "conversation", "start", "det", "--id", "c9").returncode == 0
    assert roost(desk.home, "conversation", "stop", "det", "c9").returncode == 0
    done = roost(desk.home, "send", "det", "c9", "hello")
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (
        "roost: conversation_not_found: conversation c9 of project det is stopped; start it "
        "again with `roost conversation start det --id c9`\n"
    )
    never = roost(desk.home, "send", "det", "c404", "hello")
    assert never.stderr == (
        "roost: conversation_not_found: no conversation c404 in project det; start it with "
        "`roost conversation start det --id c404`\n"
    )
    assert roost(desk.home, "conversation", "start", "det", "--id", "c9").returncode == 0
    again = roost(desk.home, "send", "det", "c9", "hello", "--wait")
    assert again.returncode == 0, again.stderr


def test_a_conversation_started_again_goes_on_from_its_history_after_passivating(
    desk: Daemon, tmp_path: Path
) -> None:
    root = make_root(tmp_path / "again")
    opts = ["--opt", "idle_passivation_ms=200"]
    assert roost(desk.home, "project", "start", root, "--id", "again", *opts).returncode == 0
    assert roost(desk.home, "conversation", "start", "again", "--id", "c1").returncode == 0
    assert roost(desk.home, "send", "again", "c1", "before the stop", "--wait").returncode == 0
    assert roost(desk.home, "conversation", "stop", "again", "c1").returncode == 0
    assert roost(desk.home, "conversation", "start", "again", "--id", "c1").returncode == 0
    try:
        with desk.client() as c:
            for turn in ("after the start", "after a passivation"):
                done = roost(desk.home, "send", "again", "c1", turn, "--wait")
                assert done.returncode == 0, done.stderr
                wait_until(
                    lambda: not (c.status().get("live_conversations") or {}).get("again"),
                    30,
                    "the conversation to passivate",
                )
            context = c.get_projection("again", "c1", "llm_context")
    finally:  # the module's other tests list the desk's projects
        assert roost(desk.home, "project", "stop", "again").returncode == 0
    said = [m["content"] for m in context if m["role"] == "user"]
    assert said == ["before the stop", "after the start", "after a passivation"]


def test_conversation_list_shows_each_conversation_without_waking_it(desk: Daemon) -> None:
    assert roost(desk.home, "conversation", "start", "det", "--id", "c2").returncode == 0
    done = roost(desk.home, "conversation", "list", "det")
    lines = done.stdout.splitlines()
    assert done.returncode == 0
    assert lines[0].split() == ["CONVERSATION", "PROCESS", "ENTRIES", "LAST_EVENT", "AT"]
    rows = {line.split()[0]: line.split() for line in lines[1:]}
    assert rows["c2"][1:4] == ["live", "1", "conversation.started"]
    assert "c1" in rows
    quiet = roost(desk.home, "conversation", "list", "det", "-q")
    assert quiet.stdout.splitlines() == sorted(rows)
    as_json = json.loads(roost(desk.home, "--json", "conversation", "list", "det").stdout)
    assert {c["conversation_id"] for c in as_json} == set(rows)
    assert roost(desk.home, "conversation", "list", "nope").returncode == 1


def test_project_list_q_prints_the_ids(desk: Daemon) -> None:
    done = roost(desk.home, "project", "list", "-q")
    assert (done.returncode, done.stdout) == (0, "det\ngone\noai\ntight\n")


def test_run_tool_keeps_a_commands_lines_and_exits_1_when_it_exits_non_zero(
    desk: Daemon,
) -> None:
    ok = roost(
        desk.home,
        "run-tool",
        "tight",
        "command.run",
        "--args",
        '{"command": "printf \'a\\nb\\n\'"}',
    )
    assert ok.returncode == 0, ok.stderr
    assert "  stdout:           |\n    a\n    b\n" in ok.stdout
    missing = roost(
        desk.home, "run-tool", "tight", "command.run", "--args", '{"command": "python"}'
    )
    assert missing.returncode == 1
    assert "  exit_code:        127\n" in missing.stdout
    assert missing.stderr == (
        "roost: command_failed: command.run: the command exited with status 127 "
        "(not found on the sandbox's PATH?)\n"
    )


def test_tail_until_stops_at_the_first_event_of_that_type(desk: Daemon) -> None:
    roost(desk.home, "send", "oai", "c1", "again", "--correlation-id", "corr-t", "--wait")
    done = roost(
        desk.home, "tail", "oai", "c1", "--correlation-id", "corr-t", "--until", "llm.completed"
    )
    types = [line.split()[3] for line in done.stdout.splitlines()]
    assert done.returncode == 0
    assert types[0] == "user.message"
    assert types[-1] == "llm.completed"
    assert types.count("llm.completed") == 1


def test_no_logging_error_and_a_component_on_every_line_after_model_turns(
    desk: Daemon, chat: ChatServer
) -> None:
    before = len(chat.requests)
    for n in range(3):
        assert roost(desk.home, "send", "oai", "c1", f"turn {n}", "--wait").returncode == 0
    assert len(chat.requests) >= before + 3
    text = Path(desk.home, "logs", "daemon.log").read_text()
    assert text.count("Logging error") == 0
    records = [json.loads(line) for line in text.splitlines()]
    assert [r for r in records if not r.get("component")] == []
    components = {r["component"] for r in records}
    assert {"roost.daemon", "roost.gateway", "roost.journal", "httpx", "thespian"} <= components
    http = [r for r in records if r["component"] == "httpx"]
    assert http[-1]["event"] == "library_message"  # a fixed name; the record's text apart
    assert http[-1]["message"].startswith(f"HTTP Request: POST {chat.base_url}/chat/completions")


def test_roost_logs_prints_readable_lines_and_json_with_json(desk: Daemon) -> None:
    done = roost(desk.home, "logs", "-n", "2")
    lines = done.stdout.splitlines()
    assert done.returncode == 0
    assert len(lines) == 2
    timestamp, level, component, event = lines[0].split()[:4]
    assert timestamp.endswith("Z") and level in ("debug", "info", "warning", "error")
    assert component and event
    # the daemon may log between two reads (its activity lines follow committed events):
    # compare the JSON lines with readable lines read on both sides of them, once they agree
    for _ in range(50):
        raw = roost(desk.home, "--json", "logs", "-n", "2").stdout.splitlines()
        again = roost(desk.home, "logs", "-n", "2").stdout.splitlines()
        if again == lines:
            break
        lines = again
        time.sleep(0.2)
    records = [json.loads(line) for line in raw]
    assert [r["timestamp"] for r in records] == [line.split()[0] for line in lines]
    assert lines[-1].split()[1:3] == [records[-1]["level"], records[-1]["component"]]


def _has_open(pid: int, name: str) -> bool:
    import psutil

    return any(f.path.endswith(name) for f in psutil.Process(pid).open_files())


def test_roost_logs_follow_prints_new_lines_until_ctrl_c(desk: Daemon) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "runtime.cli", "--home", desk.home, "logs", "-n", "0", "-f"],
        env={**os.environ, **daemon_env()},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = ""
        deadline = time.monotonic() + 60
        # -n 0 starts at the end of the file: ask again until the follower, once it has
        # started (slow on a loaded machine), sees a new line
        while not line and time.monotonic() < deadline:
            assert roost(desk.home, "project", "stop", "nope").returncode == 1  # logs a line
            if select.select([proc.stdout], [], [], 1.0)[0]:
                line = proc.stdout.readline()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)  # bounds a hang, not a speed
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "roost.gateway request_failed code=project_not_found" in line
    assert (proc.returncode, err) == (0, "")


def test_roost_logs_without_a_log_says_so(tmp_path: Path) -> None:
    done = roost(str(tmp_path), "logs")
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (
        f"roost: log_not_found: no daemon log at {tmp_path}/logs/daemon.log yet "
        "(has a daemon run here?)\n"
    )


def test_the_foreground_daemon_and_its_actors_write_nothing_to_the_log_file(
    tmp_path: Path,
) -> None:
    home = str(tmp_path / "home")
    proc = subprocess.Popen(
        [sys.executable, "-m", "runtime.cli", "daemon", "start", "--foreground", "--home", home],
        env={**os.environ, **daemon_env()},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    seen: list[int] = []
    try:
        wait_until(lambda: roost(home, "daemon", "status").returncode == 0, timeout_s=60)
        seen = [p.pid for p in tree(proc.pid)]
        root = make_root(tmp_path / "repo")
        assert roost(home, "project", "start", root, "--id", "p").returncode == 0
        assert roost(home, "conversation", "start", "p", "--id", "c").returncode == 0
        assert roost(home, "send", "p", "c", "read README.md", "--wait").returncode == 0
        with Daemon(home=home, pid=proc.pid).client() as c:
            admin = c.status().get("admin_pid")
        seen += [p.pid for p in tree(admin)] if admin else []
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0
    assert not os.path.exists(os.path.join(home, "logs", "daemon.log"))
    records = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    assert {"roost.daemon", "roost.journal"} <= {r["component"] for r in records}
    assert "Logging error" not in err
    assert alive([p for pid in seen if (p := _process(pid))]) == []


def _process(pid: int) -> object | None:
    import psutil

    try:
        return psutil.Process(pid)
    except psutil.NoSuchProcess:
        return None


def test_kill_9_then_daemon_stop_leaves_no_socket_behind(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with run_daemon(home) as daemon:
        root = make_root(tmp_path / "repo")
        assert roost(daemon.home, "project", "start", root, "--id", "p").returncode == 0
        link = home / "journal.sock"
        assert link.is_socket()
        for proc in daemon.processes():
            proc.kill()
        wait_until(lambda: not alive(daemon.processes()), timeout_s=20)
        status = json.loads(roost(daemon.home, "--json", "daemon", "status").stdout)
        assert status["stale_files"] == [
            str(home / "roost.sock"),
            str(home / "roost.pid"),
            str(link),
        ]
        done = roost(daemon.home, "daemon", "stop")
        assert (done.returncode, done.stdout) == (0, f"daemon is not running in {home}\n")
        left = [n for n in os.listdir(home) if n.endswith(".sock") or n.endswith(".pid")]
        assert left == []
    stop_daemon(str(home))


def test_tail_ends_with_0_when_the_daemon_stops_cleanly_and_3_when_it_is_killed(
    tmp_path: Path,
) -> None:
    for how, expected in (("stop", (0, "")), ("kill", (3, "roost: daemon_unreachable: "))):
        home = tmp_path / how
        with run_daemon(home) as daemon:
            root = make_root(tmp_path / f"repo-{how}")
            assert roost(daemon.home, "project", "start", root, "--id", "p").returncode == 0
            proc = subprocess.Popen(
                [sys.executable, "-m", "runtime.cli", "--home", daemon.home, "tail", "p"],
                env={**os.environ, **daemon_env()},
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            try:
                assert proc.stdout is not None
                assert "project.started" in proc.stdout.readline()
                if how == "stop":
                    assert roost(daemon.home, "daemon", "stop").returncode == 0
                else:
                    for p in daemon.processes():
                        p.kill()
                _, err = proc.communicate(timeout=60)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
            assert (proc.returncode, err[: len(expected[1])]) == expected
            assert err.count("\n") == (0 if how == "stop" else 1)
