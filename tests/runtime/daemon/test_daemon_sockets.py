"""``roost.sock`` of a real daemon process (fake backend) against hostile clients and peers.

Each finding of the socket review has its test here: duplicate keys, deep nesting, idle
connections that lock clients out, and peers that are the daemon's user but not the
user's own processes (another PID namespace, a Roost sandbox's descendants).
"""

from __future__ import annotations

import json
import os
import socket
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime.client import Client
from runtime.errors import OverloadedError
from runtime.wire.protocol import decode_server_frame, encode_request, read_frame
from runtime.wire.transport import connect_unix_socket
from tests.runtime.daemon_helpers import (
    daemon_env,
    process_gone,
    run_roost,
    stop_and_check,
    wait_for,
)
from tests.runtime.peer_helpers import (
    marked_parent_prefix,
    pid_namespace_prefixes,
    probe,
    sandbox_init_prefix,
)

IDLE_S = 2.0
MAX_CONNECTIONS = 8


class Daemon:
    """A daemon started with the CLI on ``home``, with a short idle timeout and a small cap."""

    def __init__(self, home: str) -> None:
        self.home = home
        self.socket = os.path.join(home, "roost.sock")
        self.log = os.path.join(home, "logs", "daemon.log")
        env = daemon_env(
            ROOST_IDLE_TIMEOUT_S=str(IDLE_S), ROOST_MAX_CONNECTIONS=str(MAX_CONNECTIONS)
        )
        done = run_roost("--json", "daemon", "start", "--home", home, env=env)
        assert done.returncode == 0, done.stderr
        self.pid: int = json.loads(done.stdout)["pid"]

    def raw(self) -> socket.socket:
        sock = connect_unix_socket(self.socket, 5)
        sock.settimeout(20)
        return sock

    def client(self) -> Client:
        return Client.connect(self.home)

    def log_lines(self, event: str) -> list[dict[str, Any]]:
        with open(self.log, encoding="utf-8") as f:
            lines = [json.loads(line) for line in f if line.startswith("{")]
        return [line for line in lines if line.get("event") == event]

    def assert_serves(self) -> None:
        with self.client() as c:
            assert c.ping() == {"pong": True, "pid": self.pid}


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[Daemon]:
    running = Daemon(str(tmp_path / "home"))
    try:
        yield running
    finally:
        stop_and_check(running.home, running.pid)


def exchange(sock: socket.socket, body: bytes) -> dict[str, Any]:
    """Send one raw frame body; return the reply frame as the daemon wrote it."""
    sock.sendall(struct.pack(">I", len(body)) + body)
    reply = read_frame(sock, 1 << 20)
    assert reply is not None
    frame: dict[str, Any] = json.loads(reply)
    return frame


def closed_by_daemon(sock: socket.socket) -> bool:
    """Whether the daemon hung up (waits up to the socket's timeout)."""
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


# --- duplicate keys and nesting (the frame body) --------------------------------------


def test_a_repeated_op_key_does_not_shut_the_daemon_down(daemon: Daemon) -> None:
    with daemon.raw() as sock:
        reply = exchange(sock, b'{"id": 1, "op": "ping", "op": "shutdown", "args": {}}')
        assert reply == {
            "id": 1,
            "ok": False,
            "error": {
                "code": "bad_request",
                "message": "key 'op' appears more than once in the object at $",
                "details": {"reason": "duplicate_key", "key": "op", "path": "$"},
            },
        }
        # The connection stays usable, and the daemon is still there.
        assert exchange(sock, encode_request(2, "ping", {})[4:])["result"]["pong"] is True
    assert not process_gone(daemon.pid)
    assert [line["reason"] for line in daemon.log_lines("bad_frame")] == ["duplicate_key"]


def test_a_repeated_key_in_nested_arguments_is_refused(daemon: Daemon, tmp_path: Path) -> None:
    body = json.dumps({"id": 3, "op": "start_project", "args": {"root": str(tmp_path)}})
    body = body[:-2] + ', "options": {"max_rounds": 1, "max_rounds": 2}}}'
    with daemon.raw() as sock:
        reply = exchange(sock, body.encode())
    assert reply["id"] == 3
    assert reply["error"]["details"] == {
        "reason": "duplicate_key",
        "key": "max_rounds",
        "path": "$.args.options",
    }
    with daemon.client() as c:
        assert c.list_projects() == []


@pytest.mark.parametrize("depth", [65, 200_000])
def test_a_deeply_nested_frame_gets_too_deeply_nested_and_no_crash(
    daemon: Daemon, depth: int
) -> None:
    inner = b"[" * (depth - 2) + b"]" * (depth - 2)
    with daemon.raw() as sock:
        reply = exchange(sock, b'{"id": 7, "op": "ping", "args": {"x": ' + inner + b"}}")
        assert reply["error"]["code"] == "bad_request"
        assert reply["error"]["details"] == {"reason": "too_deeply_nested", "max_depth": 64}
        assert reply["id"] == (7 if depth == 65 else 0)
        assert exchange(sock, encode_request(8, "ping", {})[4:])["id"] == 8
    assert daemon.log_lines("connection_failed") == []
    assert [line["reason"] for line in daemon.log_lines("bad_frame")] == ["too_deeply_nested"]


def test_an_integer_the_journal_cannot_store_is_refused_and_the_daemon_goes_on(
    daemon: Daemon, tmp_path: Path
) -> None:
    body = json.dumps({"id": 9, "op": "start_project", "args": {"root": str(tmp_path)}})
    body = body[:-2] + ', "options": {"max_rounds": 18446744073709551616}}}'
    with daemon.raw() as sock:
        reply = exchange(sock, body.encode())
        assert reply["id"] == 9
        assert reply["error"]["code"] == "bad_request"
        assert reply["error"]["details"]["reason"] == "integer_out_of_range"
        assert reply["error"]["details"]["path"] == "$.args.options.max_rounds"
        assert exchange(sock, encode_request(10, "ping", {})[4:])["id"] == 10
    assert [line["reason"] for line in daemon.log_lines("bad_frame")] == ["integer_out_of_range"]


# --- idle connections and the connection cap -----------------------------------------


def test_a_connection_that_sends_nothing_is_closed_after_the_idle_timeout(
    daemon: Daemon,
) -> None:
    with daemon.raw() as sock:
        assert closed_by_daemon(sock)
    wait_for(lambda: daemon.log_lines("connection_idle_closed") != [], 10, "the log line")
    assert daemon.log_lines("connection_idle_closed")[0]["idle_s"] == IDLE_S


def test_idle_connections_lock_clients_out_only_until_the_idle_timeout(daemon: Daemon) -> None:
    idle = [daemon.raw() for _ in range(MAX_CONNECTIONS)]
    try:
        with pytest.raises(OverloadedError) as info, daemon.client() as c:
            c.ping()
        assert info.value.details == {
            "reason": "too_many_connections",
            "max_connections": MAX_CONNECTIONS,
        }
        assert info.value.message == f"too many connections (max {MAX_CONNECTIONS}); retry later"
        assert all(closed_by_daemon(sock) for sock in idle)
    finally:
        for sock in idle:
            sock.close()
    daemon.assert_serves()


def test_a_client_reconnects_by_itself_after_its_idle_connection_was_closed(
    daemon: Daemon,
) -> None:
    with daemon.client() as c:
        assert c.ping()["pong"] is True
        with daemon.raw() as later:  # opened after the client's last reply
            assert closed_by_daemon(later)
        wait_for(lambda: len(daemon.log_lines("connection_idle_closed")) == 2, 10, "both")
        assert c.ping()["pong"] is True


def test_a_tail_stream_is_not_idle_while_it_waits_for_events(
    daemon: Daemon, tmp_path: Path
) -> None:
    with daemon.client() as c:
        c.start_project(str(tmp_path), project_id="p1")
        c.start_conversation("p1", conversation_id="c1")
        with c.subscribe("p1", "c1") as stream:
            first = next(stream)
            with daemon.raw() as later:  # outlives the idle timeout, then the stream is used
                assert closed_by_daemon(later)
            c.send_message("p1", "c1", "still there?")
            seen = [first]
            while not any(e["type"] == "user.message" for e in seen):
                seen.append(next(stream))
            assert stream.reconnects == 0
    assert daemon.log_lines("connection_idle_closed") != []


# --- peers: the daemon's user, but not the user's own processes ------------------------


def test_the_users_own_process_is_served(daemon: Daemon) -> None:
    result = probe("roost", daemon.socket)
    assert result["outcome"] == "reply"
    assert result["frame"]["result"] == {"pong": True, "pid": daemon.pid}


@pytest.mark.parametrize("via", ["unshare", "bwrap"])
def test_a_process_in_another_pid_namespace_is_refused_before_its_request_is_read(
    daemon: Daemon, via: str
) -> None:
    prefix = pid_namespace_prefixes(daemon.home).get(via)
    if prefix is None:
        pytest.skip(f"{via} cannot make a PID namespace here")
    result = probe("roost", daemon.socket, prefix)
    assert result["outcome"] == "reply", result
    frame = decode_server_frame(json.dumps(result["frame"]).encode())
    assert (frame.id, frame.kind) == (0, "error")
    assert frame.value["code"] == "bad_request"
    assert frame.value["details"] == {
        "reason": "peer_not_allowed",
        "check": "other_pid_namespace",
        "uid": os.getuid(),
    }
    assert frame.value["message"] == (
        "this process may not use the daemon: it runs in another PID namespace (a sandboxed "
        "command or a container), and the daemon serves only its own namespace"
    )
    rejected = daemon.log_lines("peer_rejected")
    assert [line["reason"] for line in rejected] == ["other_pid_namespace"]
    assert daemon.log_lines("request_served") == []  # nothing of it was served
    daemon.assert_serves()


@pytest.mark.parametrize(
    "prefix",
    [sandbox_init_prefix(), marked_parent_prefix("a-command-run")],
    ids=["sandbox_init_ancestor", "marked_ancestor"],
)
def test_a_descendant_of_a_roost_sandbox_is_refused(daemon: Daemon, prefix: list[str]) -> None:
    result = probe("roost", daemon.socket, prefix)
    assert result["outcome"] == "reply", result
    assert result["frame"]["error"]["details"] == {
        "reason": "peer_not_allowed",
        "check": "sandboxed",
        "uid": os.getuid(),
    }
    assert [line["reason"] for line in daemon.log_lines("peer_rejected")] == ["sandboxed"]
    daemon.assert_serves()
