"""The journal link: group commit, token, peer checks, retries across a journal restart."""

from __future__ import annotations

import resource
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

from events import catalog as ev
from events.envelope import Envelope, NewEvent, new_event
from runtime.journal import link as journal_link
from runtime.journal.link import (
    HELLO_MAX_BYTES,
    LinkAppend,
    LinkCommitted,
    LinkFailed,
    LinkHello,
    LinkServer,
    _raise_descriptor_limit,
    configure,
    link_settings,
)
from runtime.journal.link_client import LinkClient
from runtime.journal.store import Batch, Journal
from runtime.wire.msgpack_keys import duplicate_map_key
from tests.runtime.daemon_helpers import wait_for
from tests.runtime.peer_helpers import pid_namespace_prefixes, probe, sandbox_init_prefix

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
        self.journal = Journal.open(str(home), "sqlite")
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


def _server(path: Path, store: _Store, **limits: Any) -> LinkServer:
    server = LinkServer(str(path), TOKEN, store.commit, **limits)
    server.start()
    return server


def _raw(path: Path) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(str(path))
    sock.settimeout(10)
    return sock


def _framed(body: bytes) -> bytes:
    return struct.pack("!I", len(body)) + body


def _hello(token: str = TOKEN) -> bytes:
    return _framed(msgspec.msgpack.encode(LinkHello(token=token)))


def _answer(sock: socket.socket) -> LinkCommitted | LinkFailed:
    header = _exact(sock, 4)
    answer: LinkCommitted | LinkFailed = msgspec.msgpack.decode(
        _exact(sock, struct.unpack("!I", header)[0]), type=LinkCommitted | LinkFailed
    )
    return answer


def _exact(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        assert chunk, "the server closed the connection"
        data += chunk
    return data


def _hung_up(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def _map(*pairs: tuple[str, Any]) -> bytes:
    """A msgpack map written pair by pair (so a key can be given twice)."""
    assert len(pairs) < 16
    enc = msgspec.msgpack.encode
    return bytes([0x80 | len(pairs)]) + b"".join(enc(k) + enc(v) for k, v in pairs)


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
    from runtime.journal import link as journal_link

    real = journal_link.examine_peer
    calls: list[int] = []

    def flaky(sock: socket.socket, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("boom")
        return real(sock, **kwargs)

    monkeypatch.setattr(journal_link, "examine_peer", flaky)
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


# --- the hello comes first, small and soon --------------------------------------------


def test_a_first_frame_larger_than_a_hello_is_cut_before_its_body_is_buffered(
    tmp_path: Path, store: _Store
) -> None:
    server = _server(tmp_path / "j.sock", store)
    try:
        with _raw(tmp_path / "j.sock") as raw:
            raw.sendall(struct.pack("!I", 64 * 1024 * 1024))
            with pytest.raises((BrokenPipeError, ConnectionResetError)):
                for _ in range(64):  # 64 MiB, were it all taken
                    raw.sendall(b"\0" * (1 << 20))
        assert server.connections() == (0, 0)
        assert server.cut == 1
    finally:
        server.close()


def test_a_hello_of_exactly_the_limit_is_read_and_one_byte_more_is_not(
    tmp_path: Path, store: _Store
) -> None:
    server = _server(tmp_path / "j.sock", store)
    overhead = len(msgspec.msgpack.encode(LinkHello(token="")))
    try:
        with capture_logs() as logs:
            for size in (HELLO_MAX_BYTES, HELLO_MAX_BYTES + 1):
                # str8/str16 headers: make the whole body exactly ``size`` bytes
                token = "x" * (size - overhead - 2)
                body = msgspec.msgpack.encode(LinkHello(token=token))
                assert len(body) == size
                with _raw(tmp_path / "j.sock") as raw:
                    raw.sendall(_framed(body))
                    assert _hung_up(raw)
        cuts = [e["reason"] for e in logs if e["event"] == "link_connection_cut"]
        assert cuts == ["bad_token", "hello_too_large"]
    finally:
        server.close()


def test_a_connection_that_sends_no_hello_is_closed_after_the_hello_timeout(
    tmp_path: Path, store: _Store
) -> None:
    server = _server(tmp_path / "j.sock", store, hello_timeout_s=0.3)
    try:
        with _raw(tmp_path / "j.sock") as raw:
            raw.sendall(b"\0\0")  # half a header: bytes, but no hello
            assert _hung_up(raw)
        assert server.connections() == (0, 0)
    finally:
        server.close()


def test_connections_owing_their_hello_are_capped(tmp_path: Path, store: _Store) -> None:
    server = _server(tmp_path / "j.sock", store, max_pending=2)
    try:
        silent = [_raw(tmp_path / "j.sock") for _ in range(2)]
        with _raw(tmp_path / "j.sock") as third:
            assert _hung_up(third)
        assert server.refused == 1
        for sock in silent:
            sock.close()
        wait_for(lambda: server.connections() == (0, 0), 5, "the silent ones to be dropped")
        client = LinkClient(str(tmp_path / "j.sock"), TOKEN, retry_s=5)
        assert isinstance(client.append(_events("p1"), "key-1"), LinkCommitted)
        client.close()
    finally:
        server.close()


def test_open_connections_are_capped(tmp_path: Path, store: _Store) -> None:
    server = _server(tmp_path / "j.sock", store, max_connections=2)
    clients = [LinkClient(str(tmp_path / "j.sock"), TOKEN, retry_s=5) for _ in range(2)]
    try:
        for i, client in enumerate(clients):
            assert isinstance(client.append(_events("p1"), f"key-{i}"), LinkCommitted)
        third = LinkClient(str(tmp_path / "j.sock"), TOKEN, retry_s=0.3)
        assert third.append(_events("p1"), "key-3").error["code"] == "journal_error"  # type: ignore[union-attr]
        assert server.refused >= 1
    finally:
        for client in clients:
            client.close()
        server.close()


def test_an_idle_connection_is_closed_and_its_client_reconnects_at_once(
    tmp_path: Path, store: _Store
) -> None:
    server = _server(tmp_path / "j.sock", store, idle_timeout_s=0.3)
    try:
        client = LinkClient(str(tmp_path / "j.sock"), TOKEN, retry_s=5)
        assert isinstance(client.append(_events("p1"), "key-1"), LinkCommitted)
        wait_for(lambda: server.connections() == (0, 0), 5, "the idle connection to be closed")
        assert isinstance(client.append(_events("p1"), "key-2"), LinkCommitted)
        assert client.reconnects == 1
        client.close()
    finally:
        server.close()


def test_a_peer_outside_the_tree_roots_is_closed_at_accept(tmp_path: Path, store: _Store) -> None:
    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]) as other:
        server = _server(tmp_path / "j.sock", store, tree_roots=[other.pid])
        try:
            with _raw(tmp_path / "j.sock") as raw:  # closed at accept, before any hello
                assert _hung_up(raw)
            assert server.rejected == 1
        finally:
            server.close()
            other.kill()


def test_a_peer_in_another_pid_namespace_is_closed_at_accept(tmp_path: Path, store: _Store) -> None:
    prefixes = pid_namespace_prefixes(str(tmp_path))
    if not prefixes:
        pytest.skip("no way to make a PID namespace here")
    server = _server(tmp_path / "j.sock", store)  # the probe descends from this process
    try:
        for prefix in prefixes.values():
            assert probe("journal", str(tmp_path / "j.sock"), prefix) == {"outcome": "closed"}
        assert server.rejected == len(prefixes)
        assert probe("journal", str(tmp_path / "j.sock"), sandbox_init_prefix()) == {
            "outcome": "closed"
        }
        assert server.rejected == len(prefixes) + 1
    finally:
        server.close()


# --- frames are msgspec's own encoding: no repeated keys ------------------------------


def test_a_hello_whose_token_is_given_twice_is_cut(tmp_path: Path, store: _Store) -> None:
    server = _server(tmp_path / "j.sock", store)
    try:
        hello = _map(("type", "hello"), ("token", "f" * 32), ("token", TOKEN))
        append = msgspec.msgpack.encode(LinkAppend(key="k", events=_events("p1")))
        with _raw(tmp_path / "j.sock") as raw:
            raw.sendall(_framed(hello) + _framed(append))
            assert _hung_up(raw)
        assert store.journal.read_project("p1") == []
    finally:
        server.close()


def test_an_append_with_a_repeated_key_is_answered_with_duplicate_key(
    tmp_path: Path, store: _Store
) -> None:
    server = _server(tmp_path / "j.sock", store)
    try:
        events = msgspec.to_builtins(_events("p1", 1))
        bad = _map(("type", "append"), ("key", "k-1"), ("events", events), ("key", "k-2"))
        good = msgspec.msgpack.encode(LinkAppend(key="k-3", events=_events("p1", 1)))
        with _raw(tmp_path / "j.sock") as raw:
            raw.sendall(_hello() + _framed(bad))
            answer = _answer(raw)
            assert answer == LinkFailed(
                error={
                    "code": "bad_request",
                    "message": "map key 'key' given twice",
                    "details": {"reason": "duplicate_key", "key": "key"},
                }
            )
            raw.sendall(_framed(good))  # the connection is still served
            assert isinstance(_answer(raw), LinkCommitted)
        assert [e.seq for e in store.journal.read_project("p1")] == [1]
    finally:
        server.close()


def test_a_frame_that_is_not_msgspecs_encoding_is_answered_with_non_canonical(
    tmp_path: Path, store: _Store
) -> None:
    server = _server(tmp_path / "j.sock", store)
    try:
        body = msgspec.msgpack.encode(LinkAppend(key="k-1", events=[]))
        wide = body.replace(msgspec.msgpack.encode("k-1"), b"\xd9\x03k-1")  # str8, not fixstr
        assert wide != body
        with _raw(tmp_path / "j.sock") as raw:
            raw.sendall(_hello() + _framed(wide))
            answer = _answer(raw)
        assert isinstance(answer, LinkFailed)
        assert answer.error["details"] == {"reason": "non_canonical"}
    finally:
        server.close()


def test_a_frame_nested_too_deeply_is_answered_with_too_deeply_nested(
    tmp_path: Path, store: _Store
) -> None:
    server = _server(tmp_path / "j.sock", store)
    try:
        enc = msgspec.msgpack.encode
        deep = b"\x91" * 100_000 + b"\xc0"  # [[[...[nil]...]]]
        body = b"\x83" + enc("type") + enc("append") + enc("key") + enc("k") + enc("events") + deep
        with _raw(tmp_path / "j.sock") as raw:
            raw.sendall(_hello() + _framed(body))
            answer = _answer(raw)
        assert answer == LinkFailed(
            error={
                "code": "bad_request",
                "message": "frame nested too deeply",
                "details": {"reason": "too_deeply_nested"},
            }
        )
    finally:
        server.close()


def test_the_first_repeated_map_key_is_found_at_any_depth() -> None:
    enc = msgspec.msgpack.encode
    inner = _map(("a", 1), ("b", [1, 2]), ("a", 3))
    doc = b"\x92" + enc("x") + bytes([0x81]) + enc("k") + inner
    assert duplicate_map_key(doc) == enc("a")
    assert duplicate_map_key(enc({"a": {"a": 1}, "b": [{"a": 1}, {"a": 2}]})) is None
    assert duplicate_map_key(b"\xc1") is None  # not msgpack
    assert duplicate_map_key(b"\x82" + enc("a")) is None  # cut short


msgpack_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=False)
    | st.text(max_size=40)
    | st.binary(max_size=40),
    lambda inner: (
        st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner, max_size=5)
    ),
    max_leaves=30,
)


@pytest.mark.slow
@settings(max_examples=200)
@given(value=msgpack_values)
def test_what_msgspec_encodes_has_no_repeated_key_and_is_canonical(value: object) -> None:
    body = msgspec.msgpack.encode(value)
    assert duplicate_map_key(body) is None
    assert msgspec.msgpack.encode(msgspec.msgpack.decode(body)) == body


@pytest.mark.slow
@settings(max_examples=50, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.dictionaries(st.text(max_size=8), msgpack_values, max_size=5))
def test_any_event_data_is_accepted_on_the_link(tmp_path: Path, data: dict[str, Any]) -> None:
    event = _events("p1", 1)[0]
    request = LinkAppend(key="k", events=[msgspec.structs.replace(event, data=data)])
    body = msgspec.msgpack.encode(request)
    assert journal_link._decode(journal_link._REQUESTS, body) == request


def test_the_journal_link_raises_the_descriptor_limit_to_the_hard_one() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard <= 64:
        pytest.skip(f"the hard descriptor limit here is only {hard}")
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, hard))
        _raise_descriptor_limit()
        raised, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        assert raised == (hard if hard != resource.RLIM_INFINITY else max(64, 1 << 16))
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_pipelined_batches_share_a_commit_and_come_back_in_order(
    tmp_path: Path, store: _Store
) -> None:
    path = tmp_path / "j.sock"
    server = _server(path, store)
    client = LinkClient(str(path), TOKEN, retry_s=10)
    try:
        first = client.append(_events("p1", 1), "warm")  # the connection, hello included
        assert isinstance(first, LinkCommitted)
        store.groups.clear()
        batches = [(_events("p1", 1 + i % 2), f"key-{i}") for i in range(6)]
        answers = client.append_many(batches)
        assert [type(a) for a in answers] == [LinkCommitted] * 6
        assert [len(a.envelopes) for a in answers] == [1 + i % 2 for i in range(6)]  # type: ignore[union-attr]
        seqs = [e.seq for a in answers for e in a.envelopes]  # type: ignore[union-attr]
        assert seqs == sorted(seqs)
        assert sum(store.groups) == 6 and len(store.groups) < 6  # fewer commits than batches
        again = client.append_many(batches[:2])  # the same keys: answered, not appended
        assert [e.seq for a in again for e in a.envelopes] == seqs[:3]  # type: ignore[union-attr]
    finally:
        client.close()
        server.close()
    assert len(store.journal.read_project("p1")) == 1 + 9


def test_pipelined_batches_unanswered_when_the_journal_died_are_sent_again(
    tmp_path: Path, store: _Store
) -> None:
    path = tmp_path / "j.sock"
    server = _server(path, store)
    client = LinkClient(str(path), TOKEN, retry_s=10)
    assert isinstance(client.append(_events("p1"), "key-0"), LinkCommitted)
    server.close()
    restarted: list[LinkServer] = []

    def restart() -> None:
        time.sleep(0.5)
        restarted.append(_server(path, store))

    thread = threading.Thread(target=restart)
    thread.start()
    try:
        answers = client.append_many([(_events("p1"), "key-1"), (_events("p1"), "key-2")])
        assert [type(a) for a in answers] == [LinkCommitted, LinkCommitted]
    finally:
        client.close()
        thread.join()
        for s in restarted:
            s.close()
    assert len(store.journal.read_project("p1")) == 6


def test_the_hosts_appender_answers_every_batch_in_one_callback(
    tmp_path: Path, store: _Store
) -> None:
    from actors.host_appender import Appender
    from actors.messages import Appended

    path = tmp_path / "j.sock"
    server = _server(path, store)
    appender = Appender(str(path), TOKEN)
    done: list[list[Any]] = []
    finished = threading.Event()

    def collect(answers: list[Any]) -> None:
        done.append(answers)
        if len(done) == 3:
            finished.set()

    try:
        for i in range(3):
            appender.submit([(_events("p1", 1), f"a{i}"), (_events("p1", 2), f"b{i}")], collect)
        assert finished.wait(30)
    finally:
        appender.close()
        server.close()
    assert [[type(a) for a in answers] for answers in done] == [[Appended, Appended]] * 3
    assert appender.batches == 6
    assert len(store.journal.read_project("p1")) == 9
