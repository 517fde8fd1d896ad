"""roost a2a serve against a real daemon, driven by the A2A SDK's own client.

The server is the real ``roost`` command in a subprocess, on real HTTP on loopback; the
client is ``a2a.client`` (JSON-RPC, 1.x methods). What a task did is read back from the
daemon's journal.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from a2a.client import (
    A2ACardResolver,
    A2AClientError,
    AgentCardResolutionError,
    ClientConfig,
    ClientFactory,
    create_client,
    minimal_agent_card,
)
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    StreamResponse,
    Task,
    TaskState,
    UnsupportedOperationError,
)

from tests.integration.conftest import READ_TURN, REPO_ROOT, Daemon
from tests.integration.serve_helpers import as_other_user, needs_another_user, wait_for_line

ROOST = [sys.executable, "-m", "runtime.cli"]
P = "p1"


def serve_env(home: str) -> dict[str, str]:
    path = os.pathsep.join(p for p in (REPO_ROOT, os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "ROOST_HOME": home, "PYTHONPATH": path}


def started(daemon: Daemon, root: str, **options: Any) -> None:
    with daemon.client() as c:
        c.start_project(root, project_id=P, options=options)


@contextmanager
def serving(daemon: Daemon, *args: str) -> Iterator[tuple[str, list[str]]]:
    """``roost a2a serve p1`` on a free loopback port: its URL, and its stderr lines."""
    proc = subprocess.Popen(
        [*ROOST, "a2a", "serve", P, *args],
        env=serve_env(daemon.home),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []
    try:
        line = wait_for_line(proc, r"serving project p1 on http://127\.0\.0\.1:\d+/ ", lines)
        yield line.split(" on ", 1)[1].split(" ", 1)[0], lines
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        lines.extend(err.splitlines())
    assert proc.returncode == 0, err
    assert out == ""  # stdout carries nothing


def message(text: str, context_id: str | None = None, **llm: Any) -> SendMessageRequest:
    msg = Message(role=Role.ROLE_USER, message_id=str(uuid.uuid4()), parts=[Part(text=text)])
    if context_id:
        msg.context_id = context_id
    request = SendMessageRequest(message=msg)
    if llm:
        request.metadata.update({"roost": {"llm": llm}})
    return request


async def send(url: str, request: SendMessageRequest) -> Task:
    """A non-streaming send: the task it returns (terminal or input-required)."""
    client = await create_client(url, client_config=ClientConfig(streaming=False))
    try:
        found = [r async for r in client.send_message(request)]
    finally:
        await client.close()
    [response] = found
    assert response.HasField("task"), response
    task: Task = response.task
    return task


def journal(daemon: Daemon, conversation: str, task_id: str | None = None) -> list[dict[str, Any]]:
    with daemon.client() as c:
        timeline = c.incident_timeline(P, conversation, limit=500, correlation_id=task_id)
    return list(timeline["entries"])


def wait_for(check: Callable[[], bool], what: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def text_of(task: Task) -> list[str]:
    return [part.text for artifact in task.artifacts for part in artifact.parts]


def roost(home: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*ROOST, *args],
        env=serve_env(home),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


# --- the agent card ------------------------------------------------------------------------


def test_the_agent_card_describes_the_project_its_commands_workflows_and_streaming(
    daemon: Daemon, project_root: str
) -> None:
    root = Path(project_root)
    (root / ".roost" / "commands").mkdir(parents=True)
    (root / ".roost" / "commands" / "hello.md").write_text(
        '---\ndescription: Say hello\nargv: ["echo", "hello"]\n---\n'
    )
    (root / ".roost" / "workflows").mkdir(parents=True)
    steps = '[{"tool": "fs.read", "args": {"path": "README.md"}}]'
    (root / ".roost" / "workflows" / "readme.md").write_text(
        f"---\ndescription: Read the README\nsteps: {steps}\n---\n"
    )
    started(daemon, project_root)
    with serving(daemon, "--http", "127.0.0.1:0") as (url, _):

        async def card() -> Any:
            async with httpx.AsyncClient() as http:
                return await A2ACardResolver(http, url).get_agent_card()

        got = anyio.run(card)
    assert got.name == P
    assert got.description == "Hello from the seed file."  # README's first paragraph
    assert got.capabilities.streaming is True
    assert got.capabilities.push_notifications is False
    interface = got.supported_interfaces[0]
    assert (interface.url, interface.protocol_binding) == (url, "JSONRPC")
    skills = {s.id: (s.name, s.description, list(s.tags)) for s in got.skills}
    assert skills == {
        "command.run.hello": ("hello", "Say hello", ["roost", "command"]),
        "workflow.run.readme": ("readme", "Read the README", ["roost", "workflow"]),
    }


# --- a task is a turn -----------------------------------------------------------------------


def test_a_message_runs_a_turn_that_reads_a_file_and_completes_with_the_answer(
    daemon: Daemon, project_root: str
) -> None:
    started(daemon, project_root)
    with serving(daemon) as (url, _):

        async def session() -> tuple[Task, Task, Task]:
            first = await send(url, message("read README.md"))
            again = await send(url, message("read notes.txt", context_id=first.context_id))
            client = await create_client(url)
            try:
                got = await client.get_task(GetTaskRequest(id=first.id))
            finally:
                await client.close()
            return first, again, got

        first, again, got = anyio.run(session)

    assert first.status.state == TaskState.TASK_STATE_COMPLETED
    assert text_of(first) == ["Tool fs.read completed."]
    assert first.status.message.parts[0].text == "Tool fs.read completed."
    conversation = f"a2a-{first.context_id}"
    assert first.metadata["roost"]["conversation_id"] == conversation
    assert re.fullmatch(re.escape(first.context_id) + r"\.[0-9a-f]{12}", first.id)
    # the task is one turn of conversation a2a-CONTEXT, its id the turn's correlation id
    turn = journal(daemon, conversation, first.id)
    assert [e["type"] for e in turn] == READ_TURN
    assert turn[0]["data"]["content"] == "read README.md"
    read = next(e for e in turn if e["type"] == "tool.completed")
    assert "# Seed project" in json.dumps(read["data"]["result"])
    # the same context is the same conversation
    assert again.context_id == first.context_id
    assert again.status.state == TaskState.TASK_STATE_COMPLETED
    assert [e["type"] for e in journal(daemon, conversation, again.id)] == READ_TURN
    # GetTask reads the journal: the same state, question and answer
    assert got.status.state == TaskState.TASK_STATE_COMPLETED
    assert text_of(got) == ["Tool fs.read completed."]
    assert got.history[0].parts[0].text == "read README.md"
    assert got.history[0].message_id == turn[0]["event_id"]


def test_get_task_reads_the_journal_after_the_server_is_started_again(
    daemon: Daemon, project_root: str
) -> None:
    started(daemon, project_root)
    with serving(daemon) as (url, _):
        task = anyio.run(send, url, message("read notes.txt"))
    with serving(daemon) as (url, _):

        async def read_back() -> Task:
            client = await create_client(url)
            try:
                return await client.get_task(GetTaskRequest(id=task.id))
            finally:
                await client.close()

        got = anyio.run(read_back)
    assert got.id == task.id
    assert got.status.state == TaskState.TASK_STATE_COMPLETED
    assert text_of(got) == ["Tool fs.read completed."]


def test_the_sdks_0_3_client_speaks_message_send_and_tasks_get_to_the_same_server(
    daemon: Daemon, project_root: str
) -> None:
    started(daemon, project_root)
    with serving(daemon) as (url, _):

        async def session() -> tuple[list[str], Task, Task, list[StreamResponse]]:
            async with httpx.AsyncClient() as http:
                card = await A2ACardResolver(http, url).get_agent_card()
                versions = [i.protocol_version for i in card.supported_interfaces]
                del card.supported_interfaces[:]
                card.supported_interfaces.add(url=url, protocol_binding="JSONRPC")
                card.supported_interfaces[0].protocol_version = "0.3"
                config = ClientConfig(streaming=False, httpx_client=http)
                client = ClientFactory(config).create(card)  # the 0.3 JSON-RPC transport
                [response] = [r async for r in client.send_message(message("read README.md"))]
                got = await client.get_task(GetTaskRequest(id=response.task.id))
                config = ClientConfig(streaming=True, httpx_client=http)
                streaming = ClientFactory(config).create(card)
                streamed = [r async for r in streaming.send_message(message("read notes.txt"))]
            return versions, response.task, got, streamed

        versions, task, got, streamed = anyio.run(session)
    assert versions == ["1.0", "0.3"]
    states = [r.status_update.status.state for r in streamed if r.HasField("status_update")]
    assert states[-1] == TaskState.TASK_STATE_COMPLETED  # message/stream
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert text_of(task) == ["Tool fs.read completed."]
    assert got.status.state == TaskState.TASK_STATE_COMPLETED
    assert [e["type"] for e in journal(daemon, f"a2a-{task.context_id}", task.id)] == READ_TURN


def test_streaming_sends_the_deltas_as_the_answer_artifact_and_the_status_updates(
    daemon: Daemon, project_root: str
) -> None:
    started(daemon, project_root)
    with serving(daemon) as (url, _):

        async def stream() -> list[StreamResponse]:
            client = await create_client(url, client_config=ClientConfig(streaming=True))
            try:
                request = message(
                    "hi", assistant_text="Hello there", delta_chunks=["Hel", "lo there"]
                )
                return [r async for r in client.send_message(request)]
            finally:
                await client.close()

        got = anyio.run(stream)

    kinds = [r.WhichOneof("payload") for r in got]
    assert kinds[0] == "task"
    assert got[0].task.status.state == TaskState.TASK_STATE_SUBMITTED
    states = [r.status_update.status.state for r in got if r.HasField("status_update")]
    assert states == [TaskState.TASK_STATE_WORKING, TaskState.TASK_STATE_COMPLETED]
    chunks = [
        (r.artifact_update.artifact.parts[0].text, r.artifact_update.append)
        for r in got
        if r.HasField("artifact_update")
    ]
    # each delta as it came (appended), then the whole message replaces them
    assert chunks == [("Hel", False), ("lo there", True), ("Hello there", False)]
    assert kinds[-1] == "status_update"
    task_id = got[0].task.id
    conversation = f"a2a-{got[0].task.context_id}"
    turn = journal(daemon, conversation, task_id)
    deltas = [e["data"]["content"] for e in turn if e["type"] == "assistant.delta"]
    assert deltas == ["Hel", "lo there"]


def test_cancel_mid_turn_cancels_the_conversation_and_the_next_message_runs(
    daemon: Daemon, project_root: str
) -> None:
    started(daemon, project_root)
    with serving(daemon) as (url, _):

        async def session() -> tuple[Task, Task, Task, list[dict[str, Any]]]:
            client = await create_client(url, client_config=ClientConfig(streaming=False))
            try:
                request = message(
                    "wait",
                    tool_calls=[{"name": "command.run", "args": {"command": "sleep 120"}}],
                )
                request.configuration.CopyFrom(SendMessageConfiguration(return_immediately=True))
                [response] = [r async for r in client.send_message(request)]
                task = response.task
                conversation = f"a2a-{task.context_id}"

                def running() -> bool:
                    return any(e["type"] == "tool.started" for e in journal(daemon, conversation))

                await anyio.to_thread.run_sync(lambda: wait_for(running, "the slow tool"))
                before = journal(daemon, conversation, task.id)
                cancelled = await client.cancel_task(CancelTaskRequest(id=task.id))
                got = await client.get_task(GetTaskRequest(id=task.id))
            finally:
                await client.close()
            after = await send(url, message("read notes.txt", context_id=task.context_id))
            return cancelled, got, after, before

        cancelled, got, after, before = anyio.run(session)

    if any(e["type"] == "tool.failed" for e in before):
        pytest.skip(f"commands cannot run here: {before}")
    assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
    assert got.status.state == TaskState.TASK_STATE_CANCELED
    assert got.status.message.parts[0].text == "conversation_cancelled"
    conversation = f"a2a-{cancelled.context_id}"

    def killed() -> bool:  # the worker records the kill after the cancel, on its own time
        kinds = [e["type"] for e in journal(daemon, conversation, cancelled.id)]
        return "tool.child_processes_terminated" in kinds

    wait_for(killed, "the sleep's processes to be killed")
    turn = [(e["type"], e["data"]) for e in journal(daemon, conversation, cancelled.id)]
    kinds = [t for t, _ in turn]
    at = kinds.index("conversation.cancel")
    assert kinds[at : at + 3] == ["conversation.cancel", "tool.cancelled", "llm.failed"]
    assert turn[at][1]["reason"] == "a2a CancelTask"
    assert turn[at + 1][1]["reason"] == "conversation_cancelled"
    assert "tool.child_processes_terminated" in kinds[at:]  # the sleep was killed
    assert "tool.completed" not in kinds
    # the next message in the context resumes the conversation and runs
    assert after.status.state == TaskState.TASK_STATE_COMPLETED
    assert "conversation.resume" in [e["type"] for e in journal(daemon, conversation)]


def test_a_call_awaiting_approval_is_input_required_and_roost_approve_resumes_the_task(
    daemon: Daemon, project_root: str
) -> None:
    started(daemon, project_root, approval_mode="always")
    with serving(daemon) as (url, _):

        async def session() -> tuple[list[StreamResponse], Task, list[StreamResponse], Task]:
            client = await create_client(url, client_config=ClientConfig(streaming=True))
            try:
                stream: AsyncIterator[StreamResponse] = client.send_message(
                    message("read README.md")
                )
                before: list[StreamResponse] = []
                async for response in stream:
                    before.append(response)
                    state = response.status_update.status.state
                    if state == TaskState.TASK_STATE_INPUT_REQUIRED:
                        break
                task_id = before[0].task.id
                waiting = await client.get_task(GetTaskRequest(id=task_id))
                follow_up = message("approve it", context_id=waiting.context_id)
                follow_up.message.task_id = task_id
                with pytest.raises(UnsupportedOperationError, match="takes no further input"):
                    await send(url, follow_up)
                note = before[-1].status_update.status.message.parts[0].text
                command = re.search(r"`(roost approve [^`]+)`", note)
                assert command is not None, note
                approved = await anyio.to_thread.run_sync(
                    lambda: roost(daemon.home, *command.group(1).split()[1:])
                )
                assert approved.returncode == 0, approved.stderr
                rest = [r async for r in stream]
                done = await client.get_task(GetTaskRequest(id=task_id))
            finally:
                await client.close()
            return before, waiting, rest, done

        _, waiting, rest, done = anyio.run(session)

    assert waiting.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert "awaits approval" in waiting.status.message.parts[0].text
    states = [r.status_update.status.state for r in rest if r.HasField("status_update")]
    assert states == [TaskState.TASK_STATE_WORKING, TaskState.TASK_STATE_COMPLETED]
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert text_of(done) == ["Tool fs.read completed."]
    conversation = f"a2a-{done.context_id}"
    kinds = [e["type"] for e in journal(daemon, conversation, done.id)]
    assert kinds.index("tool.approval_requested") < kinds.index("tool.approved")
    assert kinds[-1] == "llm.completed"


# --- refusals -------------------------------------------------------------------------------


def test_a_project_without_a2a_in_its_protocol_allowlist_refuses_every_request_and_journals_it(
    daemon: Daemon, project_root: str
) -> None:
    started(daemon, project_root, protocol_allowlist=["mcp"])
    with serving(daemon) as (url, lines):

        async def refused() -> tuple[str, str]:
            async with httpx.AsyncClient() as http:
                with pytest.raises(AgentCardResolutionError) as card:
                    await A2ACardResolver(http, url).get_agent_card()
                config = ClientConfig(streaming=False, httpx_client=http)
                client = ClientFactory(config).create(minimal_agent_card(url, ["JSONRPC"]))
                with pytest.raises(A2AClientError) as sent:
                    [r async for r in client.send_message(message("read README.md"))]
            return str(card.value), str(sent.value)

        card, sent = anyio.run(refused)
        raw = httpx.post(url, content=b"{}")
    assert any("does not allow a2a" in line for line in lines)
    assert "403" in card
    assert "HTTP Error 403" in sent
    assert raw.status_code == 403
    assert raw.json()["error"]["code"] == "protocol_denied"
    with daemon.client() as c:
        diagnostics = c.diagnostics(P)
    assert diagnostics["signal_counts"].get("security.protocol_denied") == 3
    assert diagnostics["conversations"] == []  # nothing ran


POST_FROM_A_COMMAND = (
    "import http.client, sys; c = http.client.HTTPConnection('127.0.0.1', int(sys.argv[1]));"
    " c.request('POST', '/', body=b'{}', headers={'Content-Type': 'application/json'});"
    " r = c.getresponse(); print(r.status, r.read().decode())"
)


def test_a_sandboxed_command_with_egress_allowed_cannot_call_the_a2a_server(
    daemon: Daemon, project_root: str
) -> None:
    started(daemon, project_root, network_egress_policy="allow")
    with serving(daemon) as (url, _):
        port = url.rsplit(":", 1)[1].strip("/")
        request = {
            "name": "command.run",
            "args": {"command": ["python3", "-c", POST_FROM_A_COMMAND, port]},
        }
        with daemon.client(timeout_s=30) as c:
            result = c.run_tool(P, request)
        own = httpx.get(url + ".well-known/agent-card.json")
    if result["status"] == "error" and result["reason"]["code"] == "isolation_unavailable":
        pytest.skip("commands cannot run here: " + result["reason"].get("message", ""))
    assert result["status"] == "ok", result
    stdout = result["result"]["stdout"]
    assert stdout.startswith("403 peer_not_allowed: roost a2a serve answers only"), stdout
    assert "(check: other_pid_namespace)" in stdout or "(check: sandboxed)" in stdout
    assert own.status_code == 200  # the server's own user, outside the sandbox, gets in


GET_AS_OTHER_USER = """
import http.client, sys
conn = http.client.HTTPConnection(sys.argv[1], int(sys.argv[2]), timeout=10)
conn.request("GET", "/.well-known/agent-card.json")
response = conn.getresponse()
print(response.status, response.read().decode())
"""


@needs_another_user
def test_another_user_on_the_machine_is_refused(daemon: Daemon, project_root: str) -> None:
    started(daemon, project_root)
    with serving(daemon) as (url, _):
        port = url.rsplit(":", 1)[1].strip("/")
        other = as_other_user(GET_AS_OTHER_USER, "127.0.0.1", port)
    assert other.stdout.startswith("403 peer_not_allowed: roost a2a serve answers only"), other
    assert other.stdout.strip().endswith("(check: other_uid)")


def test_web_pages_and_rebound_host_names_are_refused(daemon: Daemon, project_root: str) -> None:
    started(daemon, project_root)
    with serving(daemon) as (url, _):
        card = url + ".well-known/agent-card.json"
        rebound = httpx.get(card, headers={"Host": "evil.example"})
        foreign = httpx.post(url, content=b"{}", headers={"Origin": "http://evil.example"})
        local = httpx.get(card, headers={"Origin": url.rstrip("/")})
    assert rebound.status_code == 421
    assert rebound.json()["error"]["code"] == "invalid_host"
    assert foreign.status_code == 403
    assert foreign.json()["error"]["code"] == "invalid_origin"
    assert local.status_code == 200


@pytest.mark.parametrize("address", ["0.0.0.0:8765", "[::]:8765", "192.0.2.7:8765"])
def test_a_non_loopback_address_is_refused_before_anything_listens(
    tmp_path: Path, address: str
) -> None:
    done = roost(str(tmp_path), "a2a", "serve", P, "--http", address)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.startswith(f"roost: address_not_loopback: --http {address}: ")


def test_bad_input_fails_with_the_clis_codes_and_an_empty_stdout(
    daemon: Daemon, project_root: str, tmp_path: Path
) -> None:
    started(daemon, project_root)
    cases = [
        (("a2a", "serve", "nope"), daemon.home, 1, "project_not_found"),
        (("a2a", "serve", P, "--http", "8765"), daemon.home, 2, "usage"),
        (("a2a", "serve", P), str(tmp_path / "no-daemon"), 3, "daemon_unreachable"),
    ]
    for args, home, status, code in cases:
        done = roost(home, *args)
        assert (done.returncode, done.stdout) == (status, ""), (args, done.stderr)
        assert done.stderr.startswith(f"roost: {code}: "), done.stderr
