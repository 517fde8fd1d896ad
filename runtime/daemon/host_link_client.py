"""The daemon side of the host link: a project's requests go straight to its host.

:class:`HostLinks` keeps, per project, the idle connections to its host socket
(``runtime.wire.host_link``). :meth:`HostLinks.ask` sends one request on a connection of
its own (taken from the pool or made) and waits for the answer that names it; an answer
to an earlier request of the connection (a turn's outcome sent again by a restarted
conversation, or one whose client gave up) is skipped. It returns ``None`` when the
project has no host socket that answers — not running, or its host is being restarted —
and when the connection breaks before the answer came: the backend then asks through the
actor tree, which knows whether the project runs and holds requests while it restarts.
A connection is only put back once its answer came.

A host that stops reading (stopped, hung) fills its socket: a request that cannot be
written within :data:`SEND_WAIT_S` is refused with ``overloaded`` (``host_not_reading``),
and so is every request to that host for :data:`SEND_WAIT_S` after, at once, instead of
each waiting out its time limit; a restarted host (a new socket) is asked again at once.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import socket
import threading
import time
from typing import Any

import msgspec

from runtime.errors import OverloadedError
from runtime.journal.link import LinkHello
from runtime.logging import get_logger
from runtime.wire import counters
from runtime.wire.framing import FrameTooLargeError, TruncatedFrameError, frame, read_frame
from runtime.wire.host_link import HostReply, HostRequest, host_socket_path
from runtime.wire.ops import Call
from runtime.wire.protocol import internal_error
from runtime.wire.transport import connect_unix_socket

__all__ = ["HostLinks"]

log = get_logger("runtime.daemon.host_links")

_ENCODER = msgspec.msgpack.Encoder()
_REPLY = msgspec.msgpack.Decoder(HostReply)
_MAX_REPLY = 64 * 1024 * 1024
_MAX_IDLE_PER_PROJECT = 64
SEND_WAIT_S = 2.0
"""How long a request may wait for room on a host's socket before it is refused: the host
reads its socket on a thread of its own, so a full socket means a host that stopped."""


class HostLinks:
    """Pooled connections to the projects' hosts."""

    def __init__(self, home: str, token: str) -> None:
        self.home = home
        self.token = token
        self._idle: dict[str, list[socket.socket]] = {}
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self.sent = 0
        """Requests answered over a host link."""
        self.fallbacks = 0
        """Requests the links could not carry (asked through the actor tree)."""
        self.refused = 0
        """Requests refused because their host was not reading."""
        self._stuck_until: dict[str, tuple[int | None, float]] = {}

    def ask(self, project_id: str, call: Call[Any], deadline: float) -> HostReply | None:
        """The host's answer, or None (no host answers: ask the actor tree)."""
        self._refuse_if_stuck(project_id)
        sock = self._take(project_id)
        if sock is None:
            self.fallbacks += 1
            return None
        number = next(self._ids)
        try:
            sock.settimeout(min(SEND_WAIT_S, max(0.05, deadline - time.monotonic())))
            try:
                sock.sendall(frame(_ENCODER.encode(HostRequest(id=number, call=call))))
            except TimeoutError:
                self._stuck(project_id)
                sock.close()
                raise self._not_reading(project_id) from None
            counters.count("host_link")
            sock.settimeout(max(0.05, deadline - time.monotonic()))
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError
                body = read_frame(sock, _MAX_REPLY, deadline=deadline)
                if body is None:
                    raise ConnectionResetError("the host closed the link")
                try:
                    reply = _REPLY.decode(body)
                except msgspec.DecodeError as e:  # the host has the request: never run it twice
                    sock.close()
                    return HostReply(id=number, ok=False, error=internal_error(call.op, e))
                if reply.id == number:
                    break
        except TimeoutError:
            sock.close()
            return HostReply(id=number, ok=False, error=None)
        except (OSError, msgspec.DecodeError, FrameTooLargeError, TruncatedFrameError):
            sock.close()
            self.fallbacks += 1
            return None
        self.sent += 1
        self._give(project_id, sock)
        return reply

    def _inode(self, project_id: str) -> int | None:
        try:
            return os.stat(host_socket_path(self.home, project_id)).st_ino
        except OSError:
            return None

    def _stuck(self, project_id: str) -> None:
        with self._lock:
            self._stuck_until[project_id] = (
                self._inode(project_id),
                time.monotonic() + SEND_WAIT_S,
            )
        self.refused += 1
        log.warning("host_not_reading", project_id=project_id, wait_s=SEND_WAIT_S)

    def _refuse_if_stuck(self, project_id: str) -> None:
        with self._lock:
            stuck = self._stuck_until.get(project_id)
        if stuck is None:
            return
        inode, until = stuck
        if time.monotonic() >= until or self._inode(project_id) != inode:
            with self._lock:
                self._stuck_until.pop(project_id, None)
            return
        self.refused += 1
        raise self._not_reading(project_id)

    @staticmethod
    def _not_reading(project_id: str) -> OverloadedError:
        return OverloadedError(
            f"the host of project {project_id} is not reading its requests (stopped or "
            "hung); retry later",
            reason="host_not_reading",
            actor=f"project:{project_id}",
        )

    def _take(self, project_id: str) -> socket.socket | None:
        with self._lock:
            idle = self._idle.get(project_id)
            if idle:
                return idle.pop()
        try:
            sock = connect_unix_socket(host_socket_path(self.home, project_id), 2.0)
        except OSError:
            return None
        try:
            sock.sendall(frame(_ENCODER.encode(LinkHello(token=self.token))))
            counters.count("host_link")
        except OSError:
            sock.close()
            return None
        return sock

    def _give(self, project_id: str, sock: socket.socket) -> None:
        with self._lock:
            idle = self._idle.setdefault(project_id, [])
            if len(idle) < _MAX_IDLE_PER_PROJECT:
                idle.append(sock)
                return
        sock.close()

    def forget(self, project_id: str) -> None:
        """Close the idle connections to a project's host (it stopped)."""
        with self._lock:
            idle = self._idle.pop(project_id, [])
        for sock in idle:
            with contextlib.suppress(OSError):
                sock.close()

    def close(self) -> None:
        """Close every idle connection."""
        with self._lock:
            projects = list(self._idle)
        for project_id in projects:
            self.forget(project_id)

    def idle_count(self) -> int:
        """Idle connections held."""
        with self._lock:
            return sum(len(v) for v in self._idle.values())

    def stats(self) -> dict[str, int]:
        """``{idle, sent, fallbacks}``: for ``status``."""
        return {
            "idle": self.idle_count(),
            "sent": self.sent,
            "fallbacks": self.fallbacks,
            "refused": self.refused,
        }
