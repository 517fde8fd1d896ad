"""The client against a real daemon process on the fake backend (the CLI: test_cli.py)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

from runtime.client import Client
from runtime.errors import (
    AlreadyStartedError,
    BadRequestError,
    ConversationAlreadyStartedError,
    ConversationNotFoundError,
    DaemonUnreachableError,
    InvalidRootPathError,
    InvalidRuntimeOptError,
    ProjectNotFoundError,
    RequestError,
    RequestTimeoutError,
)
from tests.runtime.daemon_helpers import SocketProxy, running_daemon


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Iterator[str]:
    path = str(tmp_path_factory.mktemp("daemon") / "home")
    with running_daemon(path):
        yield path


@pytest.fixture
def client(home) -> Iterator[Client]:
    with Client.connect(home) as c:
        yield c


@pytest.fixture
def project(client, tmp_path) -> tuple[str, str]:
    project_id = client.start_project(str(tmp_path), project_id="p-" + uuid.uuid4().hex[:8])
    return project_id, client.start_conversation(project_id, conversation_id="c1")


def test_connecting_without_a_daemon_raises_daemon_unreachable(tmp_path) -> None:
    with pytest.raises(DaemonUnreachableError) as info:
        Client.connect(str(tmp_path))
    assert info.value.details == {
        "home": str(tmp_path),
        "socket": os.path.join(str(tmp_path), "roost.sock"),
    }


def test_a_project_starts_and_is_listed(client, tmp_path) -> None:
    project_id = client.start_project(str(tmp_path), project_id="listed")
    listed = [p for p in client.list_projects() if p["project_id"] == "listed"]
    assert listed == [
        {
            "project_id": "listed",
            "root": str(tmp_path),
            "conversation_count": 0,
            "started_at": listed[0]["started_at"],
        }
    ]
    assert project_id == "listed"


def test_a_relative_root_is_sent_as_an_absolute_path(client, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path.parent)
    client.start_project(tmp_path.name, project_id="relative")
    assert client.diagnostics("relative")["root"] == str(tmp_path)


def test_starting_a_project_twice_raises_already_started(client, project) -> None:
    with pytest.raises(AlreadyStartedError) as info:
        client.start_project("/", project_id=project[0])
    assert (info.value.code, info.value.details) == ("already_started", {"project_id": project[0]})


def test_a_root_that_is_not_a_directory_raises_invalid_root_path(client, tmp_path) -> None:
    missing = str(tmp_path / "missing")
    with pytest.raises(InvalidRootPathError) as info:
        client.start_project(missing)
    assert info.value.details == {"root": missing}


def test_an_unknown_option_raises_invalid_runtime_opt_with_key_and_reason(client, tmp_path) -> None:
    with pytest.raises(InvalidRuntimeOptError) as info:
        client.start_project(str(tmp_path), options={"bogus": 1})
    assert (info.value.key, info.value.reason) == ("bogus", "unknown_option")
    assert info.value.details == {"key": "bogus", "reason": "unknown_option"}


def test_unknown_projects_and_conversations_raise_their_codes(client, project) -> None:
    with pytest.raises(ProjectNotFoundError) as p_info:
        client.diagnostics("nope")
    with pytest.raises(ConversationNotFoundError) as c_info:
        client.resume(project[0], "nope")
    assert p_info.value.details == {"project_id": "nope"}
    assert c_info.value.details == {"project_id": project[0], "conversation_id": "nope"}


def test_a_duplicate_conversation_raises_conversation_already_started(client, project) -> None:
    with pytest.raises(ConversationAlreadyStartedError):
        client.start_conversation(project[0], conversation_id="c1")


def test_invalid_arguments_are_refused_by_the_daemon_as_bad_request(client, project) -> None:
    with pytest.raises(BadRequestError) as info:
        client.get_projection(project[0], project[1], "nope")
    assert info.value.details["reason"] == "invalid_args"


def test_diagnostics_and_tools_come_back_as_the_backend_built_them(client, project) -> None:
    diagnostics = client.diagnostics(project[0])
    tools = client.list_tools(project[0])
    assert diagnostics["conversations"] == ["c1"]
    assert diagnostics["health"] == {"status": "ok"}
    assert [t["name"] for t in tools] == ["fs.list", "fs.read"]


def test_run_tool_returns_failures_as_results(client, project) -> None:
    ok = client.run_tool(
        project[0], {"name": "fs.read", "args": {"path": "a"}, "meta": {"conversation_id": "c1"}}
    )
    failed = client.run_tool(project[0], {"name": "nope", "args": {}})
    assert (ok["status"], ok["conversation_id"], ok["result"]) == (
        "ok",
        "c1",
        {"args": {"path": "a"}},
    )
    assert (failed["status"], failed["reason"]["code"]) == ("error", "unknown_tool")


def test_the_spec_example_event_is_sent_with_its_content_and_correlation(client, project) -> None:
    event = {"type": "user.message", "content": "list skills", "meta": {"correlation_id": "corr-1"}}
    ack = client.send_event(project[0], project[1], event)
    timeline = client.get_projection(project[0], project[1], "timeline")
    assert ack["correlation_id"] == "corr-1"
    assert timeline[-1]["seq"] == ack["seq"]
    assert (timeline[-1]["data"], timeline[-1]["correlation_id"]) == (
        {"content": "list skills"},
        "corr-1",
    )


def test_send_message_with_wait_returns_the_turn_outcome(client, project) -> None:
    ack = client.send_message(project[0], project[1], "hi", correlation_id="corr-w", wait=True)
    assert (ack["correlation_id"], ack["outcome"]) == ("corr-w", "completed")
    assert ack["final_seq"] == ack["seq"] + 2


def test_a_wait_that_runs_out_raises_timeout(client, project) -> None:
    event = {"type": "user.message", "data": {"content": "x", "hang": True}}
    with pytest.raises(RequestTimeoutError) as info:
        client.send_event(project[0], project[1], event, wait=True, wait_timeout_s=0.2)
    assert (info.value.code, info.value.details) == ("timeout", {"timeout_s": 0.2})


def test_the_same_idempotency_key_gives_the_same_ack(client, project) -> None:
    event = {"type": "user.message", "data": {"content": "once"}}
    first = client.send_event(project[0], project[1], event, idempotency_key="k-1")
    second = client.send_event(project[0], project[1], event, idempotency_key="k-1")
    assert first == second


def test_a_lost_reply_is_retried_once_with_the_same_key(home, project, tmp_path) -> None:
    proxy = SocketProxy(str(tmp_path / "proxy"), os.path.join(home, "roost.sock"))
    try:
        with Client.connect(proxy.home) as c:
            proxy.drop_next_reply = True
            ack = c.send_message(project[0], project[1], "exactly once")
            timeline = c.get_projection(project[0], project[1], "timeline")
    finally:
        proxy.close()
    sent = [e for e in timeline if e["data"].get("content") == "exactly once"]
    assert [e["seq"] for e in sent] == [ack["seq"]]
    assert proxy.connections == 2


def test_cancel_resume_approve_and_reject_append_their_events(client, project) -> None:
    p, c = project
    client.cancel(p, c, correlation_id="corr-x", reason="enough")
    client.resume(p, c)
    client.approve(p, c, "call-1")
    client.reject(p, c, "call-2", reason="no")
    timeline = client.get_projection(p, c, "timeline")
    assert [(e["type"], e["data"]) for e in timeline[-4:]] == [
        ("conversation.cancel", {"reason": "enough"}),
        ("conversation.resume", {}),
        ("tool.approved", {"call_id": "call-1", "reason": None}),
        ("tool.rejected", {"call_id": "call-2", "reason": "no"}),
    ]
    assert timeline[-4]["correlation_id"] == "corr-x"


def test_projections_timeline_and_reports_come_back(client, project) -> None:
    p, c = project
    client.send_message(p, c, "one", correlation_id="corr-a")
    client.send_message(p, c, "two", correlation_id="corr-b")
    assert client.get_projection(p, c, "pending_tool_calls") == []
    assert client.get_projection(p, c, "llm_context") == [
        {"role": "user", "content": "one"},
        {"role": "user", "content": "two"},
    ]
    assert client.get_projection(p, c, "diagnostics")["event_count"] == 3
    timeline = client.incident_timeline(p, c, limit=1, correlation_id="corr-b")
    assert (timeline["limit"], timeline["total_entries"]) == (1, 1)
    assert timeline["entries"][0]["data"] == {"content": "two"}
    assert client.incident_report(p, c)["asked"] == ["one", "two"]
    assert client.incident_report(p, c, format="md").startswith("# Incident report: c1\n")


def test_verify_returns_the_verdict(client, project) -> None:
    assert client.verify(project[0]) == {
        "ok": True,
        "checked_events": 2,
        "chain_ok": True,
        "mismatches": [],
    }


def test_stopping_a_conversation_and_a_project_forgets_them(client, project) -> None:
    client.stop_conversation(*project)
    with pytest.raises(ConversationNotFoundError):
        client.resume(*project)
    client.stop_project(project[0])
    with pytest.raises(ProjectNotFoundError):
        client.stop_project(project[0])


def test_an_unexpected_backend_failure_is_an_internal_error_and_the_daemon_lives(
    client, project
) -> None:
    with pytest.raises(RequestError) as info:
        client.run_tool(project[0], {"name": "fake.crash"})
    assert info.value.code == "internal_error"
    assert client.ping()["pong"] is True


def test_subscribe_streams_events_after_the_cursor_in_order(client, project) -> None:
    p, c = project
    first = client.send_message(p, c, "a")
    client.send_message(p, c, "b")
    with client.subscribe(p, c, after_seq=first["seq"]) as stream:
        got = [next(stream)]
        client.send_message(p, c, "c")
        got.append(next(stream))
    assert [e["data"]["content"] for e in got] == ["b", "c"]
    assert got[0]["seq"] < got[1]["seq"]


def test_subscribe_to_an_unknown_project_raises_on_the_first_event(client) -> None:
    stream = client.subscribe("nope")
    with stream, pytest.raises(ProjectNotFoundError):
        next(stream)


def test_a_subscription_ends_when_the_project_stops(client, project) -> None:
    with client.subscribe(project[0]) as stream:
        types_seen = [next(stream)["type"]]
        client.stop_project(project[0])
        types_seen += [e["type"] for e in stream]
    assert types_seen == ["project.started", "conversation.started", "project.stopped"]


def test_subscribe_resumes_from_the_last_seq_after_a_dropped_connection(
    home, client, project, tmp_path
) -> None:
    p, c = project
    proxy = SocketProxy(str(tmp_path / "proxy"), os.path.join(home, "roost.sock"))
    try:
        with Client.connect(proxy.home) as via_proxy, via_proxy.subscribe(p, c) as stream:
            assert next(stream)["type"] == "conversation.started"
            client.send_message(p, c, "m1")
            assert next(stream)["data"] == {"content": "m1"}
            proxy.cut()
            client.send_message(p, c, "m2")
            client.send_message(p, c, "m3")
            rest = [next(stream)["data"]["content"], next(stream)["data"]["content"]]
            reconnects = stream.reconnects
    finally:
        proxy.close()
    assert rest == ["m2", "m3"]
    assert reconnects == 1
