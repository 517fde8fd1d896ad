"""Who may connect to the daemon's socket: the peer check and the connection limit.

Each accepted connection, before a byte of it is read: its peer is examined
(:func:`runtime.guard.sandbox.peers.examine_peer`: uid, PID namespace, sandbox ancestry,
liveness), and a refused peer gets ``bad_request {reason: peer_not_allowed, check, uid}``;
beyond ``max_connections`` open connections it gets ``overloaded {reason:
too_many_connections}``. Either way the connection is closed here, without taking a slot.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Callable

from runtime.errors import BadRequestError, OverloadedError
from runtime.guard.sandbox.peers import PeerRefusal, Throttle, examine_peer
from runtime.logging import get_logger
from runtime.wire.protocol import encode_error
from runtime.wire.transport import PeerCredentials

__all__ = ["refuse_connection", "refuse_peer"]

log = get_logger("roost.gateway")


def _refusal_message(refusal: PeerRefusal, uid: int, daemon_uid: int) -> str:
    if refusal is PeerRefusal.OTHER_UID:
        return f"uid {uid} may not use this daemon (it serves uid {daemon_uid} only)"
    why = {
        PeerRefusal.OTHER_PID_NAMESPACE: "it runs in another PID namespace (a sandboxed "
        "command or a container), and the daemon serves only its own namespace",
        PeerRefusal.SANDBOXED: "it descends from a command Roost runs in its sandbox",
        PeerRefusal.OUTSIDE_TREE: "it is not one of the daemon's own processes",
        PeerRefusal.UNVERIFIABLE: "its /proc entries cannot be read to check who it is",
        PeerRefusal.GONE: "it exited before it could be checked",
    }[refusal]
    return f"this process may not use the daemon: {why}"


def refuse_peer(
    conn: socket.socket, *, daemon_uid: int, throttle: Throttle, counted: Callable[[], None]
) -> bool:
    """Examine the peer; a refused one is ``counted``, gets its error frame, is closed (True).

    Counted before the frame goes out: a peer that has read its refusal sees it in
    ``status`` already.
    """
    try:
        creds, refusal = examine_peer(conn, server_uid=daemon_uid)
    except Exception as e:  # no credentials, or /proc answered what nobody expects
        creds, refusal = PeerCredentials(pid=0, uid=-1, gid=-1), PeerRefusal.UNVERIFIABLE
        log.warning("peer_examination_failed", error=f"{type(e).__name__}: {e}")
    if refusal is None:
        return False
    counted()
    suppressed = throttle.allow()
    if suppressed is not None:
        log.warning(
            "peer_rejected",
            reason=str(refusal),
            peer_pid=creds.pid,
            peer_uid=creds.uid,
            daemon_uid=daemon_uid,
            suppressed=suppressed,
        )
    err = BadRequestError(
        _refusal_message(refusal, creds.uid, daemon_uid),
        reason="peer_not_allowed",
        check=str(refusal),
        uid=creds.uid,
    )
    # The frame fits in the socket buffer: no wait. Closing with the peer's request
    # unread still lets it read this frame first.
    with contextlib.suppress(OSError):
        conn.sendall(encode_error(0, err))
    conn.close()
    return True


def refuse_connection(conn: socket.socket, max_connections: int) -> None:
    """Answer a connection beyond ``max_connections`` with ``overloaded``, and close it."""
    err = OverloadedError(
        f"too many connections (max {max_connections}); retry later",
        reason="too_many_connections",
        max_connections=max_connections,
    )
    with contextlib.suppress(OSError):
        conn.sendall(encode_error(0, err))
    conn.close()
    log.warning("connection_refused_overloaded", max=max_connections)
