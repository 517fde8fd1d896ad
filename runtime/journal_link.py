"""A direct channel from conversations to the Journal, beside Thespian's actor tree.

Thespian's queue transport only connects a process to its parent and children, so an
append from a conversation travelled Conversation → Project → Supervisor → Journal and
its answer back the same way: six actor messages, each unpickled and pickled again by
every relay. Appends are most of a turn's messages, so the Journal also serves them on a
Unix socket: one request and one answer per append, msgpack-encoded, whatever the
distance in the tree.

- The socket lives in ``ROOST_HOME`` (``journal.sock``, mode 0600, directory 0700); the
  server accepts only its own user (``SO_PEERCRED``) and a connection must first present
  the daemon's link token: 32 random hex digits made at daemon start, kept in memory
  and inherited by the forked actor processes, never written anywhere. A tool process,
  though it runs as the same user, has neither (it is exec'd with a filtered
  environment), so it cannot append to the journal this way.
- The server is a thread in the Journal's process. Each pass of its loop reads every
  request that has arrived and commits them together (group commit: one transaction, one
  fsync), then answers each connection.
- The client is synchronous: a conversation waits for its append to commit before it
  acts on the events anyway. When the Journal dies, the client reconnects and sends the
  same batch with the same idempotency key to its replacement, until ``retry_s``: a batch
  the dead Journal had committed is answered from the journal, never appended twice.

Actors whose parent restarts the Journal (the Supervisor) keep using actor messages: they
must not block while the Journal is down.
"""

from __future__ import annotations

import contextlib
import hmac
import os
import resource
import selectors
import socket
import struct
import threading
import time
from collections.abc import Callable
from typing import Any

import msgspec

from events.envelope import Envelope, NewEvent
from runtime.transport import bind_unix_socket, connect_unix_socket, peer_credentials

__all__ = [
    "LINK_SOCKET_NAME",
    "LinkAppend",
    "LinkClient",
    "LinkCommitted",
    "LinkFailed",
    "LinkHello",
    "LinkServer",
    "configure",
    "link_settings",
]

LINK_SOCKET_NAME = "journal.sock"
"""The link's socket, in ``ROOST_HOME``."""

MAX_FRAME = 64 * 1024 * 1024
_LENGTH = struct.Struct("!I")
_settings: dict[str, str | None] = {"path": None, "token": None}


class LinkHello(msgspec.Struct, frozen=True, kw_only=True, tag="hello"):
    """The first frame of a connection: the daemon's link token."""

    token: str


class LinkAppend(msgspec.Struct, frozen=True, kw_only=True, tag="append"):
    """Commit one batch (``key``: its idempotency key)."""

    key: str
    events: list[NewEvent]


class LinkCommitted(msgspec.Struct, frozen=True, kw_only=True, tag="committed"):
    """The batch is committed: its envelopes, with their global positions."""

    envelopes: list[Envelope]


class LinkFailed(msgspec.Struct, frozen=True, kw_only=True, tag="failed"):
    """The batch was not committed: a wire error ``{code, message, details}``."""

    error: dict[str, Any]


_ENCODER = msgspec.msgpack.Encoder()
_REQUESTS = msgspec.msgpack.Decoder(LinkHello | LinkAppend)
_ANSWERS = msgspec.msgpack.Decoder(LinkCommitted | LinkFailed)

Commit = Callable[[list[LinkAppend]], list[LinkCommitted | LinkFailed]]


def configure(path: str | None, token: str | None) -> None:
    """Set (or clear, with None) the link every actor process forked from here uses."""
    _settings["path"], _settings["token"] = path, token


def link_settings() -> tuple[str, str] | None:
    """``(socket path, token)`` when the link is configured in this process, else None."""
    path, token = _settings["path"], _settings["token"]
    return (path, token) if path and token else None


def _frame(message: Any) -> bytes:
    body = _ENCODER.encode(message)
    return _LENGTH.pack(len(body)) + body


def _journal_error(message: str) -> LinkFailed:
    return LinkFailed(error={"code": "journal_error", "message": message, "details": {}})


class _Connection:
    __slots__ = ("authed", "buffer", "sock")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = bytearray()
        self.authed = False


def _raise_descriptor_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 16)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))


class LinkServer:
    """Serves appends on the link socket from a thread; ``commit`` does the writing."""

    def __init__(self, path: str, token: str, commit: Commit) -> None:
        self.path = path
        self.token = token
        self.commit = commit
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._stop = False
        self._listener: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self.errors = 0
        """Passes of the serving loop that failed unexpectedly (and were survived)."""

    def start(self) -> None:
        """Bind the socket (replacing one a dead Journal left) and start serving.

        Every live conversation holds a connection, so the process's descriptor limit is
        raised to its hard limit first (the usual soft limit, 1024, is a few hundred
        conversations).
        """
        _raise_descriptor_limit()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        listener = bind_unix_socket(self.path)
        listener.setblocking(False)
        self._listener = listener
        self._selector.register(listener, selectors.EVENT_READ, None)
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._thread = threading.Thread(target=self._serve, name="journal-link", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop serving; remove the socket file."""
        self._stop = True
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")
        if self._thread is not None:
            self._thread.join(timeout=5.0)
        for key in list(self._selector.get_map().values()):
            with contextlib.suppress(OSError):
                key.fileobj.close()  # type: ignore[union-attr]
        self._selector.close()
        self._wake_w.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)

    def _serve(self) -> None:
        while not self._stop:
            try:
                self._serve_once()
            except Exception:  # one bad pass must not stop every conversation's appends
                self.errors += 1
                time.sleep(0.01)

    def _serve_once(self) -> None:
        pending: list[tuple[_Connection, LinkAppend]] = []
        for key, _ in self._selector.select(timeout=1.0):
            if key.fileobj is self._listener:
                pending.extend(self._accept())
            elif key.fileobj is self._wake_r:
                with contextlib.suppress(OSError):
                    self._wake_r.recv(64)
            else:
                pending.extend(self._read(key.data))
        if pending:
            self._answer(pending)

    def _accept(self) -> list[tuple[_Connection, LinkAppend]]:
        """Accept every waiting connection; read what each has sent already."""
        assert self._listener is not None
        requests: list[tuple[_Connection, LinkAppend]] = []
        while True:
            try:
                sock, _ = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return requests
            except OSError:  # out of descriptors: leave the rest in the backlog a moment
                time.sleep(0.05)
                return requests
            try:
                allowed = peer_credentials(sock).uid == os.getuid()
            except BaseException:
                sock.close()
                raise
            if not allowed:
                sock.close()
                continue
            sock.setblocking(False)
            conn = _Connection(sock)
            self._selector.register(sock, selectors.EVENT_READ, conn)
            requests.extend(self._read(conn))

    def _drop(self, conn: _Connection) -> None:
        with contextlib.suppress(KeyError, ValueError):
            self._selector.unregister(conn.sock)
        conn.sock.close()

    def _read(self, conn: _Connection) -> list[tuple[_Connection, LinkAppend]]:
        try:
            data = conn.sock.recv(1 << 16)
        except (BlockingIOError, InterruptedError):
            return []
        except OSError:
            data = b""
        if not data:
            self._drop(conn)
            return []
        conn.buffer += data
        requests: list[tuple[_Connection, LinkAppend]] = []
        while len(conn.buffer) >= _LENGTH.size:
            (size,) = _LENGTH.unpack_from(conn.buffer)
            if size > MAX_FRAME:
                self._drop(conn)
                return []
            if len(conn.buffer) < _LENGTH.size + size:
                break
            body = bytes(conn.buffer[_LENGTH.size : _LENGTH.size + size])
            del conn.buffer[: _LENGTH.size + size]
            try:
                message = _REQUESTS.decode(body)
            except msgspec.DecodeError:
                self._drop(conn)
                return []
            if isinstance(message, LinkHello):
                conn.authed = hmac.compare_digest(message.token, self.token)
                if not conn.authed:
                    self._drop(conn)
                    return []
            elif not conn.authed:
                self._drop(conn)
                return []
            else:
                requests.append((conn, message))
        return requests

    def _answer(self, pending: list[tuple[_Connection, LinkAppend]]) -> None:
        try:
            results = self.commit([request for _, request in pending])
        except Exception as e:  # the commit function must not kill the server thread
            results = [_journal_error(f"commit failed: {e}")] * len(pending)
        for (conn, _), result in zip(pending, results, strict=True):
            try:
                conn.sock.settimeout(5.0)
                conn.sock.sendall(_frame(result))
                conn.sock.setblocking(False)
            except OSError:
                self._drop(conn)


class LinkClient:
    """One actor's connection to the Journal; ``append`` blocks until the batch commits."""

    def __init__(self, path: str, token: str, *, retry_s: float = 30.0) -> None:
        self.path = path
        self.token = token
        self.retry_s = retry_s
        self._sock: socket.socket | None = None
        self.reconnects = 0
        """Connections made after the first (the Journal restarted)."""
        self._ever_connected = False

    def append(self, events: list[NewEvent], key: str) -> LinkCommitted | LinkFailed:
        """Commit ``events`` under ``key``; across Journal restarts until ``retry_s``."""
        deadline = time.monotonic() + self.retry_s
        payload = _frame(LinkAppend(key=key, events=events))
        delay = 0.01
        while True:
            try:
                sock = self._connected(deadline)
                sock.sendall(payload)
                return self._answer(sock, deadline)
            except (OSError, msgspec.DecodeError) as e:
                self.close()
                if time.monotonic() + delay >= deadline:
                    return _journal_error(
                        f"the journal did not answer within {self.retry_s:g} s: {e}"
                    )
                time.sleep(delay)
                delay = min(delay * 2, 0.25)

    def close(self) -> None:
        """Drop the connection (the next append reconnects)."""
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.close()
            self._sock = None

    def _connected(self, deadline: float) -> socket.socket:
        if self._sock is None:
            sock = connect_unix_socket(self.path, max(0.05, deadline - time.monotonic()))
            try:
                sock.sendall(_frame(LinkHello(token=self.token)))
            except OSError:
                sock.close()
                raise
            self.reconnects += self._ever_connected
            self._ever_connected = True
            self._sock = sock
        return self._sock

    def _answer(self, sock: socket.socket, deadline: float) -> LinkCommitted | LinkFailed:
        header = self._read(sock, _LENGTH.size, deadline)
        (size,) = _LENGTH.unpack(header)
        if size > MAX_FRAME:
            raise OSError(f"journal answer too large: {size} bytes")
        answer: LinkCommitted | LinkFailed = _ANSWERS.decode(self._read(sock, size, deadline))
        return answer

    @staticmethod
    def _read(sock: socket.socket, size: int, deadline: float) -> bytes:
        chunks = bytearray()
        while len(chunks) < size:
            sock.settimeout(max(0.001, deadline - time.monotonic()))
            chunk = sock.recv(size - len(chunks))
            if not chunk:
                raise ConnectionResetError("the journal closed the link")
            chunks += chunk
        return bytes(chunks)
