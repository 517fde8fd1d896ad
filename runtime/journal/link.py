"""A direct channel from conversations to the Journal, beside Thespian's actor tree.

Thespian's queue transport only connects a process to its parent and children, so an
append from a conversation travelled Conversation → Project → Supervisor → Journal and
its answer back the same way: six actor messages, each unpickled and pickled again by
every relay. Appends are most of a turn's messages, so the Journal also serves them on a
Unix socket: one request and one answer per append, msgpack-encoded, whatever the
distance in the tree.

- The socket lives in ``ROOST_HOME`` (``journal.sock``, mode 0600, directory 0700).
  Checked in this order, before anything a connection sent is buffered:

  1. at accept, its peer (:func:`runtime.guard.sandbox.peers.examine_peer`): the server's uid, the
     server's PID namespace, no Roost sandbox among its ancestors, and an ancestry that
     reaches one of ``tree_roots`` (the actor tree's Supervisor and the daemon); a
     refused peer is closed at once (``peer_rejected`` is logged);
  2. the caps: at most ``max_connections`` open, at most ``max_pending`` still owing
     their hello; more are closed at once;
  3. the first frame must be a hello of at most :data:`HELLO_MAX_BYTES` carrying the
     daemon's link token (32 random hex digits made at daemon start, kept in memory and
     inherited by the forked actor processes, never written anywhere), and it must come
     within ``hello_timeout_s`` of the accept; anything else closes the connection;
  4. only then are larger frames read, up to :data:`MAX_FRAME`. A frame that is not
     exactly msgspec's encoding of what it decodes to is answered with ``bad_request``:
     ``duplicate_key`` (a map repeats a key: decoders disagree on which one wins),
     ``too_deeply_nested`` or ``non_canonical``. A connection silent for
     ``idle_timeout_s`` is closed (its client reconnects on its next append).

  The client sends its hello and its first append together: no extra round trip.
- The server is a thread in the Journal's process. Each pass of its loop reads every
  request that has arrived (and, given a ``window``, waits a moment for more when more are
  coming: ``runtime.journal.commit_window``), commits them together (group commit: one
  transaction, one fsync), then answers each connection, in order.
- The client (``runtime.journal.link_client``) is synchronous; a host's appender
  (``actors.host_appender``) pipelines its batches on one. When the Journal dies, a client
  reconnects and sends the same batches with their keys to its replacement, until
  ``retry_s``: a batch the dead Journal had committed is answered, never appended twice.

Actors whose parent restarts the Journal (the Supervisor) keep using actor messages: they
must not block while the Journal is down.
"""

from __future__ import annotations

import contextlib
import functools
import hmac
import os
import resource
import selectors
import socket
import threading
import time
from collections.abc import Callable, Collection
from typing import Any

import msgspec

from events.envelope import Envelope, NewEvent
from runtime.errors import WireError
from runtime.guard.sandbox.peers import PeerRefusal, Throttle, examine_peer
from runtime.journal.commit_window import CommitWindow, gather
from runtime.logging import get_logger
from runtime.wire import counters
from runtime.wire.framing import FrameTooLargeError, frame, take_frame
from runtime.wire.msgpack_keys import duplicate_map_key
from runtime.wire.transport import bind_unix_socket

__all__ = [
    "HELLO_MAX_BYTES",
    "LINK_SOCKET_NAME",
    "MAX_FRAME",
    "LinkAppend",
    "LinkCommitted",
    "LinkFailed",
    "LinkHello",
    "LinkServer",
    "Pending",
    "configure",
    "daemon_pid",
    "link_settings",
]

log = get_logger("roost.journal_link")

LINK_SOCKET_NAME = "journal.sock"
"""The link's socket, in ``ROOST_HOME``."""

HELLO_MAX_BYTES = 1024
"""Largest first frame (the hello) a connection may send."""
MAX_FRAME = 64 * 1024 * 1024
"""Largest frame after the hello."""
MAX_CONNECTIONS = 4096
"""Open connections at most (every live conversation holds one)."""
MAX_PENDING = 64
"""Connections at most that have not yet sent their hello."""
HELLO_TIMEOUT_S = 5.0
"""Time from accept to a complete hello."""
IDLE_TIMEOUT_S = 600.0
"""Time an authenticated connection may stay silent."""
_settings: dict[str, str | None] = {"path": None, "token": None, "daemon_pid": None}


class LinkHello(msgspec.Struct, frozen=True, kw_only=True, tag="hello"):
    """The first frame of a connection: the daemon's link token."""

    token: str


class LinkAppend(msgspec.Struct, frozen=True, kw_only=True, tag="append"):
    """Commit one batch (``key``: its idempotency key)."""

    key: str
    events: list[NewEvent]
    redacted: bool = False  # the sender redacted each event as the journal would (Batch)


class LinkCommitted(msgspec.Struct, frozen=True, kw_only=True, tag="committed"):
    """The batch is committed: its envelopes, with their global positions."""

    envelopes: list[Envelope]


class LinkFailed(msgspec.Struct, frozen=True, kw_only=True, tag="failed"):
    """The batch was not committed: a wire error ``{code, message, details}``."""

    error: WireError


_ENCODER = msgspec.msgpack.Encoder()
_PLAIN = msgspec.msgpack.Decoder()
_HELLO = msgspec.msgpack.Decoder(LinkHello)
_REQUESTS = msgspec.msgpack.Decoder(LinkHello | LinkAppend)
_ANSWERS = msgspec.msgpack.Decoder(LinkCommitted | LinkFailed)

Commit = Callable[[list[LinkAppend]], list[LinkCommitted | LinkFailed]]


def configure(path: str | None, token: str | None) -> None:
    """Set (or clear, with None) the link every actor process forked from here uses."""
    _settings["path"], _settings["token"] = path, token
    _settings["daemon_pid"] = str(os.getpid()) if path else None


def daemon_pid() -> int | None:
    """The pid of the process that configured the link (the daemon), when one did."""
    pid = _settings.get("daemon_pid")
    return int(pid) if pid else None


def link_settings() -> tuple[str, str] | None:
    """``(socket path, token)`` when the link is configured in this process, else None."""
    path, token = _settings["path"], _settings["token"]
    return (path, token) if path and token else None


def _frame(message: Any) -> bytes:
    return frame(_ENCODER.encode(message))


def _journal_error(message: str) -> LinkFailed:
    return LinkFailed(error={"code": "journal_error", "message": message, "details": {}})


def _bad_request(reason: str, message: str, **details: Any) -> LinkFailed:
    details = {"reason": reason, **details}
    return LinkFailed(error={"code": "bad_request", "message": message, "details": details})


def _decode(decoder: msgspec.msgpack.Decoder[Any], body: bytes) -> Any:
    """Decode ``body``; a frame that is not exactly msgspec's own encoding is refused.

    Raises :class:`_Refused` (``duplicate_key``, ``too_deeply_nested``, ``non_canonical``)
    or ``msgspec.DecodeError``.
    """
    try:
        if _ENCODER.encode(_PLAIN.decode(body)) != body:
            key = duplicate_map_key(body)
            if key is not None:
                shown = _PLAIN.decode(key)
                raise _Refused("duplicate_key", f"map key {shown!r} given twice", key=str(shown))
            raise _Refused("non_canonical", "frame is not msgspec's encoding of its content")
        return decoder.decode(body)
    except RecursionError as e:
        raise _Refused("too_deeply_nested", "frame nested too deeply") from e


class _Refused(Exception):
    """A frame refused with ``bad_request``: ``reason``, message, details."""

    def __init__(self, reason: str, message: str, **details: Any) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.details = details

    def answer(self) -> LinkFailed:
        return _bad_request(self.reason, self.message, **self.details)


class _Connection:
    __slots__ = ("accepted_at", "authed", "buffer", "last_seen", "sock")

    def __init__(self, sock: socket.socket, now: float) -> None:
        self.sock = sock
        self.buffer = bytearray()
        self.authed = False
        self.accepted_at = now
        self.last_seen = now


def _raise_descriptor_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 16)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))


Pending = tuple[_Connection, LinkAppend | LinkFailed]


def _appends(pending: list[Pending]) -> int:
    return sum(isinstance(request, LinkAppend) for _, request in pending)


class LinkServer:
    """Serves appends on the link socket from a thread; ``commit`` does the writing.

    ``tree_roots``: pids one of which every peer must descend from (default: this
    process). ``after``: called on the serving thread after each pass that answered appends
    (the Journal writes the snapshots they made due). The other keywords are the limits of
    the module docstring. A subclass may serve other requests on the same checks
    (``requests``: their decoder, with the hello; :meth:`_answer`: what it does with them):
    the host link (``actors.host_link_server``).
    """

    requests: msgspec.msgpack.Decoder[Any] = _REQUESTS
    """What an authenticated connection may send."""
    thread_name = "journal-link"

    def __init__(
        self,
        path: str,
        token: str,
        commit: Commit,
        *,
        tree_roots: Collection[int] | None = None,
        max_connections: int = MAX_CONNECTIONS,
        max_pending: int = MAX_PENDING,
        hello_timeout_s: float = HELLO_TIMEOUT_S,
        idle_timeout_s: float = IDLE_TIMEOUT_S,
        after: Callable[[], None] | None = None,
        window: CommitWindow | None = None,
    ) -> None:
        self.path = path
        self.window = window
        """When set, a commit waits a moment for more appends when more are coming."""
        self.token = token
        self.commit = commit
        self.after = after
        """Called on the serving thread after each pass that answered appends."""
        self.tree_roots = frozenset(tree_roots) if tree_roots else frozenset({os.getpid()})
        self.max_connections = max_connections
        self.max_pending = max_pending
        self.hello_timeout_s = hello_timeout_s
        self.idle_timeout_s = idle_timeout_s
        self._tick = min(1.0, hello_timeout_s / 2, idle_timeout_s / 2)
        self._next_sweep = 0.0
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._stop = False
        self._listener: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._open: set[_Connection] = set()
        self._pending = 0
        self._throttle = Throttle()
        self.errors = 0
        """Passes of the serving loop that failed unexpectedly (and were survived)."""
        self.rejected = 0
        """Connections closed at accept because of their peer."""
        self.refused = 0
        """Connections closed at accept because a cap was reached."""
        self.cut = 0
        """Connections closed for a bad hello or frame, or a timeout."""

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
        self._selector.register(listener, selectors.EVENT_READ, self._accept)
        self._selector.register(self._wake_r, selectors.EVENT_READ, self._woken)
        self._thread = threading.Thread(target=self._serve, name=self.thread_name, daemon=True)
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

    def connections(self) -> tuple[int, int]:
        """``(open, still owing their hello)`` connections now."""
        return len(self._open), self._pending

    def _serve(self) -> None:
        while not self._stop:
            try:
                self._serve_once()
            except Exception:  # one bad pass must not stop every conversation's appends
                self.errors += 1
                time.sleep(0.01)

    def _serve_once(self) -> None:
        """One pass: each ready socket's handler (its selector data), then the answers."""
        pending = self._select(self._tick)
        pending = gather(self.window, pending, _appends, self._select, time.monotonic)
        self._answer(pending)  # nothing pending: nothing to commit or answer
        now = time.monotonic()
        if now >= self._next_sweep:
            self._next_sweep = now + self._tick
            self._sweep(now)

    def _select(self, timeout: float) -> list[Pending]:
        """What the sockets ready within ``timeout`` sent (each one's handler)."""
        return [p for key, _ in self._selector.select(timeout=timeout) for p in key.data()]

    def _woken(self) -> list[Pending]:
        """Drain the wake-up socket (:meth:`close` wrote to it)."""
        with contextlib.suppress(OSError):
            self._wake_r.recv(64)
        return []

    def _sweep(self, now: float) -> None:
        """Close connections past their hello deadline or silent for too long."""
        for conn in list(self._open):
            if conn.authed:
                late = now - conn.last_seen > self.idle_timeout_s
            else:
                late = now - conn.accepted_at > self.hello_timeout_s
            if late:
                self._cut(conn, "idle_timeout" if conn.authed else "hello_timeout")

    def _accept(self) -> list[Pending]:
        """Accept every waiting connection; read what each has sent already."""
        assert self._listener is not None
        requests: list[Pending] = []
        while True:
            try:
                sock, _ = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return requests
            except OSError:  # out of descriptors: leave the rest in the backlog a moment
                time.sleep(0.05)
                return requests
            try:
                admitted = self._admit(sock)
            except BaseException:
                sock.close()
                raise
            if not admitted:
                sock.close()
                continue
            sock.setblocking(False)
            conn = _Connection(sock, time.monotonic())
            self._open.add(conn)
            self._pending += 1
            self._selector.register(sock, selectors.EVENT_READ, functools.partial(self._read, conn))
            requests.extend(self._read(conn))

    def _admit(self, sock: socket.socket) -> bool:
        """The peer checks, then the caps (the caller closes a refused socket)."""
        try:
            creds, refusal = examine_peer(sock, tree_roots=self.tree_roots)
            peer = {"peer_pid": creds.pid, "peer_uid": creds.uid}
        except OSError:
            refusal, peer = PeerRefusal.UNVERIFIABLE, {}
        if refusal is not None:
            self.rejected += 1
            self._warn("peer_rejected", reason=str(refusal), **peer)
            return False
        if len(self._open) >= self.max_connections or self._pending >= self.max_pending:
            self.refused += 1
            full = len(self._open) >= self.max_connections
            self._warn(
                "link_connection_refused",
                reason="too_many_connections" if full else "too_many_pending",
                open=len(self._open),
                pending=self._pending,
                **peer,
            )
            return False
        return True

    def _warn(self, event: str, **fields: Any) -> None:
        suppressed = self._throttle.allow()
        if suppressed is not None:
            log.warning(event, socket=LINK_SOCKET_NAME, suppressed=suppressed, **fields)

    def _drop(self, conn: _Connection) -> None:
        if conn in self._open:
            self._open.discard(conn)
            self._pending -= not conn.authed
        with contextlib.suppress(KeyError, ValueError):
            self._selector.unregister(conn.sock)
        conn.sock.close()

    def _cut(self, conn: _Connection, reason: str) -> None:
        """Close a connection for what it sent (or did not send) and say why."""
        self.cut += 1
        self._warn("link_connection_cut", reason=reason, authed=conn.authed)
        self._drop(conn)

    def _read(self, conn: _Connection) -> list[Pending]:
        try:
            data = conn.sock.recv(1 << 16)
        except (BlockingIOError, InterruptedError):
            return []
        except OSError:
            data = b""
        if not data:
            self._drop(conn)
            return []
        conn.last_seen = time.monotonic()
        conn.buffer += data
        requests: list[Pending] = []
        while True:
            try:
                body = take_frame(conn.buffer, MAX_FRAME if conn.authed else HELLO_MAX_BYTES)
            except FrameTooLargeError:
                self._cut(conn, "frame_too_large" if conn.authed else "hello_too_large")
                return []
            if body is None:
                return requests
            problem = self._take(conn, body, requests)
            if problem is not None:
                self._cut(conn, problem)
                return []

    def _take(self, conn: _Connection, body: bytes, requests: list[Pending]) -> str | None:
        """Take one frame: queue its request (or refusal), or say why ``conn`` is cut."""
        if not conn.authed:
            return self._hello(conn, body)
        try:
            message = _decode(self.requests, body)
        except _Refused as e:
            requests.append((conn, e.answer()))
            return None
        except msgspec.DecodeError:
            return "malformed_frame"
        if isinstance(message, LinkHello):  # a hello again: it must carry the token still
            return self._token(message)
        requests.append((conn, message))
        return None

    def _hello(self, conn: _Connection, body: bytes) -> str | None:
        """Authenticate ``conn`` by its first frame; why not (``None``: it is a valid hello)."""
        try:
            hello = _decode(_HELLO, body)
        except _Refused as e:
            return e.reason
        except msgspec.DecodeError:
            return "not_a_hello"
        problem = self._token(hello)
        if problem is None:
            conn.authed = True
            self._pending -= 1
        return problem

    def _token(self, hello: LinkHello) -> str | None:
        """``bad_token`` unless ``hello`` carries the daemon's link token."""
        return None if hmac.compare_digest(hello.token, self.token) else "bad_token"

    def _answer(self, pending: list[Pending]) -> None:
        appends = [r for _, r in pending if isinstance(r, LinkAppend)]
        results: list[LinkCommitted | LinkFailed] = []
        if appends:
            try:
                results = self.commit(appends)
            except Exception as e:  # the commit function must not kill the server thread
                results = [_journal_error(f"commit failed: {e}")] * len(appends)
            if len(results) != len(appends):
                results = [_journal_error("the journal answered the wrong count")] * len(appends)
            if self.window is not None:
                self.window.note((r.events for r in appends), time.monotonic())
        answers = iter(results)
        for conn, request in pending:
            result = next(answers) if isinstance(request, LinkAppend) else request
            if conn not in self._open:
                continue
            try:
                conn.sock.settimeout(5.0)
                conn.sock.sendall(_frame(result))
                counters.count("journal_link")  # every frame sent, either way (soak report)
                conn.sock.setblocking(False)
            except OSError:
                self._drop(conn)
        if appends and self.after is not None:
            self.after()
