"""The host side of the host link: a project's requests straight from the daemon.

:class:`HostLinkServer` is the journal link's server (:class:`runtime.journal.link.LinkServer`:
the peer checks, the caps, the token hello, the canonical frames) serving
:class:`runtime.wire.host_link.HostRequest` instead of appends. Each request is handed to
the host actor's loop as an actor ``Request`` whose ``reply_to`` is a link address
(:func:`link_address`); whoever answers it (the Project, a conversation entity) sends its
``Reply`` there as to any address, and the host writes it back on the connection
(:meth:`HostLinkServer.reply`).
"""

from __future__ import annotations

import contextlib
import itertools
import socket
import threading
from collections.abc import Callable
from typing import Any

import msgspec
from thespian.actors import ActorAddress

from actors.messages import Reply, Request
from runtime.errors import WireError
from runtime.journal.link import LinkFailed, LinkHello, LinkServer, Pending
from runtime.wire import counters
from runtime.wire.dispatch import call_from_wire
from runtime.wire.framing import frame
from runtime.wire.host_link import HostReply, HostRequest

__all__ = ["HostLinkServer", "is_link_address", "link_address"]

_LINK = "roost-host-link"
_ENCODER = msgspec.msgpack.Encoder()


def link_address(server: str, conn: int, request: int) -> ActorAddress:
    """The address a request from the host link is answered at."""
    return ActorAddress((_LINK, server, conn, request))


def is_link_address(address: Any) -> bool:
    """Whether ``address`` names a host-link request."""
    details = getattr(address, "addressDetails", None)
    return isinstance(details, tuple) and len(details) == 4 and details[0] == _LINK


class HostLinkServer(LinkServer):
    """Serves a project's requests on its host socket; ``deliver`` hands each to the host."""

    requests = msgspec.msgpack.Decoder(LinkHello | HostRequest)
    thread_name = "host-link"

    def __init__(
        self,
        path: str,
        token: str,
        deliver: Callable[[Request], None],
        *,
        tree_roots: set[int],
    ) -> None:
        super().__init__(path, token, lambda appends: [], tree_roots=tree_roots)
        self.deliver = deliver
        self.server_id = f"{id(self):x}"
        self._conns: dict[int, Any] = {}
        self._numbers: dict[int, int] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        """Guards the connection tables (held for a lookup, never while sending)."""
        self._sending: dict[int, threading.Lock] = {}
        """One lock per connection: an answer is written whole, one at a time."""
        self.served = 0
        """Requests handed to the host."""

    def _answer(self, pending: list[Pending]) -> None:
        for conn, request in pending:
            if isinstance(request, LinkFailed):  # a frame the checks refused
                self._send(conn, HostReply(id=0, ok=False, error=request.error))
                continue
            if not isinstance(request, HostRequest):
                continue
            with self._lock:
                number = self._numbers.get(id(conn))
                if number is None:
                    number = self._numbers[id(conn)] = next(self._ids)
                    self._conns[number] = conn
            self.served += 1
            reply_to = link_address(self.server_id, number, request.id)
            self.deliver(Request(call=call_from_wire(request.call), reply_to=reply_to))

    def _drop(self, conn: Any) -> None:
        with self._lock:
            number = self._numbers.pop(id(conn), None)
            if number is not None:
                self._conns.pop(number, None)
            self._sending.pop(id(conn), None)
        super()._drop(conn)

    def reply(self, address: Any, reply: Any) -> bool:
        """Write ``reply`` (a ``Reply``) to the request ``address`` names (False: gone)."""
        _, server, number, request = address.addressDetails
        if server != self.server_id:
            return False
        with self._lock:
            conn = self._conns.get(number)
        if conn is None:
            return False
        if isinstance(reply, Reply):
            answer = HostReply(id=request, ok=reply.ok, result=reply.result, error=reply.error)
        else:
            error: WireError = {
                "code": "internal_error",
                "message": f"unexpected answer {type(reply).__name__}",
                "details": {},
            }
            answer = HostReply(id=request, ok=False, error=error)
        return self._send(conn, answer)

    def _send(self, conn: Any, answer: HostReply) -> bool:
        try:
            data = frame(_ENCODER.encode(answer))
        except (TypeError, msgspec.EncodeError) as e:
            error: WireError = {
                "code": "internal_error",
                "message": f"answer not encodable: {e}",
                "details": {},
            }
            data = frame(_ENCODER.encode(HostReply(id=answer.id, ok=False, error=error)))
        sock: socket.socket = conn.sock
        try:
            with self._lock:
                sending = self._sending.setdefault(id(conn), threading.Lock())
            with sending:  # a slow reader holds up its own answers, not the others'
                sock.settimeout(5.0)
                sock.sendall(data)
                sock.setblocking(False)
            counters.count("host_link")  # every frame, either way (the soak report)
        except OSError:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            return False
        return True
