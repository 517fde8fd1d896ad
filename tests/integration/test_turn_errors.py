"""Turn and project errors that say what happened, through the real ``roost`` and daemon.

``send --wait --wait-timeout S`` gives up after S seconds (exit 4), unknown ``--llm`` keys
fail the turn with ``bad_response``, ``unknown_tool`` points at ``roost project tools``, an
unset ``llm_api_key_env`` is refused at ``project start``, a cancelled turn says who ended
it, and a root started under a second id gets a warning.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.adversarial_helpers import run_daemon
from tests.integration.conftest import Daemon, make_root
from tests.integration.conftest import roost_cli as roost
from tests.runtime.chat_server import ChatServer, RecordedRequest, StreamReply

SLOW_S = 20.0
"""How long the model takes to answer a message that says ``slow``."""


def _answer(request: RecordedRequest) -> StreamReply:
    body = request.body if isinstance(request.body, dict) else {}
    last = str((body.get("messages") or [{}])[-1].get("content") or "")
    delay = SLOW_S if "slow" in last else 0.0
    return StreamReply(content=["Hel", "lo"], delay_s=delay)


@pytest.fixture(scope="module")
def chat() -> Iterator[ChatServer]:
    with ChatServer(responder=_answer) as server:
        yield server


@pytest.fixture(scope="module")
def desk(tmp_path_factory: pytest.TempPathFactory, chat: ChatServer) -> Iterator[Daemon]:
    """A daemon with ``det`` (deterministic model) and ``slow`` (the chat server)."""
    base = tmp_path_factory.mktemp("turns")
    root = make_root(base / "repo")
    with run_daemon(base / "home") as daemon:
        openai = ["--opt", "llm_adapter=openai", "--opt", f"llm_base_url={chat.base_url}"]
        for project, opts in (("det", []), ("slow", [*openai, "--opt", "llm_model=m"])):
            started = roost(daemon.home, "project", "start", root, "--id", project, *opts)
            assert started.returncode == 0, started.stderr
            for conversation in ("c1", "c2"):
                done = roost(daemon.home, "conversation", "start", project, "--id", conversation)
                assert done.returncode == 0, done.stderr
        yield daemon


def timeline(home: str, project: str, conversation: str, correlation: str) -> list[Any]:
    done = roost(home, "--json", "timeline", project, conversation, "--correlation-id", correlation)
    assert done.returncode == 0, done.stderr
    return [(e["type"], e["data"]) for e in json.loads(done.stdout)["entries"]]


def test_send_wait_gives_up_after_its_wait_timeout_with_exit_4_and_the_turn_goes_on(
    desk: Daemon,
) -> None:
    done = roost(
        desk.home, "send", "slow", "c1", "slow answer", "--wait", "--wait-timeout", "1",
        "--correlation-id", "corr-wait",
    )  # fmt: skip
    assert (done.returncode, done.stdout) == (4, ""), done.stderr
    assert done.stderr == (
        "roost: timeout: turn corr-wait did not end within the 1 s waited for it "
        "(--wait-timeout); it goes on: follow it with `roost tail slow c1` or cancel it with "
        "`roost cancel slow c1`\n"
    )
    ended = roost(
        desk.home, "tail", "slow", "c1", "--correlation-id", "corr-wait", "--until",
        "llm.completed", timeout=SLOW_S + 100,
    )  # fmt: skip
    assert ended.returncode == 0, ended.stderr


def test_an_unknown_llm_directive_key_fails_the_turn_with_bad_response_naming_it(
    desk: Daemon,
) -> None:
    llm = '{"tool_call": [{"name": "fs.read", "args": {"path": "README.md"}}]}'
    done = roost(desk.home, "send", "det", "c1", "go", "--wait", "--llm", llm)
    assert done.returncode == 1
    assert done.stderr == (
        "roost: turn_failed: llm.failed: bad_response: invalid llm directives: unknown key "
        "'tool_call'; the directives are assistant_text, delta_chunks, tool_calls\n"
    )
    arg = '{"tool_calls": [{"name": "fs.read", "arg": {"path": "README.md"}}]}'
    typo = roost(desk.home, "send", "det", "c1", "go", "--wait", "--llm", arg)
    assert (typo.returncode, typo.stderr) == (
        1,
        "roost: turn_failed: llm.failed: bad_response: invalid llm directives: unknown key "
        "'arg'; the keys of tool_calls[0] are name, args, run_mode\n",
    )


def test_an_unknown_tool_points_at_roost_project_tools(desk: Daemon) -> None:
    llm = '{"tool_calls": [{"name": "fs.raed", "args": {}}]}'
    done = roost(
        desk.home, "send", "det", "c1", "go", "--wait", "--llm", llm, "--correlation-id", "corr-t"
    )
    assert done.returncode == 0, done.stderr
    failed = [
        data for kind, data in timeline(desk.home, "det", "c1", "corr-t") if kind == "tool.failed"
    ]
    assert [f["reason"]["message"] for f in failed] == [
        "there is no tool named 'fs.raed'; `roost project tools det` lists the tools"
    ]


def test_an_unset_api_key_variable_is_refused_at_project_start(
    desk: Daemon, chat: ChatServer, tmp_path: Path
) -> None:
    variable = "ROOST_TEST_UNSET_MODEL_KEY"
    assert variable not in os.environ
    done = roost(
        desk.home, "project", "start", make_root(tmp_path / "keyed"), "--id", "keyed",
        "--opt", "llm_adapter=openai", "--opt", f"llm_base_url={chat.base_url}",
        "--opt", f"llm_api_key_env={variable}",
    )  # fmt: skip
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (
        f"roost: invalid_runtime_opt: llm_api_key_env names {variable}, which is not set in "
        "the daemon's environment, so every model call would fail (auth_missing); export "
        f"{variable} and restart the daemon (`roost daemon stop`, then `roost daemon start`), "
        "or change llm_api_key_env\n"
    )
    listed = roost(desk.home, "project", "list", "-q")
    assert "keyed" not in listed.stdout.split()


def test_a_cancelled_turn_ends_with_a_message_naming_the_cancel(
    desk: Daemon, tmp_path: Path
) -> None:
    root = make_root(tmp_path / "gated")
    opts = ["--opt", "approval_mode=sensitive"]
    assert roost(desk.home, "project", "start", root, "--id", "gated", *opts).returncode == 0
    assert roost(desk.home, "conversation", "start", "gated", "--id", "c1").returncode == 0
    llm = '{"tool_calls": [{"name": "command.run", "args": {"command": "true"}}]}'
    paused = roost(
        desk.home, "send", "gated", "c1", "go", "--wait", "--llm", llm, "--correlation-id", "corr-a"
    )
    assert "outcome:        awaiting_approval\n" in paused.stdout, paused.stderr
    cancel = roost(
        desk.home, "cancel", "gated", "c1", "--correlation-id", "corr-stop", "--reason", "not now"
    )
    assert cancel.returncode == 0, cancel.stderr
    ended = [d for k, d in timeline(desk.home, "gated", "c1", "corr-a") if k == "llm.failed"]
    assert ended == [
        {
            "reason": "conversation_cancelled",
            "message": "cancelled by a conversation.cancel request (correlation corr-stop, "
            "reason: not now); `roost resume gated c1` reopens the conversation",
        }
    ]
    refused = roost(desk.home, "send", "gated", "c1", "hi", "--wait")
    assert (refused.returncode, refused.stderr) == (
        1,
        "roost: turn_failed: llm.failed: conversation_cancelled: not run: the conversation was "
        "cancelled (conversation.cancel) and not resumed; `roost resume gated c1` reopens it\n",
    )
    assert roost(desk.home, "project", "stop", "gated").returncode == 0


def test_a_root_started_under_a_second_id_gets_a_warning(desk: Daemon, tmp_path: Path) -> None:
    root = make_root(tmp_path / "own")
    alone = roost(desk.home, "project", "start", root, "--id", "own")
    assert (alone.returncode, alone.stdout, alone.stderr) == (0, "own\n", "")
    twin = roost(desk.home, "--json", "project", "start", root, "--id", "twin")
    assert twin.returncode == 0, twin.stderr
    assert json.loads(twin.stdout) == {"project_id": "twin", "shared_root_with": ["own"]}
    assert twin.stderr == (
        f"roost: warning: {os.path.realpath(root)} is also the root of running project(s) own: "
        "their tools read and write the same files; `roost project stop own` if that is not "
        "meant\n"
    )
    for project in ("own", "twin"):
        assert roost(desk.home, "project", "stop", project).returncode == 0
