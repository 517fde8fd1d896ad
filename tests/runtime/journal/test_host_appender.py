"""A host's appender pipelines its sends; the link's server waits for more appends when more
are coming (its commit window); both keep the retry and idempotency rules."""

from __future__ import annotations

import os
import resource
import socket
import struct
import threading
from pathlib import Path
from typing import Any

import msgspec
import pytest

from actors.host_appender import Appender
from actors.messages import Appended, AppendFailed
from events import catalog as ev
from events.envelope import NewEvent, new_event
from runtime.journal.commit_window import CommitWindow
from runtime.journal.link import LinkAppend, LinkCommitted, LinkHello, LinkServer
from runtime.journal.link_client import LinkClient
from runtime.journal.store import Batch, Journal

TOKEN = "0123456789abcdef0123456789abcdef"


def _events(conversation: str, content: str = "hello") -> list[NewEvent]:
    return [
        new_event(
            ev.UserMessage(content=content),
            project_id="p1",
            at="2026-11-22T10:00:00.000Z",
            conversation_id=conversation,
            correlation_id="corr-00000000000000000001",
        )
    ]


class _FakeJournal:
    """A listening socket the test answers by hand (no peer check, no commit)."""

    def __init__(self, path: Path) -> None:
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(str(path))
        self.listener.listen(4)
        self.listener.settimeout(10)
        self.conns: list[socket.socket] = []

    def close(self) -> None:
        for conn in [*self.conns, self.listener]:
            conn.close()

    def accept(self) -> socket.socket:
        conn, _ = self.listener.accept()
        self.conns.append(conn)
        conn.settimeout(10)
        assert isinstance(self.read(conn), LinkHello)
        return conn

    def read(self, conn: socket.socket) -> Any:
        size = struct.unpack("!I", _exact(conn, 4))[0]
        return msgspec.msgpack.decode(_exact(conn, size), type=LinkHello | LinkAppend)

    def answer(self, conn: socket.socket) -> None:
        body = msgspec.msgpack.encode(LinkCommitted(envelopes=[]))
        conn.sendall(struct.pack("!I", len(body)) + body)


def _exact(conn: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        assert chunk, "the appender closed the connection"
        data += chunk
    return data


class _Answers:
    def __init__(self) -> None:
        self.got: list[tuple[str, list[Any]]] = []
        self.changed = threading.Condition()

    def to(self, name: str) -> Any:
        def done(answers: list[Any]) -> None:
            with self.changed:
                self.got.append((name, answers))
                self.changed.notify_all()

        return done

    def wait(self, count: int) -> list[tuple[str, list[Any]]]:
        with self.changed:
            assert self.changed.wait_for(lambda: len(self.got) >= count, timeout=30), self.got
            return list(self.got)


def test_the_appender_sends_a_second_batch_before_the_first_is_answered(tmp_path: Path) -> None:
    journal = _FakeJournal(tmp_path / "j.sock")
    appender = Appender(str(tmp_path / "j.sock"), TOKEN)
    answers = _Answers()
    try:
        appender.submit([(_events("c1"), "k1")], answers.to("first"))
        conn = journal.accept()
        assert journal.read(conn).key == "k1"
        appender.submit([(_events("c2"), "k2"), (_events("c2"), "k3")], answers.to("second"))
        assert [journal.read(conn).key for _ in range(2)] == ["k2", "k3"]  # none answered yet
        assert answers.got == []
        for _ in range(3):
            journal.answer(conn)
        got = answers.wait(2)
    finally:
        appender.close()
        journal.close()
    assert [(name, [type(a) for a in a_]) for name, a_ in got] == [
        ("first", [Appended]),
        ("second", [Appended, Appended]),
    ]
    assert appender.passes == 2 and appender.most_passes == 2


def test_unanswered_batches_of_several_sends_are_sent_again_on_a_new_connection(
    tmp_path: Path,
) -> None:
    journal = _FakeJournal(tmp_path / "j.sock")
    appender = Appender(str(tmp_path / "j.sock"), TOKEN)
    answers = _Answers()
    try:
        appender.submit([(_events("c1"), "k1")], answers.to("first"))
        first = journal.accept()
        assert journal.read(first).key == "k1"
        appender.submit([(_events("c2"), "k2")], answers.to("second"))
        assert journal.read(first).key == "k2"
        journal.answer(first)  # k1 answered; k2 not: the journal dies
        assert answers.wait(1)[0][0] == "first"
        first.close()
        again = journal.accept()
        assert journal.read(again).key == "k2"  # the same key, on the new connection
        journal.answer(again)
        got = answers.wait(2)
    finally:
        appender.close()
        journal.close()
    assert [(name, [type(a) for a in a_]) for name, a_ in got] == [
        ("first", [Appended]),
        ("second", [Appended]),
    ]


def test_batches_unanswered_within_retry_s_fail_with_a_journal_error(tmp_path: Path) -> None:
    journal = _FakeJournal(tmp_path / "j.sock")
    appender = Appender(str(tmp_path / "j.sock"), TOKEN, retry_s=0.5)
    answers = _Answers()
    try:
        appender.submit([(_events("c1"), "k1"), (_events("c1"), "k2")], answers.to("late"))
        conn = journal.accept()
        assert [journal.read(conn).key for _ in range(2)] == ["k1", "k2"]
        got = answers.wait(1)  # never answered
    finally:
        appender.close()
        journal.close()
    [(_, late)] = got
    assert [type(a) for a in late] == [AppendFailed, AppendFailed]
    assert all(a.error["code"] == "journal_error" for a in late)


def test_the_appender_sends_at_most_max_passes_unanswered(tmp_path: Path) -> None:
    journal = _FakeJournal(tmp_path / "j.sock")
    appender = Appender(str(tmp_path / "j.sock"), TOKEN, max_passes=1)
    answers = _Answers()
    try:
        appender.submit([(_events("c1"), "k1")], answers.to("first"))
        conn = journal.accept()
        assert journal.read(conn).key == "k1"
        appender.submit([(_events("c2"), "k2")], answers.to("second"))
        conn.settimeout(0.3)
        try:
            early = journal.read(conn)
        except TimeoutError:
            early = None
        assert early is None  # held until the first send is answered
        conn.settimeout(10)
        journal.answer(conn)
        assert journal.read(conn).key == "k2"
        journal.answer(conn)
        answers.wait(2)
    finally:
        appender.close()
        journal.close()
    assert appender.most_passes == 1


class _Store:
    def __init__(self, home: Path) -> None:
        self.journal = Journal.open(str(home), "sqlite")
        self.groups: list[list[str]] = []

    def commit(self, requests: list[LinkAppend]) -> list[Any]:
        self.groups.append([r.key for r in requests])
        results = self.journal.append_batches([Batch(events=r.events, key=r.key) for r in requests])
        return [LinkCommitted(envelopes=envelopes) for envelopes in results]


def test_the_link_waits_for_more_appends_when_enough_conversations_are_active(
    tmp_path: Path,
) -> None:
    store = _Store(tmp_path)
    window = CommitWindow(target=3, max_wait_s=60.0, gap_s=60.0, active_s=600.0)
    server = LinkServer(str(tmp_path / "j.sock"), TOKEN, store.commit, window=window)
    server.start()
    clients = [LinkClient(str(tmp_path / "j.sock"), TOKEN, retry_s=60) for _ in range(3)]
    try:
        for i, client in enumerate(clients):  # three conversations become active, one by one
            assert isinstance(client.append(_events(f"c{i}"), f"warm-{i}"), LinkCommitted)
        assert window.waits == 0
        answers: list[Any] = []
        threads = [
            threading.Thread(
                target=lambda i=i: answers.append(clients[i].append(_events(f"c{i}"), f"k{i}"))
            )
            for i in range(3)
        ]
        for thread in threads:  # one after the other: the first does not commit alone
            thread.start()
            thread.join(0.2)
        for thread in threads:
            thread.join()
    finally:
        for client in clients:
            client.close()
        server.close()
        store.journal.close()
    assert [type(a) for a in answers] == [LinkCommitted] * 3
    assert store.groups[:3] == [["warm-0"], ["warm-1"], ["warm-2"]]
    assert sorted(store.groups[3]) == ["k0", "k1", "k2"] and len(store.groups) == 4
    assert window.waits == 1


def test_a_lone_conversation_is_committed_without_waiting(tmp_path: Path) -> None:
    store = _Store(tmp_path)
    window = CommitWindow(target=2, max_wait_s=600.0, gap_s=600.0)
    server = LinkServer(str(tmp_path / "j.sock"), TOKEN, store.commit, window=window)
    server.start()
    client = LinkClient(str(tmp_path / "j.sock"), TOKEN, retry_s=60)
    try:
        for i in range(3):
            assert isinstance(client.append(_events("c1"), f"k{i}"), LinkCommitted)
    finally:
        client.close()
        server.close()
        store.journal.close()
    assert store.groups == [["k0"], ["k1"], ["k2"]] and window.waits == 0


def test_large_pipelined_batches_are_answered_while_the_appender_still_sends(
    tmp_path: Path,
) -> None:
    # The Journal answers the first batch while the second still arrives; an appender that
    # read nothing until it had sent all would leave the Journal blocked on an answer
    # nobody reads, and the Journal would stop reading the rest: both ends waiting, the
    # link cut after the Journal's send timeout, the same again on every resend.
    store = _Store(tmp_path)
    server = LinkServer(str(tmp_path / "j.sock"), TOKEN, store.commit)
    server.start()
    appender = Appender(str(tmp_path / "j.sock"), TOKEN, retry_s=120)
    answers = _Answers()
    try:
        batches = [(_events(f"c{i}", "x" * 700_000), f"big-{i}") for i in range(3)]
        appender.submit(batches, answers.to("big"))
        [(_, got)] = answers.wait(1)
    finally:
        appender.close()
        server.close()
        store.journal.close()
    assert [type(a) for a in got] == [Appended] * 3
    assert appender.client.reconnects == 0


def test_a_batch_msgpack_cannot_hold_is_refused_alone(tmp_path: Path) -> None:
    journal = _FakeJournal(tmp_path / "j.sock")
    appender = Appender(str(tmp_path / "j.sock"), TOKEN)
    answers = _Answers()
    [event] = _events("c2")
    bad = [msgspec.structs.replace(event, data={**event.data, "n": 2**70})]
    try:
        appender.submit([(_events("c1"), "k1")], answers.to("first"))
        conn = journal.accept()
        assert journal.read(conn).key == "k1"  # on the wire, not answered yet
        appender.submit(
            [(_events("c2"), "k2"), (bad, "k3"), (_events("c2"), "k4")], answers.to("mixed")
        )
        assert [journal.read(conn).key for _ in range(2)] == ["k2", "k4"]
        for _ in range(3):
            journal.answer(conn)
        got = dict(answers.wait(2))
    finally:
        appender.close()
        journal.close()
    assert [type(a) for a in got["first"]] == [Appended]
    assert [type(a) for a in got["mixed"]] == [Appended, AppendFailed, Appended]
    assert got["mixed"][1].error["code"] == "bad_request"
    assert got["mixed"][1].error["details"]["reason"] == "unstorable_event"


def test_the_appender_works_with_a_link_descriptor_past_1024(tmp_path: Path) -> None:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 1400:
        pytest.skip(f"needs 1,400 descriptors, the limit is {soft}")
    fillers: list[int] = []
    while not fillers or fillers[-1] < 1100:
        fillers.append(os.open(os.devnull, os.O_RDONLY))
    journal = _FakeJournal(tmp_path / "j.sock")
    appender = Appender(str(tmp_path / "j.sock"), TOKEN)
    answers = _Answers()
    try:
        appender.submit([(_events("c1"), "k1")], answers.to("first"))
        conn = journal.accept()
        assert journal.read(conn).key == "k1"
        assert appender.client.sock is not None and appender.client.sock.fileno() > 1024
        journal.answer(conn)
        [(_, got)] = answers.wait(1)
    finally:
        appender.close()
        journal.close()
        for fd in fillers:
            os.close(fd)
    assert [type(a) for a in got] == [Appended]


def test_a_batch_submitted_as_redacted_reaches_the_journal_marked(tmp_path: Path) -> None:
    """A staged turn's batch says its events were redacted; another batch does not."""
    journal = _FakeJournal(tmp_path / "j.sock")
    appender = Appender(str(tmp_path / "j.sock"), TOKEN)
    answers = _Answers()
    try:
        appender.submit([(_events("c1"), "k1", True), (_events("c1"), "k2")], answers.to("both"))
        conn = journal.accept()
        frames = [journal.read(conn) for _ in range(2)]
        for _ in range(2):
            journal.answer(conn)
        answers.wait(1)
    finally:
        appender.close()
        journal.close()
    assert [(f.key, f.redacted) for f in frames] == [("k1", True), ("k2", False)]
