"""The gateway on a real Unix socket, in a thread of the test process."""

from __future__ import annotations

import os
import socket
import stat
import struct
import threading
from collections.abc import Iterator
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime.client import Client
from runtime.daemon.config import DaemonConfig, config_for_home
from runtime.daemon.gateway import Gateway
from runtime.errors import BadRequestError, OverloadedError, ProjectNotFoundError, RequestError
from runtime.wire.ops import Call
from runtime.wire.protocol import decode_server_frame, encode_frame, encode_request, read_frame
from runtime.wire.transport import connect_unix_socket, peer_credentials, peer_is_allowed
from tests.runtime.daemon_helpers import wait_for
from tests.runtime.fake_backend import FakeBackend


class GatedBackend(FakeBackend):
    """A fake whose ``list_projects`` blocks until ``gate`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = threading.Event()
        self.gate = threading.Event()
        self.left = threading.Event()

    def op_list_projects(self, call: Call[Any], deadline: float) -> list[dict[str, Any]]:
        self.entered.set()
        self.gate.wait(10)
        self.left.set()
        return super().op_list_projects(call, deadline)


class Server:
    """A started gateway and what a test needs around it."""

    def __init__(self, config: DaemonConfig, backend: FakeBackend, daemon_uid: int | None) -> None:
        self.config = config
        self.backend = backend
        self.shutdowns = threading.Event()
        self.gateway = Gateway(
            config, backend, on_shutdown=self.shutdowns.set, daemon_uid=daemon_uid
        )
        self.gateway.start()

    def raw(self) -> socket.socket:
        return connect_unix_socket(self.config.socket_path, 5)

    def client(self) -> Client:
        return Client.connect(self.config.home)


@pytest.fixture
def make_server(tmp_path) -> Iterator[Any]:
    servers: list[Server] = []

    def make(
        backend: FakeBackend | None = None, daemon_uid: int | None = None, **limits: int
    ) -> Server:
        config = msgspec.structs.replace(config_for_home(str(tmp_path / "home")), **limits)
        server = Server(config, backend or FakeBackend(), daemon_uid)
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.backend.close()
        server.gateway.stop(timeout_s=5)


@pytest.fixture
def server(make_server) -> Server:
    return make_server()


def list_in_thread(server: Server, results: list[Any]) -> threading.Thread:
    def run() -> None:
        try:
            with server.client() as c:
                results.append(c.list_projects())
        except RequestError as e:
            results.append(e.code)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def read_reply(sock: socket.socket) -> Any:
    body = read_frame(sock, 1 << 20)
    assert body is not None
    return decode_server_frame(body)


def assert_serves(server: Server) -> None:
    with server.client() as c:
        assert c.ping()["pong"] is True


def test_the_socket_is_owner_only_in_an_owner_only_directory(make_server) -> None:
    server = make_server()
    assert stat.S_IMODE(os.stat(server.config.socket_path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(server.config.home).st_mode) == 0o700


def test_peer_credentials_are_those_of_the_connecting_process(make_server) -> None:
    server = make_server()
    with server.raw() as client:
        # The kernel reports the peer of the client's socket: this process (the server).
        creds = peer_credentials(client)
    assert (creds.pid, creds.uid, creds.gid) == (os.getpid(), os.getuid(), os.getgid())


def test_only_the_daemons_own_uid_is_allowed() -> None:
    assert peer_is_allowed(1000, 1000) is True
    assert peer_is_allowed(0, 1000) is False
    assert peer_is_allowed(1001, 1000) is False


def test_a_peer_of_another_uid_gets_an_error_and_is_disconnected(make_server) -> None:
    server = make_server(daemon_uid=os.getuid() + 1)
    with server.raw() as sock:
        reply = read_reply(sock)
        assert read_frame(sock, 1024) is None
    assert reply.kind == "error"
    assert reply.value["details"] == {
        "reason": "peer_not_allowed",
        "check": "other_uid",
        "uid": os.getuid(),
    }
    assert server.gateway.statistics().rejected_peers == 1


def test_a_huge_length_prefix_gets_frame_too_large_and_a_closed_connection(make_server) -> None:
    server = make_server(max_frame_bytes=4096)
    with server.raw() as sock:
        sock.sendall(struct.pack(">I", 0xFFFFFFFF))
        reply = read_reply(sock)
        assert read_frame(sock, 1024) is None
    assert reply.value["details"] == {"reason": "frame_too_large", "size": 0xFFFFFFFF, "max": 4096}
    assert_serves(server)


def test_malformed_json_gets_an_error_and_the_connection_stays_usable(make_server) -> None:
    server = make_server()
    with server.raw() as sock:
        sock.sendall(struct.pack(">I", 5) + b"{nope")
        first = read_reply(sock)
        sock.sendall(encode_request(2, "ping", {}))
        second = read_reply(sock)
    assert (first.id, first.kind, first.value["details"]["reason"]) == (
        0,
        "error",
        "malformed_frame",
    )
    assert (second.id, second.kind, second.value["pong"]) == (2, "result", True)


def test_an_unknown_op_gets_unknown_op_with_the_request_id(make_server) -> None:
    server = make_server()
    with server.raw() as sock:
        sock.sendall(encode_request(9, "explode", {}))
        reply = read_reply(sock)
    assert (reply.id, reply.value["code"]) == (9, "bad_request")
    assert reply.value["details"] == {"reason": "unknown_op", "op": "explode"}


def test_a_client_closing_mid_frame_does_not_disturb_the_server(make_server) -> None:
    server = make_server()
    with server.raw() as sock:
        sock.sendall(struct.pack(">I", 100) + b'{"id": 1, "op"')
    assert_serves(server)


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(garbage=st.binary(max_size=64))
def test_garbage_bytes_never_break_the_server(server: Server, garbage: bytes) -> None:
    with server.raw() as sock:
        sock.sendall(garbage)
        sock.shutdown(socket.SHUT_WR)
        while read_frame(sock, 1 << 24) is not None:
            pass
    assert_serves(server)


def test_requests_on_one_connection_are_answered_in_order(make_server) -> None:
    server = make_server()
    with server.raw() as sock:
        sock.sendall(b"".join(encode_request(i, "ping", {}) for i in range(1, 6)))
        ids = [read_reply(sock).id for _ in range(5)]
    assert ids == [1, 2, 3, 4, 5]


def test_requests_beyond_the_inflight_limit_are_overloaded(make_server) -> None:
    backend = GatedBackend()
    server = make_server(backend, max_inflight=1)
    results: list[Any] = []
    blocked = list_in_thread(server, results)
    try:
        assert backend.entered.wait(5)
        with server.client() as c, pytest.raises(OverloadedError) as info:
            c.diagnostics("p1")
        assert info.value.details == {"reason": "too_many_requests", "max_inflight": 1}
        with server.client() as c:
            assert c.ping()["pong"] is True  # ping is never shed
    finally:
        backend.gate.set()
        blocked.join(5)
    assert results == [[]]


def test_connections_beyond_the_limit_are_refused_with_overloaded(make_server) -> None:
    server = make_server(max_connections=1)
    with server.client() as first:
        first.ping()
        with pytest.raises(OverloadedError) as info, server.client() as second:
            second.ping()
        assert info.value.details == {"reason": "too_many_connections", "max_connections": 1}
        assert first.ping()["pong"] is True


def test_an_unexpected_backend_exception_becomes_internal_error(make_server) -> None:
    server = make_server()
    with server.client() as c:
        c.start_project(server.config.home, project_id="p1")
        with pytest.raises(RequestError) as info:
            c.run_tool("p1", {"name": "fake.crash"})
        assert info.value.code == "internal_error"
        assert info.value.message == (
            "internal error while serving run_tool: RuntimeError: the fake tool crashed"
        )
        assert c.ping()["pong"] is True


def test_a_reply_over_the_frame_limit_is_replaced_by_an_error(make_server) -> None:
    server = make_server(max_frame_bytes=2048)
    with server.client() as c:
        c.start_project(server.config.home, project_id="p1")
        with pytest.raises(BadRequestError) as info:
            c.run_tool("p1", {"name": "fake.big", "args": {"size": 4096}})
    assert info.value.details["reason"] == "reply_too_large"
    assert info.value.details["max"] == 2048


def test_status_merges_the_gateway_and_the_backend(make_server) -> None:
    server = make_server()
    with server.client() as c:
        status = c.status()
    assert status["pid"] == os.getpid()
    assert status["home"] == server.config.home
    assert status["projects"] == 0
    assert status["backend"] == "fake"
    assert status["uptime_s"] >= 0


def test_the_shutdown_op_answers_then_asks_the_daemon_to_stop(make_server) -> None:
    server = make_server()
    with server.client() as c:
        assert c.shutdown() == {"stopping": True, "pid": os.getpid()}
    assert server.shutdowns.wait(5)


def test_stop_removes_the_socket_and_disconnects_idle_clients(make_server) -> None:
    server = make_server()
    sock = server.raw()
    with sock:
        sock.sendall(encode_request(1, "ping", {}))
        read_reply(sock)
        server.gateway.stop(timeout_s=5)
        assert read_frame(sock, 1024) is None
    assert not os.path.exists(server.config.socket_path)
    assert server.gateway.statistics().connections == 0


def test_stop_is_bounded_when_a_request_is_stuck_in_the_backend(make_server) -> None:
    backend = GatedBackend()
    server = make_server(backend)
    results: list[Any] = []
    stuck = list_in_thread(server, results)
    assert backend.entered.wait(5)
    server.gateway.stop(timeout_s=0.2)
    assert not os.path.exists(server.config.socket_path)
    assert not backend.left.is_set()  # stop returned while the request was still stuck
    backend.gate.set()
    stuck.join(5)
    assert results == ["daemon_unreachable"]


def test_a_stream_sends_events_and_ends_when_the_client_leaves(make_server) -> None:
    server = make_server()
    with server.client() as c:
        c.start_project(server.config.home, project_id="p1")
        c.start_conversation("p1", "c1")
        stream = c.subscribe("p1")
        assert [next(stream)["type"], next(stream)["type"]] == [
            "project.started",
            "conversation.started",
        ]
        stream.close()
        wait_for(lambda: server.gateway.statistics().connections == 1, what="stream closed")
        assert c.ping()["pong"] is True


def test_a_stream_ends_with_an_end_frame_when_the_backend_is_done(make_server) -> None:
    server = make_server()
    with server.client() as c:
        c.start_project(server.config.home, project_id="p2")
    with server.raw() as sock:
        sock.sendall(encode_request(4, "subscribe", {"project_id": "p2", "after_seq": 0}))
        assert read_reply(sock).kind == "event"
        with server.client() as c:
            c.stop_project("p2")
        kinds = [read_reply(sock).kind, read_reply(sock).kind]
        assert read_frame(sock, 1024) is None
    assert kinds == ["event", "end"]


def test_a_subscribe_with_bad_arguments_gets_an_error_frame(make_server) -> None:
    server = make_server()
    with server.raw() as sock:
        sock.sendall(encode_request(5, "subscribe", {"after_seq": 0}))
        reply = read_reply(sock)
    assert (reply.id, reply.value["details"]["reason"]) == (5, "invalid_args")


def test_a_frame_written_whole_in_one_write_with_another_is_read_separately(make_server) -> None:
    server = make_server()
    with server.raw() as sock:
        sock.sendall(encode_frame({"id": 1, "op": "ping"}) + encode_frame({"id": 2, "op": "ping"}))
        assert [read_reply(sock).id, read_reply(sock).id] == [1, 2]


class EagerBackend(FakeBackend):
    """A fake whose ``subscribe`` raises at call time (not a generator)."""

    def subscribe(self, args: dict[str, Any], stop: threading.Event) -> Iterator[dict[str, Any]]:
        raise ProjectNotFoundError("no project 'x'", project_id="x")


def test_a_subscribe_that_fails_before_iterating_gets_an_error_frame(make_server) -> None:
    server = make_server(EagerBackend())
    with server.raw() as sock:
        sock.sendall(encode_request(6, "subscribe", {"project_id": "x"}))
        reply = read_reply(sock)
    assert (reply.id, reply.value["code"], reply.value["details"]) == (
        6,
        "project_not_found",
        {"project_id": "x"},
    )


def test_a_peer_that_cannot_be_examined_is_refused_and_accepting_goes_on(
    make_server, monkeypatch: pytest.MonkeyPatch
) -> None:
    from runtime.daemon import admission

    real = admission.examine_peer
    calls: list[int] = []

    def flaky(sock: socket.socket, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("/proc said something odd")
        return real(sock, **kwargs)

    monkeypatch.setattr(admission, "examine_peer", flaky)
    server = make_server()
    with server.raw() as sock:
        reply = read_reply(sock)
        assert read_frame(sock, 1024) is None
    assert reply.value["details"] == {
        "reason": "peer_not_allowed",
        "check": "unverifiable",
        "uid": -1,
    }
    assert reply.value["message"] == (
        "this process may not use the daemon: its /proc entries cannot be read to check who it is"
    )
    assert_serves(server)
