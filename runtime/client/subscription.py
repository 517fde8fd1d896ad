"""The client side of ``subscribe``: an iterator of events that survives dropped connections.

An :class:`EventStream` owns one connection, sends one ``subscribe`` request and yields
each event frame's envelope. If the connection drops without an ``end`` frame, it
reconnects and asks again from the last ``seq`` it yielded (``after_seq``), a bounded
number of times with backoff, so a consumer sees every event once and in order.

A daemon that stops cleanly ends every stream by closing it, and then removes its pid
file: a stream that cannot reconnect and finds no pid file ends like one the daemon
ended (``StopIteration``), while a crashed daemon (its pid file left, unlocked) gives
``DaemonUnreachableError``. While the daemon still holds its pid lock (it is shutting
down) the stream keeps trying, for up to :data:`SHUTDOWN_WAIT_S`.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

from runtime.errors import DaemonUnreachableError, error_from_wire
from runtime.guard.home.pidfile import locked_pid
from runtime.guard.home.roost_home import pid_path
from runtime.wire.client_codec import (
    MalformedFrameError,
    ServerFrame,
    decode_server_frame,
    encode_request,
)
from runtime.wire.framing import TruncatedFrameError, read_frame
from runtime.wire.transport import connect_unix_socket

if TYPE_CHECKING:  # a type only: the client does not load the events package
    from events.view_types import TimelineEvent

__all__ = ["SHUTDOWN_WAIT_S", "EventStream", "daemon_state", "exchange", "open_socket"]

SHUTDOWN_WAIT_S = 60.0
"""How long a stream waits for a daemon that holds its lock but does not answer."""


def daemon_state(home: str) -> str:
    """``running`` (the pid lock is held), ``stopped`` (no pid file) or ``crashed``."""
    path = pid_path(home)
    if locked_pid(path) is not None:
        return "running"
    return "crashed" if os.path.exists(path) else "stopped"


def open_socket(socket_path: str, home: str, timeout_s: float) -> socket.socket:
    """Connect to the daemon's socket or raise ``DaemonUnreachableError`` saying how to fix."""
    try:
        return connect_unix_socket(socket_path, timeout_s)
    except OSError as e:
        reason = e.strerror or str(e)
        raise DaemonUnreachableError(
            f"no daemon answers on {socket_path} ({reason}); "
            f"start one with `roost daemon start --home {home}`, or point at a running one "
            "with --home DIR (or ROOST_HOME)",
            home=home,
            socket=socket_path,
        ) from e


def exchange(sock: socket.socket, frame: bytes, *, timeout_s: float, max_bytes: int) -> ServerFrame:
    """Send a request frame and read the one frame that answers it.

    If the daemon hung up before the request went out, the error frame it left (e.g.
    ``overloaded``) is raised as its ``RequestError``. Raises ``FrameTooLargeError``,
    ``MalformedFrameError``, ``TimeoutError`` and other ``OSError`` (connection lost).
    """
    sock.settimeout(timeout_s)
    try:
        sock.sendall(frame)
    except OSError:
        try:
            body = read_frame(sock, max_bytes)
            left = decode_server_frame(body) if body else None
        except (OSError, MalformedFrameError):
            left = None
        if left is not None and left.kind == "error":
            raise error_from_wire(left.value) from None
        raise
    body = read_frame(sock, max_bytes)
    if body is None:
        raise TruncatedFrameError("the daemon closed the connection")
    return decode_server_frame(body)


class EventStream(Iterator["TimelineEvent"]):
    """Events of one ``subscribe`` request, in ``seq`` order; ``close()`` to stop.

    ``args`` are the request's (``project_id``, ``conversation_id``), ``after_seq`` the
    cursor it starts from.
    """

    def __init__(
        self,
        socket_path: str,
        *,
        home: str,
        args: Mapping[str, object],
        after_seq: int = 0,
        connect_timeout_s: float = 5.0,
        max_frame_bytes: int,
        max_retries: int = 5,
    ) -> None:
        self._socket_path = socket_path
        self._home = home
        self._args = dict(args)
        self._connect_timeout_s = connect_timeout_s
        self._max_frame_bytes = max_frame_bytes
        self._max_retries = max_retries
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()
        self._closed = False
        self._failures = 0
        self.last_seq = after_seq
        """The ``seq`` of the last event yielded (the cursor a reconnect resumes from)."""
        self.reconnects = 0
        """How many times the stream was resumed on a new connection."""

    def open(self) -> None:
        """Connect and send the request (``after_seq`` = :attr:`last_seq`)."""
        sock = open_socket(self._socket_path, self._home, self._connect_timeout_s)
        try:
            args = {**self._args, "after_seq": self.last_seq}
            sock.sendall(encode_request(1, "subscribe", args))
            sock.settimeout(None)
        except OSError as e:
            sock.close()
            raise DaemonUnreachableError(f"could not send subscribe: {e}") from e
        with self._lock:
            if self._closed:
                sock.close()
                return
            self._sock = sock

    def close(self) -> None:
        """Stop the stream and close its connection (safe from another thread)."""
        with self._lock:
            self._closed = True
            sock, self._sock = self._sock, None
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def __enter__(self) -> EventStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __iter__(self) -> EventStream:
        return self

    def __next__(self) -> TimelineEvent:
        while True:
            sock = self._sock
            if self._closed or sock is None:
                raise StopIteration
            try:
                body = read_frame(sock, self._max_frame_bytes)
                if body is None:
                    raise TruncatedFrameError("the daemon closed the stream")
                frame = decode_server_frame(body)
            except (OSError, MalformedFrameError) as e:
                if self._closed or not self._resume(e):  # closed here, or the daemon stopped
                    raise StopIteration from None
                continue
            if frame.kind == "event":
                self._failures = 0
                event: TimelineEvent = frame.value  # a committed envelope: its ``seq`` is an int
                if event["seq"] <= self.last_seq:
                    continue
                self.last_seq = event["seq"]
                return event
            self.close()
            if frame.kind == "error":
                raise error_from_wire(frame.value)
            raise StopIteration

    def _resume(self, cause: Exception) -> bool:
        """Reconnect after a lost connection; False when the daemon stopped cleanly."""
        with self._lock:
            sock, self._sock = self._sock, None
        if sock is not None:
            sock.close()
        started = time.monotonic()
        while True:
            self._failures += 1
            time.sleep(min(0.05 * 2 ** (self._failures - 1), 1.0))
            if self._closed:
                return False
            try:
                self.open()
            except DaemonUnreachableError:
                state = daemon_state(self._home)
                if state == "stopped":
                    self.close()
                    return False
                waiting = state == "running" and time.monotonic() - started < SHUTDOWN_WAIT_S
                if self._failures > self._max_retries and not waiting:
                    self.close()
                    raise DaemonUnreachableError(
                        f"lost the event stream ({cause}) and could not resume after "
                        f"{self._max_retries} attempts; last seq seen {self.last_seq}",
                        last_seq=self.last_seq,
                    ) from cause
                continue
            self.reconnects += 1
            return True
