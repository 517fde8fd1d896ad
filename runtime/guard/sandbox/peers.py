"""Who may talk to Roost's sockets: the peer's uid, PID namespace, ancestry and liveness.

Both of Roost's sockets (``roost.sock``, served by the gateway, and ``journal.sock``, the
journal link) examine every connection as it is accepted, before a byte of it is read
(:func:`examine_peer`). A sandboxed command runs as the daemon's own user, so the uid
alone cannot tell it from the user's shell; what can:

1. ``other_uid``: the peer's uid (``SO_PEERCRED``) is not the server's.
2. ``other_pid_namespace``: the peer is not in the server's PID namespace. Every command
   Roost runs lives in a new one (bubblewrap or ``unshare``), and a process cannot leave
   its namespace, so this is the check a sandboxed command cannot forge. Only the
   namespace link is read here (``/proc/PID/ns/pid``), nothing of the peer's memory.
3. ``sandboxed``: the peer or one of its ancestors is a Roost sandbox: a command line
   carrying the sandbox's init name (``roost-sandbox-init``) or an environment carrying
   the command marker (``ROOST_COMMAND_ID``). The walk stops at the first ancestor the
   server shares (so a daemon started inside a Roost command still serves its own
   clients), and a marker equal to the server's own is not counted. This catches
   commands run where no PID namespace could be made.
4. ``outside_tree`` (journal link only): the peer's ancestry does not reach one of the
   given roots (the actor tree's Supervisor, the daemon).
5. ``unverifiable``: the peer's ``/proc`` entries cannot be read (it hid them, or ``/proc``
   belongs to another namespace); ``gone``: the peer exited before the checks were done.

The checks read ``/proc`` by pid, and a pid can be reused once its process is reaped.
The kernel's ``SO_PEERPIDFD`` (Linux 6.5) pins the process that connected: once the
checks are done, the pidfd must still name a live process, so what was read was that
process's. On older kernels a pidfd is opened on the pid at accept instead (which leaves
the short window between ``connect`` and ``accept``).
"""

from __future__ import annotations

import contextlib
import enum
import os
import platform
import signal
import socket
import threading
import time
from collections.abc import Callable, Collection
from typing import NamedTuple

from runtime.guard.sandbox.proctree import MARKER_ENV
from runtime.guard.sandbox.run import INIT_NAME
from runtime.wire.transport import PeerCredentials, peer_credentials

__all__ = [
    "MAX_ANCESTRY",
    "PeerRefusal",
    "Throttle",
    "ancestry",
    "carries_sandbox_mark",
    "examine_peer",
    "peer_refusal",
    "pid_namespace",
]

MAX_ANCESTRY = 128
"""Ancestors walked at most (a deeper chain is refused as ``unverifiable``)."""

# SO_PEERPIDFD is 77 in the generic socket options, which these architectures use (alpha,
# mips, parisc and sparc number it differently); Python names it from 3.13 on.
_GENERIC_SOCKOPTS = {"x86_64", "aarch64", "arm64", "i386", "i686", "armv7l", "armv8l"}
_GENERIC_SOCKOPTS |= {"riscv64", "s390x", "ppc64", "ppc64le", "loongarch64"}
_SO_PEERPIDFD: int | None = getattr(
    socket, "SO_PEERPIDFD", 77 if platform.machine() in _GENERIC_SOCKOPTS else None
)
_INIT_ARG = INIT_NAME.encode()
_MARKER_PREFIX = MARKER_ENV.encode() + b"="


class PeerRefusal(enum.StrEnum):
    """Why a peer was refused (the ``reason`` of ``peer_rejected``, ``check`` on the wire)."""

    OTHER_UID = "other_uid"
    OTHER_PID_NAMESPACE = "other_pid_namespace"
    SANDBOXED = "sandboxed"
    OUTSIDE_TREE = "outside_tree"
    UNVERIFIABLE = "unverifiable"
    GONE = "gone"


def pid_namespace(pid: int | str) -> str | None:
    """The PID namespace of ``pid`` (``"self"`` for this process), e.g. ``pid:[4026531836]``.

    ``None`` when it cannot be read (no such process, or not allowed).
    """
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None


def _parent(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    # "pid (comm) state ppid ...": comm may hold spaces and parentheses; cut at the last ')'.
    fields = stat[stat.rfind(b")") + 2 :].split()
    try:
        return int(fields[1])
    except (IndexError, ValueError):
        return None


def ancestry(pid: int, limit: int = MAX_ANCESTRY) -> list[int] | None:
    """``[pid, parent, grandparent, ...]`` up to (not including) pid 0; ``None`` if unreadable.

    ``None`` too when the chain is longer than ``limit``.
    """
    chain: list[int] = []
    current = pid
    while current > 0:
        if len(chain) >= limit:
            return None
        parent = _parent(current)
        if parent is None:
            return None
        chain.append(current)
        current = parent
    return chain


def _read(pid: int, name: str) -> bytes:
    """A ``/proc`` file of ``pid``; empty when it cannot be read (nothing it could say)."""
    try:
        with open(f"/proc/{pid}/{name}", "rb") as f:
            return f.read()
    except OSError:
        return b""


def carries_sandbox_mark(pid: int, own_marker: str | None = None) -> bool:
    """Whether ``pid``'s command line has the sandbox init name or its environment a marker.

    An environment that cannot be read (another user's process) counts as unmarked; the
    command line is world-readable. A marker equal to ``own_marker`` is not counted.
    """
    if _INIT_ARG in _read(pid, "cmdline").split(b"\0"):
        return True
    environ = _read(pid, "environ")
    own = _MARKER_PREFIX + own_marker.encode() if own_marker is not None else None
    return any(entry.startswith(_MARKER_PREFIX) and entry != own for entry in environ.split(b"\0"))


def peer_refusal(
    creds: PeerCredentials,
    *,
    server_uid: int,
    tree_roots: Collection[int] | None = None,
) -> PeerRefusal | None:
    """The first check ``creds``' process fails (see the module docstring), or ``None``.

    ``tree_roots``: when given, the peer's ancestry (itself included) must reach one of
    these pids. Reads ``/proc``; the caller makes sure the pid still names the peer.
    """
    identity = _PeerIdentity(creds, server_uid, pid_namespace("self"), pid_namespace(creds.pid))
    for refusal, fails in _IDENTITY_CHECKS:
        if fails(identity):
            return refusal
    chain = ancestry(creds.pid)
    own_chain = ancestry(os.getpid())
    if chain is None or own_chain is None:
        return PeerRefusal.UNVERIFIABLE
    if _sandboxed(chain, set(own_chain)):
        return PeerRefusal.SANDBOXED
    if tree_roots is not None and not set(chain) & set(tree_roots):
        return PeerRefusal.OUTSIDE_TREE
    return None


class _PeerIdentity(NamedTuple):
    """What the identity checks read of a peer: its credentials and PID namespaces."""

    creds: PeerCredentials
    """The peer's credentials (``SO_PEERCRED``)."""
    server_uid: int
    """The uid a peer must have."""
    own_namespace: str | None
    """This process's PID namespace (``None``: unreadable)."""
    namespace: str | None
    """The peer's PID namespace (``None``: unreadable, or the peer is gone)."""


_IDENTITY_CHECKS: tuple[tuple[PeerRefusal, Callable[[_PeerIdentity], bool]], ...] = (
    (PeerRefusal.OTHER_UID, lambda p: p.creds.uid != p.server_uid),
    # the peer's pid has no number in this namespace
    (PeerRefusal.OTHER_PID_NAMESPACE, lambda p: p.creds.pid <= 0),
    (
        PeerRefusal.GONE,
        lambda p: p.namespace is None and not os.path.exists(f"/proc/{p.creds.pid}"),
    ),
    (PeerRefusal.UNVERIFIABLE, lambda p: p.own_namespace is None or p.namespace is None),
    (PeerRefusal.OTHER_PID_NAMESPACE, lambda p: p.namespace != p.own_namespace),
)
"""The first checks of a peer, in order: the first that fails is its refusal."""


def _sandboxed(chain: list[int], shared: set[int]) -> bool:
    """Whether a process of ``chain`` below the first one the server shares is marked."""
    own_marker = os.environ.get(MARKER_ENV)
    for pid in chain:
        if pid in shared:
            return False
        if carries_sandbox_mark(pid, own_marker):
            return True
    return False


def _is_pidfd(fd: int) -> bool:
    try:
        return "pidfd" in os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return False


def _peer_pidfd(sock: socket.socket, pid: int) -> int | None:
    """A pidfd of the process that connected (``SO_PEERPIDFD``), else one opened on ``pid``."""
    if _SO_PEERPIDFD is not None:
        try:
            fd = sock.getsockopt(socket.SOL_SOCKET, _SO_PEERPIDFD)
        except OSError:  # ENOPROTOOPT before Linux 6.5
            fd = -1
        if fd >= 0 and _is_pidfd(fd):
            return int(fd)
    if pid <= 0:
        return None
    try:
        return os.pidfd_open(pid)
    except OSError:
        return None


def _alive(pidfd: int) -> bool:
    try:
        signal.pidfd_send_signal(pidfd, 0)
    except ProcessLookupError:
        return False
    except OSError:  # e.g. EPERM: it exists
        return True
    return True


def examine_peer(
    sock: socket.socket,
    *,
    server_uid: int | None = None,
    tree_roots: Collection[int] | None = None,
) -> tuple[PeerCredentials, PeerRefusal | None]:
    """The peer of an accepted Unix socket and why it must be refused (``None``: allowed).

    ``server_uid`` defaults to this process's uid. Raises ``OSError`` only when the
    socket has no peer credentials at all.
    """
    creds = peer_credentials(sock)
    pidfd = _peer_pidfd(sock, creds.pid)
    try:
        refusal = peer_refusal(
            creds,
            server_uid=os.getuid() if server_uid is None else server_uid,
            tree_roots=tree_roots,
        )
        if refusal is None and pidfd is not None and not _alive(pidfd):
            refusal = PeerRefusal.GONE
    finally:
        if pidfd is not None:
            with contextlib.suppress(OSError):
                os.close(pidfd)
    return creds, refusal


class Throttle:
    """Lets at most ``per_second`` events through each second and counts the others.

    For log lines a flood of refused connections would otherwise write without bound.
    """

    def __init__(self, per_second: int = 10) -> None:
        self.per_second = per_second
        self._lock = threading.Lock()
        self._window = 0.0
        self._count = 0
        self._suppressed = 0

    def allow(self) -> int | None:
        """``None``: drop this one; else let it through, with how many were dropped since."""
        now = time.monotonic()
        with self._lock:
            if now - self._window >= 1.0:
                self._window, self._count = now, 0
            if self._count >= self.per_second:
                self._suppressed += 1
                return None
            self._count += 1
            suppressed, self._suppressed = self._suppressed, 0
            return suppressed
