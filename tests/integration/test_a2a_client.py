"""Roost as an A2A client: ``a2a_agents`` tools through a real daemon.

The remote agent is the SDK's own server (``a2a_fixture_server.py``: an ``AgentExecutor``
behind ``DefaultRequestHandler`` and the SDK's Starlette routes), started by the test as a
real process on loopback. It logs every card fetch, every JSON-RPC method and every cancel
it receives in ``requests.log``, so a refusal can be shown to have never reached it and a
timeout or a cancel to have cancelled the remote task. Loopback is refused by default, so
each project allowlists ``127.0.0.1`` by name.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from runtime.client import Client
from runtime.errors import RoostError
from runtime.journal.store import Journal
from tests.integration.conftest import Daemon, make_root

FIXTURE = Path(__file__).with_name("a2a_fixture_server.py")
C = "c1"
LOOPBACK = {"network_allowlist": ["127.0.0.1"]}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Agent:
    """A fixture agent process on loopback and its request log."""

    def __init__(self, markers: Path, *extra: str) -> None:
        self.markers = markers
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            [sys.executable, str(FIXTURE), str(markers), str(self.port), *extra],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise
                time.sleep(0.1)

    def requests(self) -> list[str]:
        """Every line of the request log: ``card``, ``rpc METHOD``, ``cancel TASK``."""
        log = self.markers / "requests.log"
        return log.read_text().splitlines() if log.exists() else []

    def rpcs(self) -> list[str]:
        """The JSON-RPC methods received, in order."""
        return [line.split()[1] for line in self.requests() if line.startswith("rpc ")]

    def cancels(self) -> list[str]:
        """The task ids the agent was asked to cancel."""
        return [line.split()[1] for line in self.requests() if line.startswith("cancel ")]

    def wait_for(self, line: str, timeout_s: float = 30) -> None:
        deadline = time.monotonic() + timeout_s
        while line not in self.requests():
            assert time.monotonic() < deadline, f"the agent never logged {line!r}"
            time.sleep(0.1)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)


@contextmanager
def _serving(tmp_path: Path, name: str, *extra: str) -> Iterator[Agent]:
    """A fixture agent logging into ``tmp_path/name``, stopped afterwards."""
    markers = tmp_path / name
    markers.mkdir()
    started = Agent(markers, *extra)
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture
def agent(tmp_path: Path) -> Iterator[Agent]:
    with _serving(tmp_path, "agent-markers") as started:
        yield started


def _options(agent: Agent, **extra: Any) -> dict[str, Any]:
    return {"a2a_agents": [{"name": "peer", "url": agent.url}], **LOOPBACK, **extra}


def _run(c: Client, project: str, args: dict[str, Any], corr: str) -> dict[str, Any]:
    request = {
        "name": "a2a.peer.send",
        "args": args,
        "meta": {"conversation_id": C, "correlation_id": corr},
    }
    return c.run_tool(project, request)


def _entries(c: Client, project: str, corr: str) -> list[dict[str, Any]]:
    return list(c.incident_timeline(project, C, limit=500, correlation_id=corr)["entries"])


def _updates(c: Client, project: str, corr: str) -> list[dict[str, Any]]:
    return [e["data"] for e in _entries(c, project, corr) if e["type"] == "a2a.task_updated"]


def _asset_errors(daemon: Daemon, project: str) -> list[dict[str, Any]]:
    with Journal.open(daemon.home, "sqlite") as journal:
        loaded = [e for e in journal.read_project(project) if e.type == "project.assets_loaded"]
    return list(loaded[-1].data["errors"])


def _started(c: Client, tmp_path: Path, options: dict[str, Any]) -> str:
    """Project ``p1`` on a fresh root with ``options``, and its conversation ``c1``."""
    project = str(c.start_project(make_root(tmp_path / "repo"), "p1", options))
    c.start_conversation(project, C)
    return project


def _assert_left_out(c: Client, daemon: Daemon, project: str, reason: str) -> None:
    """The agent has no tool, ``project.assets_loaded`` says why, and a call is unknown."""
    assert [t for t in c.list_tools(project) if t["name"].startswith("a2a.")] == []
    [error] = _asset_errors(daemon, project)
    assert error["type"] == "a2a_agent" and error["key"] == "peer"
    assert error["reason"].startswith(reason), error
    c.start_conversation(project, C)
    result = _run(c, project, {"text": "x"}, "left-out")
    assert result["reason"]["code"] == "unknown_tool", result


def test_a_model_turn_delegates_to_the_remote_agent_and_gets_its_answer(
    daemon: Daemon, tmp_path: Path, agent: Agent
) -> None:
    root = make_root(tmp_path / "repo")
    with daemon.client(timeout_s=60) as c:
        project = c.start_project(root, "p1", _options(agent))
        [tool] = [t for t in c.list_tools(project) if t["name"] == "a2a.peer.send"]
        assert "Fixture agent" in tool["description"]
        assert "- Echo: Repeats the message back." in tool["description"]
        assert tool["network_capable"] is True
        c.start_conversation(project, C)
        calls = [{"name": "a2a.peer.send", "args": {"text": "hello from roost"}}]
        ack = c.send_message(
            project, C, "delegate", correlation_id="turn-1", wait=True, llm={"tool_calls": calls}
        )
        assert ack["outcome"] == "llm.completed"
        entries = _entries(c, project, "turn-1")
        [done] = [e["data"] for e in entries if e["type"] == "tool.completed"]
        result = done["result"]["result"]
        assert result["text"] == "echo: hello from roost"
        assert result["state"] == "completed"
        assert result["artifacts"][0]["name"] == "answer"
        task_id, context_id = result["task_id"], result["context_id"]
        updates = _updates(c, project, "turn-1")
        assert [u["state"] for u in updates] == ["submitted", "working", "completed"]
        assert {u["task_id"] for u in updates} == {task_id}
        assert {u["call_id"] for u in updates} == {done["call_id"]}
        # the model saw the remote answer as the tool's result
        assistant = [e["data"]["content"] for e in entries if e["type"] == "assistant.message"]
        assert assistant[-1] == "Tool a2a.peer.send completed."
        # a second call continues the remote conversation through its context id
        again = _run(c, project, {"text": "more", "context_id": context_id}, "turn-2")
        assert again["status"] == "ok", again
        assert again["result"]["text"] == "echo #2: more"
        assert again["result"]["context_id"] == context_id
        # the incident report shows the delegation as one stage with its remote task id
        report = c.incident_report(project, C, correlation_id="turn-1")
        [stage] = [s for s in report["stages"] if s["stage"] == "tool_call"]
        assert stage["label"].endswith(f" · remote task {task_id}")
        [row] = report["tool_calls"]
        assert row["remote_task_id"] == task_id and row["outcome"] == "completed"
    assert agent.rpcs() == ["SendStreamingMessage", "SendStreamingMessage"]


def test_a_remote_answer_is_redacted_and_capped_like_any_result(
    daemon: Daemon, tmp_path: Path, agent: Agent
) -> None:
    token = "ghp_" + "a1B2c3D4e5" * 3 + "f6G7h8"
    with daemon.client(timeout_s=60) as c:
        project = _started(c, tmp_path, _options(agent, tool_max_output_bytes=2000))
        secret = _run(c, project, {"text": f"the key is {token}"}, "secret")
        assert secret["status"] == "ok", secret
        assert token not in json.dumps(secret)
        assert secret["result"]["text"].startswith("echo: the key is ")
        assert token not in json.dumps(_entries(c, project, "secret"))
        big = _run(c, project, {"text": "x" * 3000}, "big")
        assert big["status"] == "error" and big["reason"]["code"] == "output_too_large", big
        assert big["reason"]["max"] == 2000
        # an agent that keeps streaming is cut off at the cap and its task cancelled
        runaway = _run(c, project, {"text": "big 50"}, "runaway")
        assert runaway["reason"]["code"] == "output_too_large", runaway["reason"]
        assert runaway["reason"]["message"].startswith("A2A agent peer sent more than 2000 bytes")
        states = [u["state"] for u in _updates(c, project, "runaway")]
        assert states[-2:] == ["cancel_requested", "canceled"], states
    assert agent.rpcs().count("SendStreamingMessage") == 3
    assert runaway["reason"]["task_id"] in agent.cancels()


def test_a_denied_delegation_never_reaches_the_agent(
    daemon: Daemon, tmp_path: Path, agent: Agent
) -> None:
    root = make_root(tmp_path / "repo")
    with daemon.client(timeout_s=60) as c:
        project = c.start_project(root, "p1", _options(agent, deny_tools=["a2a.*"]))
        assert [t for t in c.list_tools(project) if t["name"].startswith("a2a.")] == []
        c.start_conversation(project, C)
        calls = [{"name": "a2a.peer.send", "args": {"text": "let me in"}}]
        c.send_message(project, C, "x", correlation_id="deny", wait=True, llm={"tool_calls": calls})
        entries = _entries(c, project, "deny")
        denied = [e["data"] for e in entries if e["type"] == "policy.denied"]
        assert [d["tool"] for d in denied] == ["a2a.peer.send"]
        [failed] = [e["data"] for e in entries if e["type"] == "tool.failed"]
        assert failed["reason"]["code"] == "denied"
        direct = _run(c, project, {"text": "let me in"}, "deny-2")
        assert direct["status"] == "error" and direct["reason"]["code"] == "denied"
    assert agent.rpcs() == []  # only the card was fetched, at project start
    assert agent.requests() == ["card"]


def test_a_delegation_waits_for_approval_and_runs_once_approved(
    daemon: Daemon, tmp_path: Path, agent: Agent
) -> None:
    with daemon.client(timeout_s=60) as c:
        project = _started(c, tmp_path, _options(agent, approval_mode="sensitive"))
        calls = [{"name": "a2a.peer.send", "args": {"text": "approved"}}]
        ack = c.send_message(
            project, C, "x", correlation_id="ask", wait=True, llm={"tool_calls": calls}
        )
        assert ack["outcome"] == "awaiting_approval"
        [call_id] = ack["outcome_data"]["call_ids"]
        assert agent.rpcs() == []  # nothing is sent before a person approves
        # a client's run_tool has nobody to approve it: refused, never sent
        direct = _run(c, project, {"text": "unattended"}, "ask-2")
        assert direct["reason"]["code"] == "denied"
        assert direct["reason"]["reason"] == "approval_required"
        c.approve(project, C, call_id)
        deadline = time.monotonic() + 30
        while "llm.completed" not in [e["type"] for e in _entries(c, project, "ask")]:
            assert time.monotonic() < deadline, "the approved turn never ended"
            time.sleep(0.1)
        [done] = [e["data"] for e in _entries(c, project, "ask") if e["type"] == "tool.completed"]
        assert done["result"]["result"]["text"] == "echo: approved"
    assert agent.rpcs() == ["SendStreamingMessage"]


def test_an_agent_outside_the_egress_allowlist_is_never_contacted(
    daemon: Daemon, tmp_path: Path, agent: Agent
) -> None:
    root = make_root(tmp_path / "repo")
    with daemon.client(timeout_s=60) as c:
        options = {"a2a_agents": [{"name": "peer", "url": agent.url}]}
        project = c.start_project(root, "p1", options)
        _assert_left_out(c, daemon, project, "network_endpoint_denied")
    assert agent.requests() == []


def test_without_a2a_in_protocol_allowlist_no_agent_is_contacted(
    daemon: Daemon, tmp_path: Path, agent: Agent
) -> None:
    root = make_root(tmp_path / "repo")
    with daemon.client(timeout_s=60) as c:
        project = c.start_project(root, "p1", _options(agent, protocol_allowlist=["mcp"]))
        _assert_left_out(c, daemon, project, "protocol_not_allowed")
    assert agent.requests() == []


def test_a_card_pointing_elsewhere_is_refused_at_the_connection(
    daemon: Daemon, tmp_path: Path
) -> None:
    # the card is served from 127.0.0.1 (allowlisted) but names 127.0.0.2 as its endpoint
    with _serving(tmp_path, "elsewhere", "http://127.0.0.2:9/") as sneaky:
        with daemon.client(timeout_s=60) as c:
            project = _started(c, tmp_path, _options(sneaky))
            result = _run(c, project, {"text": "x"}, "elsewhere")
            assert result["status"] == "error"
            assert result["reason"]["code"] == "network_endpoint_denied", result
            assert result["reason"]["agent"] == "peer"
            types = [e["type"] for e in _entries(c, project, "elsewhere")]
            assert "security.network_denied" in types
        assert sneaky.requests() == ["card"]


def test_a_timeout_cancels_the_remote_task(daemon: Daemon, tmp_path: Path, agent: Agent) -> None:
    with daemon.client(timeout_s=60) as c:
        project = _started(c, tmp_path, _options(agent, tool_timeout_ms=3000))
        result = _run(c, project, {"text": "slow 60"}, "slow")
        assert result["status"] == "error" and result["reason"]["code"] == "timeout", result
        task_id = result["reason"]["task_id"]
        assert task_id and result["reason"]["agent"] == "peer"
        assert result["reason"]["message"] == (
            f"A2A agent peer did not finish within 3000 ms; its task {task_id} was cancelled"
        )
        states = [u["state"] for u in _updates(c, project, "slow")]
        assert states == ["submitted", "working", "cancel_requested", "canceled"], states
        types = [e["type"] for e in _entries(c, project, "slow")]
        assert "tool.timeout" in types
        # the daemon and the agent still serve the next call
        after = _run(c, project, {"text": "after"}, "after")
        assert after["status"] == "ok" and after["result"]["text"] == "echo: after"
    assert agent.cancels() == [task_id]


def test_an_agent_that_does_not_stream_is_polled_and_its_task_cancelled_on_timeout(
    daemon: Daemon, tmp_path: Path
) -> None:
    with _serving(tmp_path, "polled", "--no-streaming") as polled:
        with daemon.client(timeout_s=60) as c:
            project = _started(c, tmp_path, _options(polled, tool_timeout_ms=3000))
            done = _run(c, project, {"text": "polled"}, "polled")
            assert done["status"] == "ok" and done["result"]["text"] == "echo: polled", done
            slow = _run(c, project, {"text": "slow 60"}, "slow")
            assert slow["reason"]["code"] == "timeout", slow
            states = [u["state"] for u in _updates(c, project, "slow")]
            assert states[-2:] == ["cancel_requested", "canceled"], states
        rpcs = polled.rpcs()
        assert rpcs[0] == "SendMessage" and "SendStreamingMessage" not in rpcs
        assert "GetTask" in rpcs and rpcs[-1] == "CancelTask"
        assert polled.cancels() == [slow["reason"]["task_id"]]


def test_an_agent_on_the_http_json_binding_is_reached_too(daemon: Daemon, tmp_path: Path) -> None:
    with _serving(tmp_path, "rest", "--rest") as rest:
        with daemon.client(timeout_s=60) as c:
            project = _started(c, tmp_path, _options(rest))
            done = _run(c, project, {"text": "over rest"}, "rest")
            assert done["status"] == "ok" and done["result"]["text"] == "echo: over rest", done
        posts = rest.rpcs()
        assert posts and all(p.startswith("REST:/rest/") for p in posts), posts


def test_a_cancelled_conversation_cancels_the_remote_task(
    daemon: Daemon, tmp_path: Path, agent: Agent
) -> None:
    with daemon.client(timeout_s=60) as c:
        project = _started(c, tmp_path, _options(agent, tool_timeout_ms=60000))
        calls = [{"name": "a2a.peer.send", "args": {"text": "slow 60"}}]
        c.send_message(project, C, "slow", correlation_id="long", llm={"tool_calls": calls})
        deadline = time.monotonic() + 30
        while not any(line.startswith("start ") for line in agent.requests()):
            assert time.monotonic() < deadline, "the remote task never started working"
            time.sleep(0.1)
        c.cancel(project, C, correlation_id="long")
        deadline = time.monotonic() + 30
        while not agent.cancels():
            assert time.monotonic() < deadline, "the remote task was never cancelled"
            time.sleep(0.1)
        types = [e["type"] for e in _entries(c, project, "long")]
        assert "tool.cancelled" in types
        deadline = time.monotonic() + 30
        while "canceled" not in [u["state"] for u in _updates(c, project, "long")]:
            assert time.monotonic() < deadline, _updates(c, project, "long")
            time.sleep(0.1)
        states = [u["state"] for u in _updates(c, project, "long")]
        assert states[-2:] == ["cancel_requested", "canceled"], states
        [task_id] = agent.cancels()
        assert {u["task_id"] for u in _updates(c, project, "long")} == {task_id}


def test_an_agent_that_dies_mid_task_fails_the_call_and_the_daemon_stays(
    daemon: Daemon, tmp_path: Path, agent: Agent
) -> None:
    with daemon.client(timeout_s=60) as c:
        project = _started(c, tmp_path, _options(agent))
        died = _run(c, project, {"text": "die"}, "die")
        assert died["status"] == "error", died
        assert died["reason"]["code"] == "tool_error"
        assert died["reason"]["kind"] == "a2a_connection_lost", died
        assert died["reason"]["task_id"]
        assert agent.proc.wait(10) == 3
        gone = _run(c, project, {"text": "anyone?"}, "gone")
        assert gone["reason"]["kind"] == "a2a_unreachable", gone
        assert c.ping() == {"pong": True, "pid": daemon.pid}
        assert c.list_projects()[0]["project_id"] == project


def test_a_bad_a2a_agents_entry_refuses_the_project(daemon: Daemon, tmp_path: Path) -> None:
    root = make_root(tmp_path / "repo")
    with daemon.client(timeout_s=60) as c, pytest.raises(RoostError) as caught:
        c.start_project(root, "p1", {"a2a_agents": [{"name": "peer", "url": "ftp://x"}]})
    assert caught.value.code == "invalid_runtime_opt"
    assert caught.value.details["problem"] == "url_scheme_not_http"
