"""The host link: the daemon's requests straight to a project's host, and their answers."""

from __future__ import annotations

import os
import socket
import struct
import threading
from pathlib import Path
from typing import Any

import msgspec

from actors.host_link_server import HostLinkServer, is_link_address
from actors.messages import Reply, Request
from runtime.daemon.host_link_client import HostLinks
from runtime.journal.link import LinkHello
from runtime.wire.host_link import HostRequest, host_socket_path
from tests.runtime.calls import call_of
from tests.runtime.daemon_helpers import wait_for

TOKEN = "0123456789abcdef0123456789abcdef"


def serve(home: Path, answer: Any) -> HostLinkServer:
    """A host link for project p1 whose host answers each request with ``answer(request)``."""
    holder: list[HostLinkServer] = []

    def deliver(request: Request) -> None:  # the host's loop would run it; a thread here
        threading.Thread(target=lambda: holder[0].reply(request.reply_to, answer(request))).start()

    server = HostLinkServer(
        host_socket_path(str(home), "p1"), TOKEN, deliver, tree_roots={os.getpid()}
    )
    holder.append(server)
    server.start()
    return server


def test_a_request_is_answered_over_the_hosts_socket(tmp_path: Path) -> None:
    seen: list[Request] = []

    def answer(request: Request) -> Reply:
        seen.append(request)
        return Reply(ok=True, result=request.call.op)

    server = serve(tmp_path, answer)
    links = HostLinks(str(tmp_path), TOKEN)
    try:
        for i in range(3):  # the second and third reuse the pooled connection
            call = call_of("project_events", limit=i + 1)
            reply = links.ask("p1", call, _later())
            assert reply is not None and (reply.ok, reply.result) == (True, "project_events")
            assert seen[-1].call == call  # its arguments are the op's Struct again
        assert links.idle_count() == 1 and links.sent == 3
        assert all(is_link_address(r.reply_to) for r in seen)
        assert server.served == 3
    finally:
        links.close()
        server.close()
    assert not os.path.exists(host_socket_path(str(tmp_path), "p1"))


def test_an_error_keeps_its_wire_shape(tmp_path: Path) -> None:
    error = {"code": "conversation_not_found", "message": "no c9", "details": {"x": 1}}
    server = serve(tmp_path, lambda _request: Reply(ok=False, error=error))
    links = HostLinks(str(tmp_path), TOKEN)
    try:
        reply = links.ask("p1", call_of("describe_project"), _later())
        assert reply is not None and (reply.ok, reply.error) == (False, error)
    finally:
        links.close()
        server.close()


def test_an_answer_that_does_not_decode_is_an_error_not_a_second_run(tmp_path: Path) -> None:
    # an error without ``message``/``details`` is no WireError: the host ran the request,
    # so the daemon must not send it down the actor tree again (no fallback)
    malformed: Any = {"code": "x"}
    server = serve(tmp_path, lambda _request: Reply(ok=False, error=malformed))
    links = HostLinks(str(tmp_path), TOKEN)
    try:
        reply = links.ask("p1", call_of("describe_project"), _later())
        assert reply is not None and not reply.ok and reply.error is not None
        assert reply.error["code"] == "internal_error"
        assert reply.error["details"] == {"op": "describe_project"}
        assert links.fallbacks == 0
    finally:
        links.close()
        server.close()


def test_no_host_socket_or_a_host_that_dies_means_ask_the_actor_tree(tmp_path: Path) -> None:
    links = HostLinks(str(tmp_path), TOKEN)
    assert links.ask("p1", call_of("describe_project"), _later()) is None
    never = threading.Event()
    server = serve(tmp_path, lambda _request: never.wait(30) and Reply(ok=True))
    result: list[Any] = []
    thread = threading.Thread(
        target=lambda: result.append(links.ask("p1", call_of("describe_project"), _later()))
    )
    thread.start()
    wait_for(lambda: server.served == 1, what="the request to reach the host")
    server.close()  # the host dies before it answers
    thread.join(30)
    never.set()
    assert result == [None] and links.fallbacks == 2


def test_an_answer_to_an_earlier_request_on_the_connection_is_skipped(tmp_path: Path) -> None:
    answers: list[Any] = []

    def answer(request: Request) -> Reply:
        answers.append(request.reply_to)
        return Reply(ok=True, result=request.call.args.limit)

    server = serve(tmp_path, answer)
    links = HostLinks(str(tmp_path), TOKEN)
    try:
        assert links.ask("p1", call_of("project_events", limit=1), _later()).result == 1  # type: ignore[union-attr]
        server.reply(answers[0], Reply(ok=True, result="late duplicate"))  # the first, again
        assert links.ask("p1", call_of("project_events", limit=2), _later()).result == 2  # type: ignore[union-attr]
    finally:
        links.close()
        server.close()


def test_a_wrong_token_is_cut_before_any_request_reaches_the_host(tmp_path: Path) -> None:
    server = serve(tmp_path, lambda _request: Reply(ok=True))
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(host_socket_path(str(tmp_path), "p1"))
    sock.settimeout(10)
    try:
        frames = b""
        for message in (
            LinkHello(token="f" * 32),
            HostRequest(id=1, call=call_of("describe_project")),
        ):
            body = msgspec.msgpack.encode(message)
            frames += struct.pack("!I", len(body)) + body
        try:  # both at once: the server may close while a second write is still on its way
            sock.sendall(frames)
            answer = sock.recv(100)
        except (BrokenPipeError, ConnectionResetError):
            answer = b""
        assert answer == b""  # closed, unanswered
        wait_for(lambda: server.cut == 1, what="the connection to be cut")
        assert server.served == 0
    finally:
        sock.close()
        server.close()


def _later() -> float:
    import time

    return time.monotonic() + 30
