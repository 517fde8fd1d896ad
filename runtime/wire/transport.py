"""Unix sockets for the daemon and its clients: owner-only binding, peer uids, long paths.

The daemon's socket lives in ``ROOST_HOME``: the directory is created with mode 0700 and
the socket file with mode 0600. The daemon also checks every peer's uid with SO_PEERCRED
(:func:`peer_credentials`, :func:`peer_is_allowed`). Paths longer than the kernel's
``sun_path`` limit are reached through ``/proc/self/fd`` (:func:`unix_address`).
"""

from __future__ import annotations

import contextlib
import os
import socket
import stat
import struct
import time
from collections.abc import Iterator
from typing import NamedTuple

__all__ = [
    "PeerCredentials",
    "bind_unix_socket",
    "connect_unix_socket",
    "linger",
    "peer_credentials",
    "peer_is_allowed",
    "unix_address",
]

_CREDS = struct.Struct("3i")
_MAX_SUN_PATH = 107


class PeerCredentials(NamedTuple):
    """The connecting process, as the kernel reports it (SO_PEERCRED).

    A ``NamedTuple``, not a msgspec Struct: clients load this module and no codec.
    """

    pid: int
    """Peer process id."""
    uid: int
    """Peer user id."""
    gid: int
    """Peer group id."""


def peer_credentials(sock: socket.socket) -> PeerCredentials:
    """Return the credentials of the process at the other end of a Unix socket."""
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _CREDS.size)
    pid, uid, gid = _CREDS.unpack(raw)
    return PeerCredentials(pid=pid, uid=uid, gid=gid)


def peer_is_allowed(peer_uid: int, daemon_uid: int) -> bool:
    """Only the daemon's own user may talk to it (root included: no exception)."""
    return peer_uid == daemon_uid


@contextlib.contextmanager
def unix_address(path: str) -> Iterator[str]:
    """Yield an address for ``bind``/``connect`` that reaches ``path``, however long it is.

    Paths over the kernel's ``sun_path`` limit go through ``/proc/self/fd/N/`` of an
    ``O_PATH`` descriptor of the directory, held open while the context lasts.
    """
    if len(os.fsencode(path)) <= _MAX_SUN_PATH:
        yield path
        return
    directory, name = os.path.split(path)
    fd = os.open(directory or ".", os.O_PATH | os.O_DIRECTORY)
    try:
        yield f"/proc/self/fd/{fd}/{name}"
    finally:
        os.close(fd)


def bind_unix_socket(path: str, backlog: int = 1024) -> socket.socket:
    """Create the listening socket at ``path``: directory 0700 (created), socket 0600.

    The umask is tightened during ``bind`` so the file never exists with wider modes.
    Raises ``OSError`` (``EADDRINUSE`` when the file exists).
    """
    directory = os.path.dirname(path)
    os.makedirs(directory, mode=0o700, exist_ok=True)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        old_umask = os.umask(0o177)
        try:
            with unix_address(path) as address:
                sock.bind(address)
        finally:
            os.umask(old_umask)
        os.chmod(path, stat.S_IRUSR | stat.S_IWUSR)
        sock.listen(backlog)
    except BaseException:
        sock.close()
        raise
    return sock


def connect_unix_socket(path: str, timeout_s: float | None) -> socket.socket:
    """Connect to the Unix socket at ``path``; ``OSError`` when nothing listens there."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout_s)
        with unix_address(path) as address:
            sock.connect(address)
    except BaseException:
        sock.close()
        raise
    return sock


def linger(conn: socket.socket, timeout_s: float = 1.0, limit: int = 1 << 20) -> None:
    """Close our side, then discard what the peer still sends (bounded in time and bytes).

    Closing a Unix socket with unread input resets the peer, which would then lose the
    error frame just sent; draining first lets it read the error.
    """
    with contextlib.suppress(OSError):
        conn.shutdown(socket.SHUT_WR)
        conn.settimeout(timeout_s)
        deadline = time.monotonic() + timeout_s
        drained = 0
        while drained < limit and time.monotonic() < deadline:
            chunk = conn.recv(65536)
            if not chunk:
                return
            drained += len(chunk)
