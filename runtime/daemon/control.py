"""Starting, stopping and inspecting a daemon from outside its process.

:func:`start_daemon` spawns ``python -m runtime.daemon`` detached (its process is
:mod:`runtime.daemon.main`) and returns once it answers ``ping``; :func:`stop_daemon` asks it
to shut down and escalates to SIGTERM, then SIGKILL of its process tree;
:func:`daemon_status` reads the pid lock and asks the daemon. The files in ``ROOST_HOME``
and the start-up order: ``docs/operations.md``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Mapping
from typing import Any

from runtime.client.connection import Client
from runtime.daemon.config import (
    DaemonConfig,
    config_for_home,
    load_backend_factory,
    resolve_settings,
)
from runtime.daemon.main import run_daemon
from runtime.daemon.processes import SPAWNED, kill_tree, reap_stragglers, wait_gone
from runtime.daemon.settings import daemon_argv
from runtime.daemon.start_failure import child_failure
from runtime.errors import DaemonUnreachableError, RoostError
from runtime.guard.home.pidfile import DaemonAlreadyRunningError, locked_pid
from runtime.guard.home.statedir import secure_home
from runtime.journal.link import LINK_SOCKET_NAME
from runtime.logging import get_logger

__all__ = [
    "cleanup_stale_files",
    "daemon_pid",
    "daemon_status",
    "log_tail",
    "start_daemon",
    "stop_daemon",
]

log = get_logger("roost.daemon")


def daemon_pid(home: str | None) -> int | None:
    """Return the pid of the daemon running on ``home`` (0: starting), ``None`` if none."""
    return locked_pid(config_for_home(home).pid_path)


def cleanup_stale_files(config: DaemonConfig) -> list[str]:
    """Remove the sockets and pid file left by a crashed daemon; return what was removed.

    Only call it when no daemon holds the pid lock. A non-socket at the socket path is
    left alone and raises ``RoostError`` (code ``internal_error``) naming the path.
    """
    removed: list[str] = []
    link = _link_socket(config)
    with contextlib.suppress(FileNotFoundError):
        if stat.S_ISSOCK(os.lstat(link).st_mode):
            os.unlink(link)
            removed.append(link)
    try:
        mode = os.lstat(config.socket_path).st_mode
    except FileNotFoundError:
        pass
    else:
        if not stat.S_ISSOCK(mode):
            raise RoostError(
                f"{config.socket_path} exists and is not a socket; move it away and retry",
                path=config.socket_path,
            )
        os.unlink(config.socket_path)
        removed.append(config.socket_path)
    if locked_pid(config.pid_path) is None and os.path.exists(config.pid_path):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(config.pid_path)
            removed.append(config.pid_path)
    return removed


def _link_socket(config: DaemonConfig) -> str:
    """The journal link's socket (``journal.sock``), which a killed Journal leaves behind."""
    return os.path.join(config.home, LINK_SOCKET_NAME)


def log_tail(path: str, lines: int = 20) -> str:
    """Return the last ``lines`` lines of a log file ('' when it does not exist)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 64 * 1024))
            data = f.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(data.splitlines()[-lines:])


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:300] if lines else "none"


def start_daemon(
    home: str | None,
    *,
    foreground: bool = False,
    env: Mapping[str, str] | None = None,
    timeout_s: float = 30.0,
    config_file: str | None = None,
    flags: Mapping[str, str | None] | None = None,
) -> int:
    """Start a daemon on ``home`` and return its pid once it answers ``ping``.

    With ``foreground=True`` the daemon runs in this process instead, and the return value
    is its exit status after it stops. ``env`` is added to the child's environment.
    The settings (``config_file``, default ``HOME/config.toml``, and ``flags``) are
    resolved first: ``ConfigError`` for a bad one (``runtime.daemon.settings``).
    Raises :class:`DaemonAlreadyRunningError`, or :class:`DaemonUnreachableError` (with
    the log's last lines) when the daemon exits or does not answer within ``timeout_s``.
    """
    environ = {**os.environ, **(env or {})}
    settings = resolve_settings(home, config_file=config_file, flags=flags, environ=environ)
    config = config_for_home(home, settings=settings)
    running = locked_pid(config.pid_path)
    if running is not None:
        raise DaemonAlreadyRunningError(
            f"daemon already running (pid {running}) in {config.home}",
            pid=running,
            home=config.home,
        )
    if foreground:
        os.environ.update(settings.environ())
        return run_daemon(config, load_backend_factory(), log_to_stderr=True)
    secure_home(config.home)
    os.makedirs(os.path.dirname(config.log_path), mode=0o700, exist_ok=True)
    child_env = {**os.environ, **(env or {})}
    argv = ["-m", "runtime.daemon", "--home", config.home, *daemon_argv(config_file, flags)]
    mode = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    with os.fdopen(os.open(config.log_path, mode, 0o600), "ab") as log_file:
        offset = log_file.seek(0, os.SEEK_END)
        proc = subprocess.Popen(
            [sys.executable, *argv],
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=log_file,
            env=child_env,
            cwd=config.home,
            start_new_session=True,
        )
    SPAWNED[proc.pid] = proc
    deadline = time.monotonic() + timeout_s
    delay = 0.01
    while True:
        code = proc.poll()
        if code is not None:
            SPAWNED.pop(proc.pid, None)
            with contextlib.suppress(RoostError):
                cleanup_stale_files(config)
            failure = child_failure(config.log_path, offset, code)
            if failure is not None:  # the child's own error: the real cause, with its code
                failure.details.setdefault("log", config.log_path)
                raise failure
            tail = log_tail(config.log_path)
            raise DaemonUnreachableError(
                f"the daemon exited with status {code} before answering "
                f"(last log line: {_last_line(tail)}); see {config.log_path}",
                exit_code=code,
                log=config.log_path,
                log_tail=tail,
            )
        with contextlib.suppress(DaemonUnreachableError), Client.connect(config.home) as c:
            c.ping()
            return proc.pid
        if time.monotonic() >= deadline:
            kill_tree(proc.pid, config.home)
            wait_gone(proc.pid, 5.0)
            with contextlib.suppress(RoostError):
                cleanup_stale_files(config)
            tail = log_tail(config.log_path)
            raise DaemonUnreachableError(
                f"the daemon did not answer within {timeout_s:g} s and was killed "
                f"(last log line: {_last_line(tail)}); see {config.log_path}",
                log=config.log_path,
                log_tail=tail,
            )
        time.sleep(delay)
        delay = min(delay * 2, 0.2)


def stop_daemon(home: str | None, timeout_s: float = 30.0) -> bool:
    """Stop the daemon on ``home``; return whether one was running.

    Sends ``shutdown`` and waits up to ``timeout_s``; then SIGTERM (up to 5 s more); then
    SIGKILL of its process group and every process of :func:`daemon_processes`. Processes
    the daemon left behind get 5 s to exit, then SIGKILL. Stale files are removed last.
    """
    config = config_for_home(home)
    pid = locked_pid(config.pid_path)
    if not pid:
        if pid is None:
            with contextlib.suppress(RoostError):
                cleanup_stale_files(config)
            return False
        pid = _wait_for_pid(config, 2.0)
    with contextlib.suppress(RoostError, OSError), Client.connect(config.home) as c:
        c.shutdown()
    if not wait_gone(pid, timeout_s):
        log.warning("daemon_stop_escalated", pid=pid, signal="SIGTERM")
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        if not wait_gone(pid, min(5.0, max(timeout_s, 1.0))):
            log.warning("daemon_stop_escalated", pid=pid, signal="SIGKILL")
            kill_tree(pid, config.home)
            wait_gone(pid, 5.0)
    reap_stragglers(config.home)
    with contextlib.suppress(RoostError):
        cleanup_stale_files(config)
    return True


def _wait_for_pid(config: DaemonConfig, timeout_s: float) -> int:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        pid = locked_pid(config.pid_path)
        if pid:
            return pid
        time.sleep(0.02)
    raise DaemonUnreachableError(f"the daemon in {config.home} holds its lock but wrote no pid")


def daemon_status(home: str | None) -> dict[str, Any]:
    """Return ``{running, responding, pid, home, socket, log, stale_files, ...}``.

    When the daemon answers, its ``status`` (uptime, version, projects...) is merged in.
    """
    config = config_for_home(home)
    pid = locked_pid(config.pid_path)
    status: dict[str, Any] = {
        "running": pid is not None,
        "responding": False,
        "pid": pid,
        "home": config.home,
        "socket": config.socket_path,
        "log": config.log_path,
    }
    if pid is None:
        paths = (config.socket_path, config.pid_path, _link_socket(config))
        stale = [p for p in paths if os.path.lexists(p)]
        status["stale_files"] = stale
        return status
    try:
        with Client.connect(config.home) as c:
            remote = c.status()
    except RoostError as e:
        status["error"] = f"{e.code}: {e.message}"
        return status
    status["responding"] = True
    status.update({k: v for k, v in remote.items() if k not in status})
    return status
