"""The daemon's ``status`` answer: the gateway's own fields merged with the backend's.

:class:`GatewayStats` is the gateway's counters as a snapshot; :func:`daemon_status`
adds the daemon's identity and configuration, then the backend's ``status`` (the actors,
links, telemetry and counters), which never overrides a gateway field.
"""

from __future__ import annotations

import os
import time
from typing import Any

import msgspec

from runtime.daemon.config import Backend, DaemonConfig, roost_version
from runtime.logging import get_logger

__all__ = ["GatewayStats", "daemon_status"]

log = get_logger("roost.gateway")


class GatewayStats(msgspec.Struct, frozen=True, kw_only=True):
    """A snapshot of the gateway's counters."""

    connections: int
    """Open connections."""
    inflight: int
    """Requests being served now."""
    requests: int
    """Requests answered since start (errors included)."""
    rejected_peers: int
    """Connections refused because of their peer (uid, namespace, ancestry)."""
    overloaded: int
    """Requests and connections refused with ``overloaded``."""
    idle_closed: int
    """Connections closed after ``idle_timeout_s`` without a request."""


def daemon_status(
    config: DaemonConfig, backend: Backend, stats: GatewayStats, uptime_s: float
) -> dict[str, Any]:
    """The status: the gateway's fields merged with the backend's ``status``."""
    base: dict[str, Any] = {
        "pid": os.getpid(),
        "home": config.home,
        "uptime_s": round(uptime_s, 3),
        "version": roost_version(),
        "journal": config.journal,
        "config_file": config.config_file,
        "settings": config.settings,
        "socket": config.socket_path,
        "log": config.log_path,
        "connections": stats.connections,
        "inflight": stats.inflight,
    }
    try:
        extra = backend.status(deadline=time.monotonic() + 10.0)
    except Exception as e:
        log.warning("backend_status_failed", error=str(e))
        extra = {"backend_error": str(e)}
    if not isinstance(extra, dict):
        extra = {"backend": extra}
    merged = {**base, **{k: v for k, v in extra.items() if k not in base}}
    merged.setdefault("projects", None)
    return merged
