"""The daemon's Unix-socket server: frames in, backend calls, frames out.

One thread accepts; one thread serves each connection, its requests in order. The socket
file is created owner-only (mode 0600 in a 0700 directory). Each accepted connection is
first admitted (:mod:`runtime.daemon.admission`: its peer, the connection limit); then its
own thread reads frames: the length prefix is checked against ``max_frame_bytes`` before
the body is read, the body is decoded strictly (:func:`runtime.wire.protocol.decode_request`:
nesting, duplicate keys), the arguments are validated. Requests beyond ``max_inflight`` get
``overloaded {reason: too_many_requests}``; each is answered by
:func:`runtime.daemon.replies.reply_frame`.

A connection that sends nothing for ``idle_timeout_s`` while the gateway waits for its
next request (or for the rest of a frame), or that does not take a reply for as long, is
closed. Nothing a client sends (garbage, half frames, huge length prefixes) stops the
server: the worst it gets is an error frame and a closed connection.

The ids a request would store (project, conversation and correlation ids, idempotency
keys) are checked before anything else (:mod:`runtime.guard.ids`); then the correlation id
and idempotency key a client left out are minted (:func:`runtime.wire.ops.with_ids`). This
is the only place the daemon mints them: the actors and cores below only read them, and
refuse a request without them as an internal error.

A ``subscribe`` request turns its connection into a stream (:mod:`runtime.daemon.streams`),
which is not idle however long it waits for events; only a reader that takes no frame for
``idle_timeout_s`` is cut (its client resumes from the last ``seq`` it saw).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import select
import socket
import threading
import time
from collections.abc import Callable
from typing import Any, NamedTuple

from runtime.client.replies import Pong, ShutdownAck
from runtime.daemon.admission import refuse_connection, refuse_peer
from runtime.daemon.config import Backend, DaemonConfig
from runtime.daemon.replies import reply_frame
from runtime.daemon.status import GatewayStats, daemon_status
from runtime.daemon.streams import serve_stream
from runtime.errors import BadRequestError, OverloadedError
from runtime.guard.ids import check_client_ids
from runtime.guard.sandbox.peers import Throttle
from runtime.logging import get_logger
from runtime.wire.dispatch import op_handlers
from runtime.wire.op_args import NoArgs, SubscribeArgs
from runtime.wire.ops import OP_TABLE, STREAM_OPS, Call, validate_args, with_ids
from runtime.wire.protocol import (
    DuplicateKeyError,
    FrameTooLargeError,
    IntegerOutOfRangeError,
    MalformedFrameError,
    RequestFrame,
    TooDeeplyNestedError,
    TruncatedFrameError,
    decode_request,
    encode_error,
    read_frame,
)
from runtime.wire.transport import bind_unix_socket, linger

__all__ = ["Gateway"]

log = get_logger("roost.gateway")

_REFUSAL_SEND_S = 1.0
"""Longest wait to hand a refused peer its error frame (it fits the socket buffer)."""


class _Listening(NamedTuple):
    """What a started gateway holds: its socket, the file's inode, a wake pipe, the thread.

    The pipe wakes the accepting thread when the gateway stops.
    """

    listener: socket.socket
    socket_ino: int
    wake: tuple[int, int]
    thread: threading.Thread


class Gateway:
    """Serves the daemon's socket for one backend; ``start()``, then ``stop()``."""

    def __init__(
        self,
        config: DaemonConfig,
        backend: Backend,
        *,
        on_shutdown: Callable[[], None] | None = None,
        daemon_uid: int | None = None,
    ) -> None:
        self._config = config
        self._backend = backend
        self._on_shutdown = on_shutdown
        self._uid = os.getuid() if daemon_uid is None else daemon_uid
        self._started = time.monotonic()
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._conns: dict[int, tuple[socket.socket, threading.Thread]] = {}
        self._streams: set[threading.Event] = set()
        self._ids = itertools.count(1)
        self._inflight = 0
        self._requests = 0
        self._rejected = 0
        self._overloaded = 0
        self._idle_closed = 0
        self._log_throttle = Throttle()
        self._listening: _Listening | None = None
        self._ops = op_handlers(self, "gateway", forward=self._to_backend)

    # --- lifecycle ------------------------------------------------------------------

    def start(self) -> None:
        """Bind the socket and start accepting connections."""
        listener = bind_unix_socket(self._config.socket_path)
        listener.setblocking(False)
        socket_ino = os.stat(self._config.socket_path).st_ino
        wake = os.pipe()
        thread = threading.Thread(
            target=self._accept_loop,
            args=(listener, wake[0]),
            name="roost-gateway-accept",
            daemon=True,
        )
        self._listening = _Listening(listener, socket_ino, wake, thread)
        thread.start()
        log.info("gateway_listening", socket=self._config.socket_path)

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop: close the listener, end streams, let requests finish (bounded), close all.

        Threads still busy after ``timeout_s`` are abandoned (they are daemon threads);
        their late replies are dropped.
        """
        if self._stopping.is_set():
            return
        self._stopping.set()
        deadline = time.monotonic() + timeout_s
        listening = self._listening  # None: never started
        if listening is not None:
            os.write(listening.wake[1], b"x")
            listening.thread.join(max(0.0, deadline - time.monotonic()))
            listening.listener.close()
            self._remove_socket_file(listening.socket_ino)
        with self._lock:
            conns = list(self._conns.values())
            streams = list(self._streams)
        for stream_stop in streams:
            stream_stop.set()
        for conn, _ in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RD)
        for _, thread in conns:
            thread.join(max(0.0, deadline - time.monotonic()))
        for conn, _ in conns:
            conn.close()
        if listening is not None:
            for fd in listening.wake:
                os.close(fd)
        log.info("gateway_stopped", abandoned=sum(t.is_alive() for _, t in conns))

    def _remove_socket_file(self, socket_ino: int) -> None:
        path = self._config.socket_path
        with contextlib.suppress(FileNotFoundError):
            if os.stat(path).st_ino == socket_ino:
                os.unlink(path)

    def statistics(self) -> GatewayStats:
        """Return a snapshot of the counters."""
        with self._lock:
            return GatewayStats(
                connections=len(self._conns),
                inflight=self._inflight,
                requests=self._requests,
                rejected_peers=self._rejected,
                overloaded=self._overloaded,
                idle_closed=self._idle_closed,
            )

    # --- accepting ------------------------------------------------------------------

    def _accept_loop(self, listener: socket.socket, wake: int) -> None:
        poller = select.poll()
        poller.register(listener.fileno(), select.POLLIN)
        poller.register(wake, select.POLLIN)
        while not self._stopping.is_set():
            poller.poll()
            if self._stopping.is_set():
                return
            try:
                conn, _ = listener.accept()
            except (BlockingIOError, InterruptedError):
                continue
            except OSError as e:
                log.warning("accept_failed", error=str(e))
                continue
            try:
                conn.settimeout(_REFUSAL_SEND_S)
                if self._peer_allowed(conn):
                    self._admit_connection(conn)
            except Exception:  # one connection must not stop the accepting thread
                log.exception("accept_failed_for_connection")
                conn.close()

    def _peer_allowed(self, conn: socket.socket) -> bool:
        """Examine the peer; a refused one gets its error frame and is closed."""
        return not refuse_peer(
            conn, daemon_uid=self._uid, throttle=self._log_throttle, counted=self._count_rejected
        )

    def _count_rejected(self) -> None:
        with self._lock:
            self._rejected += 1

    def _admit_connection(self, conn: socket.socket) -> None:
        with self._lock:
            full = len(self._conns) >= self._config.max_connections
            if full:
                self._overloaded += 1
        if full:
            refuse_connection(conn, self._config.max_connections)
            return
        conn_id = next(self._ids)
        thread = threading.Thread(
            target=self._serve_connection,
            args=(conn_id, conn),
            name=f"roost-gateway-conn-{conn_id}",
            daemon=True,
        )
        with self._lock:
            self._conns[conn_id] = (conn, thread)
        try:
            thread.start()
        except BaseException:  # e.g. no thread can be started now: give the slot back
            with self._lock:
                self._conns.pop(conn_id, None)
            raise

    # --- one connection -------------------------------------------------------------

    def _serve_connection(self, conn_id: int, conn: socket.socket) -> None:
        try:
            conn.settimeout(self._config.idle_timeout_s)
            self._request_loop(conn)
        except TimeoutError:
            with self._lock:
                self._idle_closed += 1
            log.info("connection_idle_closed", conn=conn_id, idle_s=self._config.idle_timeout_s)
        except OSError as e:
            log.debug("connection_error", conn=conn_id, error=str(e))
        except Exception:
            log.exception("connection_failed", conn=conn_id)
        finally:
            conn.close()
            with self._lock:
                self._conns.pop(conn_id, None)

    def _request_loop(self, conn: socket.socket) -> None:
        max_bytes = self._config.max_frame_bytes
        while not self._stopping.is_set():
            try:
                body = read_frame(conn, max_bytes)
            except FrameTooLargeError as e:
                log.warning("bad_frame", reason="frame_too_large", size=e.details["size"])
                conn.sendall(encode_error(0, e))
                linger(conn)
                return
            except TruncatedFrameError as e:
                log.warning("bad_frame", reason="truncated_frame", error=str(e))
                return
            if body is None:
                return
            try:
                request = decode_request(body)
            except (
                MalformedFrameError,
                TooDeeplyNestedError,
                DuplicateKeyError,
                IntegerOutOfRangeError,
            ) as e:
                log.warning("bad_frame", reason=e.details["reason"], problem=e.message)
                conn.sendall(encode_error(e.request_id, e))
                continue
            if request.op in STREAM_OPS:
                self._stream(conn, request)
                return
            conn.sendall(self._answer(request))
            if request.op == "shutdown" and self._on_shutdown is not None:
                self._on_shutdown()

    # --- requests -------------------------------------------------------------------

    def _answer(self, request: RequestFrame) -> bytes:
        try:
            args = validate_args(request.op, request.args)
            check_client_ids(request.op, args)
            call = with_ids(request.op, args)
        except BadRequestError as e:
            self._count_request()
            return encode_error(request.id, e)
        if not OP_TABLE[call.op].limited:
            self._count_request()
            return self._serve(request.id, call)
        if not self._enter():
            return encode_error(
                request.id,
                OverloadedError(
                    f"{self._config.max_inflight} requests already in flight; retry later",
                    reason="too_many_requests",
                    max_inflight=self._config.max_inflight,
                ),
            )
        try:
            return self._serve(request.id, call)
        finally:
            self._leave()

    def _enter(self) -> bool:
        with self._lock:
            self._requests += 1
            if self._inflight >= self._config.max_inflight:
                self._overloaded += 1
                return False
            self._inflight += 1
            return True

    def _leave(self) -> None:
        with self._lock:
            self._inflight -= 1

    def _count_request(self) -> None:
        with self._lock:
            self._requests += 1

    def _serve(self, request_id: int, call: Call[Any]) -> bytes:
        return reply_frame(request_id, call, self._ops, self._config.max_frame_bytes)

    # --- the gateway's own ops (``route`` ``gateway``); the others go to the backend -----

    def op_ping(self, call: Call[NoArgs], deadline: float) -> Pong:
        """``ping``: the daemon answers (even when ``max_inflight`` requests run)."""
        return {"pong": True, "pid": os.getpid()}

    def op_shutdown(self, call: Call[NoArgs], deadline: float) -> ShutdownAck:
        """``shutdown``: acknowledged here; the daemon stops once the answer is sent."""
        if self._on_shutdown is None:
            raise BadRequestError("this gateway cannot be shut down remotely")
        log.info("shutdown_requested")
        return {"stopping": True, "pid": os.getpid()}

    def op_status(self, call: Call[NoArgs], deadline: float) -> dict[str, Any]:
        """``status``: the gateway's fields merged with the backend's (:meth:`status`)."""
        return self.status()

    def _to_backend(self, call: Call[Any], deadline: float) -> Any:
        return self._backend.handle(call, deadline=deadline)

    def status(self) -> dict[str, Any]:
        """Return the status: the gateway's fields merged with the backend's ``status``."""
        uptime_s = time.monotonic() - self._started
        return daemon_status(self._config, self._backend, self.statistics(), uptime_s)

    # --- streams --------------------------------------------------------------------

    def _stream(self, conn: socket.socket, request: RequestFrame) -> None:
        try:
            args = validate_args(request.op, request.args)
        except BadRequestError as e:
            conn.sendall(encode_error(request.id, e))
            return
        stop = threading.Event()
        with self._lock:
            self._streams.add(stop)
        assert isinstance(args, SubscribeArgs)  # the op table's Struct for ``subscribe``
        log.info("stream_opened", project_id=args.project_id, after_seq=args.after_seq)
        # Waiting for events is not idleness: the timeout now bounds only each frame's send.
        try:
            serve_stream(conn, request.id, lambda: self._backend.subscribe(args, stop), stop)
        finally:
            with self._lock:
                self._streams.discard(stop)
            log.info("stream_closed")
