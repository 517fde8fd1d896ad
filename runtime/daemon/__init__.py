"""The daemon: its process, the socket gateway, the actor backend and its configuration.

General layout: ``main`` (``start_daemon`` / ``stop_daemon``, the process and its
signals), ``gateway`` (the socket: peers, frames, requests), ``streams`` (``subscribe``),
``backend`` (the Thespian actor system behind the gateway), ``config`` (``DaemonConfig``
and the backend interface), ``pidfile``, ``processes`` (the daemon's process tree).

The public API (used by the CLI and the soak harness) is re-exported here.
"""

from runtime.daemon.main import daemon_pid, start_daemon, stop_daemon
from runtime.daemon.processes import daemon_processes, reap_stragglers

__all__ = ["daemon_pid", "daemon_processes", "reap_stragglers", "start_daemon", "stop_daemon"]
