"""The journal link: group commit, token, peer checks, retries across a journal restart."""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

from events import catalog as ev
from events.envelope import Envelope, NewEvent, new_event
from runtime.journal import Batch, Journal
from runtime.journal_link import (
    LinkAppend,
    LinkClient,
    LinkCommitted,
    LinkFailed,
    LinkServer,
    configure,
    link_settings,
)

TOKEN = "0123456789abcdef0123456789abcdef"


def _events(project: str, n: int = 2) -> list[NewEvent]:
    return [
        new_event(
            ev.UserMessage(content=f"hello {i}"),
            project_id=project,
            at="2026-11-22T10:00:00.000Z",
            conversation_id="c1",
            correlation_id="corr-00000000000000000001",
        )
        for i in range(n)
    ]


class _Store:
    """A real journal behind the server, with a record of how batches were grouped."""

    def __init__(self, home: Path) -> None:
        self.journal = Journal.open(str(home))
        self.groups: list[int] = []
        self.lock = threading.Lock()

    def commit(self, requests: list[LinkAppend]) -> list[LinkCommitted | LinkFailed]:
        with self.lock:
            self.groups.append(len(requests))
            results = self.journal.append_batches(
                [Batch(events=r.events, key=r.key) for r in requests]
            )
        return [LinkCommitted(envelopes=envelopes) for envelopes in results]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[_Store]:
    s = _Store(tmp_path)
    yield s
    s.journal.close()


def _server(path: Path, store: _Store) -> LinkServer:
    server = LinkServer(str(path), TOKEN, store.commit)
    server.start()
    return server


def test_an_append_commits_and_answers_with_envelopes(tmp_path: Path, store: _Store) -> None:
    server = _server(tmp_path / "j.sock", store)
    try:
        client = LinkClient(str(tmp_path / "j.sock"), TOKEN, retry_s=5)
        result = client.append(_events("p1"), "key-1")
        assert isinstance(result, LinkCommitted)
        assert [e.type for e in result.envelopes] == ["user.message", "user.message"]
        assert all(isinstance(e, Envelope) and e.seq > 0 for e in result.envelopes)
        assert (tmp_path / "j.sock").stat().st_mode & 0o777 == 0o600
        client.close()
    finally:
        server.close()
    assert not (tmp_path / "j.sock").exists()


def test_the_same_key_twice_is_committed_once(tmp_path: Path, store: _Store) -> None:
    server = _server(tmp_path / "j.sock", store)
    try:
        client = LinkClient(str(tmp_path / "j.sock"), TOKEN, retry_s=5)
        first = client.append(_events("p1"), "key-1")
        again = client.append(_events("p1"), "key-1")
        assert isinstance(first, LinkCommitted) and isinstance(again, LinkCommitted)
        assert [e.event_id for e in first.envelopes] == [e.event_id for e in again.envelopes]
        assert len(store.journal.read_project("p1")) == 2
        client.close()
    finally:
        server.close()


def test_concurrent_appends_are_committed_together(tmp_path: Path, store: _Store) -> None:
    server = _server(tmp_path / "j.sock", store)
    slow = threading.Event()
    original = store.commit

    def slow_commit(requests: list[LinkAppend]) -> list[LinkCommitted | LinkFailed]:
        if not slow.is_set():  # hold the first commit so the others queue up behind it
            slow.set()
            time.sleep(0.3)
        return original(requests)

    server.commit = slow_commit
    results: list[object] = []
    clients = [LinkClient(str(tmp_path / "j.sock"), TOKEN, retry_s=10) for _ in range(12)]
    try:
        threads = [
            threading.Thread(
                target=lambda i=i: results.append(clients[i].append(_events(f"p{i}"), f"key-{i}"))
            )
            for i in range(12)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        for client in clients:
            client.close()
        server.close()
    assert len(results) == 12 and all(isinstance(r, LinkCommitted) for r in results)
    assert sum(store.groups) == 12
    assert max(store.groups) > 1, store.groups  # group commit happened


def test_a_wrong_token_or_no_hello_is_cut_off(tmp_path: Path, store: _Store) -> None:
    server = _server(tmp_path / "j.sock", store)
    try:
        bad = LinkClient(str(tmp_path / "j.sock"), "f" * 32, retry_s=0.5)
        result = bad.append(_events("p1"), "key-x")
        assert isinstance(result, LinkFailed)
        assert result.error["code"] == "journal_error"
        # An append without the hello first: the server closes the connection.
        body = msgspec.msgpack.encode(LinkAppend(key="k", events=_events("p1")))
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as raw:
            raw.connect(str(tmp_path / "j.sock"))
            raw.sendall(struct.pack("!I", len(body)) + body)
            raw.settimeout(5)
            assert raw.recv(10) == b""
        assert store.journal.read_project("p1") == []
    finally:
        server.close()


def test_a_garbage_frame_closes_only_that_connection(tmp_path: Path, store: _Store) -> None:
    server = _server(tmp_path / "j.sock", store)
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as raw:
            raw.connect(str(tmp_path / "j.sock"))
            raw.sendall(struct.pack("!I", 5) + b"\xc1\xc1\xc1\xc1\xc1")
            raw.settimeout(5)
            assert raw.recv(10) == b""
        good = LinkClient(str(tmp_path / "j.sock"), TOKEN, retry_s=5)
        assert isinstance(good.append(_events("p1"), "key-1"), LinkCommitted)
        good.close()
    finally:
        server.close()


def test_the_client_waits_for_a_restarted_journal_and_resends(
    tmp_path: Path, store: _Store
) -> None:
    path = tmp_path / "j.sock"
    server = _server(path, store)
    client = LinkClient(str(path), TOKEN, retry_s=10)
    assert isinstance(client.append(_events("p1"), "key-1"), LinkCommitted)
    server.close()  # the journal died

    restarted: list[LinkServer] = []

    def restart() -> None:
        time.sleep(0.5)
        restarted.append(_server(path, store))

    thread = threading.Thread(target=restart)
    thread.start()
    try:
        result = client.append(_events("p1"), "key-2")
        assert isinstance(result, LinkCommitted)
        assert client.reconnects == 1
    finally:
        client.close()
        thread.join()
        for s in restarted:
            s.close()
    assert len(store.journal.read_project("p1")) == 4


def test_no_journal_within_the_retry_time_is_a_journal_error(tmp_path: Path) -> None:
    client = LinkClient(str(tmp_path / "nobody.sock"), TOKEN, retry_s=0.3)
    started = time.monotonic()
    result = client.append(_events("p1"), "key-1")
    assert isinstance(result, LinkFailed) and result.error["code"] == "journal_error"
    assert time.monotonic() - started < 5


def test_a_commit_that_raises_answers_every_waiter_with_an_error(
    tmp_path: Path, store: _Store
) -> None:
    def broken(requests: list[LinkAppend]) -> list[LinkCommitted | LinkFailed]:
        raise RuntimeError("disk on fire")

    server = LinkServer(str(tmp_path / "j.sock"), TOKEN, broken)
    server.start()
    try:
        client = LinkClient(str(tmp_path / "j.sock"), TOKEN, retry_s=5)
        result = client.append(_events("p1"), "key-1")
        client.close()
        assert isinstance(result, LinkFailed)
        assert "disk on fire" in result.error["message"]
    finally:
        server.close()


def test_settings_are_set_and_cleared() -> None:
    before = link_settings()
    try:
        configure("/x/journal.sock", TOKEN)
        assert link_settings() == ("/x/journal.sock", TOKEN)
        configure(None, None)
        assert link_settings() is None
    finally:
        configure(*(before or (None, None)))


def test_an_unexpected_error_in_a_pass_does_not_stop_the_server(
    tmp_path: Path, store: _Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    from runtime import journal_link

    real = journal_link.peer_credentials
    calls: list[int] = []

    def flaky(sock: socket.socket) -> object:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("boom")
        return real(sock)

    monkeypatch.setattr(journal_link, "peer_credentials", flaky)
    server = _server(tmp_path / "j.sock", store)
    try:
        first = LinkClient(str(tmp_path / "j.sock"), TOKEN, retry_s=0.5)
        first.append(_events("p1"), "key-1")  # its connection was lost in the failed pass
        first.close()
        second = LinkClient(str(tmp_path / "j.sock"), TOKEN, retry_s=5)
        assert isinstance(second.append(_events("p1"), "key-2"), LinkCommitted)
        second.close()
        assert server.errors == 1
    finally:
        server.close()
