"""Who is on the other end of a loopback TCP connection: the daemon's peer checks, over TCP.

The daemon's socket checks each peer (``runtime.guard.sandbox.peers``: same uid, same PID
namespace, no Roost sandbox in its ancestry); a TCP port on 127.0.0.1 is open to every user
of the machine, and to a sandboxed command when egress is allowed (it then shares the
host's network namespace). So ``roost mcp serve --http`` finds the client's end of each
connection in the kernel's socket tables (``/proc/net/tcp``, ``/proc/net/tcp6``: the entry
whose local address is the client's and whose remote address is the server's), which gives
its uid and inode, finds the processes holding that socket (``/proc/PID/fd``) and runs
the same :func:`~runtime.guard.sandbox.peers.peer_refusal` on each (:func:`holder_refusal`). Any
refusal, or a connection it cannot find, is answered ``403`` (:class:`SameUserOnly`).
"""

from __future__ import annotations

import ipaddress
import os
import sys
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from pathlib import Path
from typing import Any

from runtime.guard.sandbox.peers import peer_refusal
from runtime.wire.transport import PeerCredentials

__all__ = [
    "TABLES",
    "SameUserOnly",
    "decode_address",
    "holder_refusal",
    "peer_socket",
    "peer_uid",
    "socket_holders",
]

TABLES: tuple[str, ...] = ("/proc/net/tcp", "/proc/net/tcp6")
"""The kernel's TCP socket tables (IPv4, IPv6) of this network namespace."""

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def _normal(host: str) -> str:
    address = ipaddress.ip_address(host.partition("%")[0])
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.compressed


def decode_address(text: str, byteorder: str = sys.byteorder) -> tuple[str, int]:
    """``(host, port)`` of a table's ``HEXADDR:HEXPORT`` (the address in 32-bit host words)."""
    hex_address, _, hex_port = text.partition(":")
    raw = bytes.fromhex(hex_address)
    if byteorder == "little":
        raw = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    host = str(ipaddress.ip_address(raw))
    return _normal(host), int(hex_port, 16)


def peer_uid(
    client: tuple[str, int], server: tuple[str, int], tables: Iterable[str] = TABLES
) -> int | None:
    """The uid owning the client's end of the connection ``client`` → ``server``, or None."""
    found = peer_socket(client, server, tables)
    return found[0] if found is not None else None


def peer_socket(
    client: tuple[str, int], server: tuple[str, int], tables: Iterable[str] = TABLES
) -> tuple[int, int] | None:
    """``(uid, inode)`` of the client's end of the connection ``client`` → ``server``."""
    want_client = (_normal(client[0]), int(client[1]))
    want_server = (_normal(server[0]), int(server[1]))
    for table in tables:
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 8:
                continue
            try:
                local, remote = decode_address(fields[1]), decode_address(fields[2])
            except ValueError:
                continue
            if local == want_client and remote == want_server:
                return int(fields[7]), int(fields[9])
    return None


def socket_holders(inode: int, proc: str = "/proc") -> list[int]:
    """The pids holding the socket ``inode`` open (those whose ``fd`` this user may read)."""
    target = f"socket:[{inode}]"
    holders: list[int] = []
    with os.scandir(proc) as entries:
        for entry in entries:
            if not entry.name.isdigit():
                continue
            try:
                with os.scandir(f"{proc}/{entry.name}/fd") as fds:
                    if any(_link(fd.path) == target for fd in fds):
                        holders.append(int(entry.name))
            except OSError:
                continue
    return holders


def _link(path: str) -> str | None:
    try:
        return os.readlink(path)
    except OSError:
        return None


def holder_refusal(inode: int, uid: int) -> str | None:
    """Why a process holding socket ``inode`` may not call (a ``PeerRefusal``), or None."""
    holders = socket_holders(inode)
    if not holders:
        return "gone"
    for pid in holders:
        refusal = peer_refusal(PeerCredentials(pid=pid, uid=uid, gid=-1), server_uid=uid)
        if refusal is not None:
            return str(refusal)
    return None


class SameUserOnly:
    """ASGI middleware: a request from a peer the daemon's socket would refuse gets ``403``.

    The peer's uid must be the server's; then every process holding its socket must pass
    ``holders`` (:func:`holder_refusal`; tests give their own), whose verdict is kept per
    socket inode while the connection is open (at most 1024 of them). ``name`` is the
    command the refusal names (``roost a2a serve`` uses this class too).
    """

    def __init__(
        self,
        app: ASGIApp,
        uid: int | None = None,
        tables: Iterable[str] = TABLES,
        holders: Callable[[int, int], str | None] = holder_refusal,
        name: str = "roost mcp serve",
    ):
        self.app = app
        self.name = name
        self.uid = os.getuid() if uid is None else uid
        self.tables = tuple(tables)
        self.holders = holders
        self._verdicts: dict[int, str | None] = {}

    def refusal(self, client: Any, server: Any) -> str | None:
        """Why the peer of ``client`` → ``server`` may not call, or None."""
        found = peer_socket(client, server, self.tables) if client and server else None
        if found is None:
            return "unverifiable"
        uid, inode = found
        if uid != self.uid:
            return "other_uid"
        if inode not in self._verdicts:
            if len(self._verdicts) >= 1024:
                self._verdicts.clear()
            self._verdicts[inode] = self.holders(inode, uid)
        return self._verdicts[inode]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass lifespan and the requests of allowed peers on; refuse the rest."""
        if scope["type"] == "http":
            refusal = self.refusal(scope.get("client"), scope.get("server"))
            if refusal is not None:
                body = (
                    b"peer_not_allowed: %s answers only processes of the user it "
                    b"runs as (uid %d), outside Roost's sandboxes (check: %s)\n"
                    % (self.name.encode(), self.uid, refusal.encode())
                )
                await send(
                    {
                        "type": "http.response.start",
                        "status": 403,
                        "headers": [(b"content-type", b"text/plain; charset=utf-8")],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)
