"""The host link's frames: the daemon asks a project's host directly, past Thespian's relays.

A request for a project (``route`` ``project`` or ``conversation`` in
:data:`runtime.wire.ops.OP_TABLE`) used to travel daemon → admin → Supervisor → Project and
its answer back the same way, unpickled and pickled again by each relay. The project's
host process (``actors.host_link_server``) serves the same requests on a Unix socket of its own,
``ROOST_HOME/hosts/<project id>.sock``, behind the journal link's checks (the peer must be
the daemon's, unsandboxed, with the link token first); the daemon
(``runtime.daemon.host_link_client``) sends each request there when the socket answers and
through the actor tree when it does not (the project is not running, or its host is being
restarted). Frames are msgpack with the length prefix of ``runtime.wire.framing``.
"""

from __future__ import annotations

import os
from typing import Any

import msgspec

from runtime.errors import WireError
from runtime.wire.ops import Call

__all__ = ["HOSTS_DIR", "HostReply", "HostRequest", "host_socket_path"]

HOSTS_DIR = "hosts"
"""The hosts' sockets, in ``ROOST_HOME`` (mode 0700)."""


class HostRequest(msgspec.Struct, frozen=True, kw_only=True, tag="request"):
    """One client request, as the gateway validated it."""

    id: int
    """The request's number on its connection (its answer names it)."""
    call: Call[Any]
    """The request, with the ids the gateway minted; its arguments arrive as a map, which
    :func:`runtime.wire.ops.call_from_wire` turns back into the op's Struct."""


class HostReply(msgspec.Struct, frozen=True, kw_only=True, tag="reply"):
    """The answer to one request."""

    id: int
    """The request's number."""
    ok: bool
    """True on success."""
    result: Any = None
    """The result when ok."""
    error: WireError | None = None
    """The wire error ``{code, message, details}`` when not ok."""


def host_socket_path(home: str, project_id: str) -> str:
    """The host link socket of project ``project_id`` under ``home``."""
    return os.path.join(home, HOSTS_DIR, f"{project_id}.sock")
