"""The daemon: its process, the socket gateway, the actor backend and its configuration.

General layout: ``main`` (the process and its signals), ``control`` (``start_daemon`` /
``stop_daemon`` / ``daemon_status``, from outside the process), ``gateway`` (the socket:
frames, requests; ``admission`` lets a connection in, ``replies`` answers a request,
``status`` builds ``status``), ``streams`` (``subscribe``), ``backend`` (the Thespian actor
system behind the gateway; ``actor_system`` readies the process for it, ``live_views`` and
``verify`` serve the ops that join the journal with the live actors), ``config``
(``DaemonConfig`` and the backend interface), ``pidfile``, ``processes`` (the daemon's
process tree), ``unused_imports`` (what the daemon's processes never load).

The public API (used by the CLI and the soak harness) is re-exported here, loaded on first
use: ``python -m runtime.daemon`` imports this package before its ``__main__``, which must
run :func:`runtime.daemon.unused_imports.keep_out` before anything imports structlog.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from runtime.daemon.control import daemon_pid, start_daemon, stop_daemon
    from runtime.daemon.processes import daemon_processes, reap_stragglers

__all__ = ["daemon_pid", "daemon_processes", "reap_stragglers", "start_daemon", "stop_daemon"]

_HOME = {
    "daemon_pid": "runtime.daemon.control",
    "start_daemon": "runtime.daemon.control",
    "stop_daemon": "runtime.daemon.control",
    "daemon_processes": "runtime.daemon.processes",
    "reap_stragglers": "runtime.daemon.processes",
}


def __getattr__(name: str) -> Any:
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
