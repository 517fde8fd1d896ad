"""A model server that fails, then recovers: retries and the breaker leave their trace.

A real loopback OpenAI-compatible server (``tests.runtime.chat_server``) answers a real
daemon's turns, sent with the real ``roost`` program: a 429 with ``Retry-After`` then 200,
a 500 then 200 (each turn completes, and its incident report lists the retry); then 500s
until the conversation's circuit breaker opens (``llm.breaker_changed``), after which a
turn fails with ``circuit_open`` and still names the provider's own last error.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import Daemon, make_root
from tests.integration.conftest import roost_cli as roost
from tests.runtime.chat_server import ChatServer, ErrorReply, StreamReply

OK = StreamReply(content=["fine"], usage={"prompt_tokens": 1, "completion_tokens": 1})
DOWN = "upstream model crashed"


@pytest.fixture
def chat() -> Iterator[ChatServer]:
    with ChatServer() as server:
        yield server


def _turn(daemon: Daemon, corr: str) -> subprocess.CompletedProcess[str]:
    return roost(daemon.home, "send", "p1", "c1", "hi", "--wait", "--correlation-id", corr)


def _retries(daemon: Daemon, corr: str) -> list[dict[str, Any]]:
    shown = roost(daemon.home, "--json", "incident", "p1", "c1", "--correlation-id", corr)
    assert shown.returncode == 0, shown
    entries: list[dict[str, Any]] = json.loads(shown.stdout)["model_retries"]
    return entries


def test_retries_and_the_breaker_are_journaled_and_keep_the_providers_error(
    daemon: Daemon, tmp_path: Path, chat: ChatServer
) -> None:
    root = make_root(tmp_path / "repo")
    opts = ["--opt", "llm_adapter=openai", "--opt", f"llm_base_url={chat.base_url}"]
    assert roost(daemon.home, "project", "start", root, "--id", "p1", *opts).returncode == 0
    assert roost(daemon.home, "conversation", "start", "p1", "--id", "c1").returncode == 0

    chat.add(ErrorReply(status=429, message="slow down", headers={"Retry-After": "1"}), OK)
    assert _turn(daemon, "t-429").returncode == 0
    [retry] = _retries(daemon, "t-429")
    assert retry["type"] == "llm.retried"
    data = retry["data"]
    assert (data["attempt"], data["reason"], data["status"]) == (1, "rate_limited", 429)
    assert (data["retry_after_ms"], data["delay_ms"]) == (1000, 1000)
    assert "slow down" in data["message"]
    report = roost(daemon.home, "incident", "p1", "c1", "--correlation-id", "t-429").stdout
    assert "## Model retries and circuit breaker" in report
    assert "attempt 1 rate_limited (HTTP 429), waited 1000 ms, Retry-After 1000 ms" in report

    chat.add(ErrorReply(status=500, message=DOWN), OK)
    assert _turn(daemon, "t-500").returncode == 0
    [retry] = _retries(daemon, "t-500")
    assert (retry["data"]["reason"], retry["data"]["status"]) == ("provider_error", 500)
    assert DOWN in retry["data"]["message"]

    # five consecutive failures open the breaker: three attempts, then two
    chat.add(*[ErrorReply(status=500, message=DOWN)] * 5)
    first = _turn(daemon, "t-down-1")
    assert first.returncode == 1 and "(after 3 attempts)" in first.stderr, first
    second = _turn(daemon, "t-down-2")
    assert second.returncode == 1, second
    assert second.stderr.startswith("roost: turn_failed: llm.failed: provider_error: HTTP 500")
    assert DOWN in second.stderr  # the turn that opened it fails with the provider's words
    retried, opened = _retries(daemon, "t-down-2")
    assert retried["type"] == "llm.retried"
    assert opened["type"] == "llm.breaker_changed"
    assert (opened["data"]["previous"], opened["data"]["state"]) == ("closed", "open")
    assert opened["data"]["consecutive_failures"] == 5
    assert DOWN in opened["data"]["last_error"]

    refused = _turn(daemon, "t-down-3")
    assert refused.returncode == 1
    line = refused.stderr.strip()
    assert line.startswith("roost: turn_failed: llm.failed: circuit_open: openai circuit"), line
    assert "last error: provider_error: HTTP 500" in line and DOWN in line
    assert len(chat.requests) == 2 + 2 + 5  # the refused turn never reached the server
