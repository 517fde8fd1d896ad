"""The daemon process: pid lock, backend, gateway, signals.

``python -m runtime.daemon --home DIR`` runs one daemon in the foreground of its process
(:func:`run_daemon`); starting, stopping and inspecting one from outside is
:mod:`runtime.daemon.control`. SIGTERM, SIGINT and the ``shutdown`` op stop it the same way:
close the socket, ``backend.close()``, remove the socket and the pid file, exit 0. The
start-up order and the files in ``ROOST_HOME``: ``docs/operations.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import signal
import stat
import sys
import threading
from types import FrameType
from typing import Any

from runtime.daemon.config import (
    FLAG_SETTINGS,
    BackendFactory,
    DaemonConfig,
    config_for_home,
    load_backend_factory,
    resolve_settings,
)
from runtime.daemon.gateway import Gateway
from runtime.daemon.start_failure import failure_line
from runtime.errors import RoostError
from runtime.guard.home.pidfile import PidFile
from runtime.guard.home.statedir import private_umask, secure_home
from runtime.logging import configure_logging, get_logger

__all__ = ["main", "run_daemon"]

log = get_logger("roost.daemon")


def run_daemon(
    config: DaemonConfig, backend_factory: BackendFactory, *, log_to_stderr: bool = False
) -> int:
    """Run the daemon in this process until SIGTERM, SIGINT or ``shutdown``; return 0.

    Logs go to ``config.log_path`` as JSON lines, or to stderr with ``log_to_stderr``
    (console format on a terminal). Raises :class:`DaemonAlreadyRunningError` when
    another daemon holds the home and ``ConfigError`` (``bad_config``) when the home
    cannot be made private; a backend that cannot be built is logged and gives 1. The
    process keeps umask 077 while the daemon runs.
    """
    user_umask = private_umask()
    try:
        fixed = secure_home(config.home)
        return _run(config, backend_factory, log_to_stderr=log_to_stderr, fixed=fixed)
    finally:
        os.umask(user_umask)


def _run(
    config: DaemonConfig, backend_factory: BackendFactory, *, log_to_stderr: bool, fixed: list[str]
) -> int:
    as_json = not log_to_stderr or not sys.stderr.isatty()
    log_file = "-" if log_to_stderr else config.log_path
    configure_logging(json=as_json, log_file=log_file)
    # What every actor process (a fork of this one) logs to, and how.
    os.environ["ROOST_LOG_FILE"] = log_file
    os.environ["ROOST_LOG_FORMAT"] = "json" if as_json else "console"
    pidfile = PidFile(config.pid_path)
    pidfile.acquire()
    if fixed:
        log.warning("home_modes_fixed", home=config.home, paths=fixed[:20], count=len(fixed))
    stop = threading.Event()
    reason: list[str] = []
    restore = _install_signal_handlers(stop, reason)
    try:
        if pidfile.stale_pid is not None:
            log.warning("stale_pid_file_found", stale_pid=pidfile.stale_pid)
        for path in _remove_stale_socket(config):
            log.warning("stale_socket_removed", path=path)
        pidfile.write(os.getpid())
        try:
            backend = backend_factory(config)
        except Exception as e:
            log.exception("backend_failed", error=str(e))
            print(failure_line(e), file=sys.stderr)
            return 1
        gateway = Gateway(config, backend, on_shutdown=lambda: _stop(stop, reason, "shutdown"))
        try:
            gateway.start()
        except OSError as e:
            log.exception("socket_failed", socket=config.socket_path)
            print(f"roost: socket_failed: {config.socket_path}: {e}", file=sys.stderr)
            backend.close()
            return 1
        # What start-up made (modules, the backend) lives as long as the daemon: out of the
        # collector's passes, so a full collection scans what requests made, not all of it.
        gc.freeze()
        log.info("daemon_started", pid=os.getpid(), home=config.home, journal=config.journal)
        while not stop.wait(1.0):
            pass
        log.info("daemon_stopping", reason=reason[0] if reason else "unknown")
        gateway.stop()
        try:
            backend.close()
        except Exception:
            log.exception("backend_close_failed")
    finally:
        _remove_stale_socket(config)
        pidfile.release()
        restore()
    log.info("daemon_stopped", pid=os.getpid())
    return 0


def _stop(stop: threading.Event, reason: list[str], why: str) -> None:
    if not reason:
        reason.append(why)
    stop.set()


def _install_signal_handlers(stop: threading.Event, reason: list[str]) -> Any:
    if threading.current_thread() is not threading.main_thread():
        return lambda: None

    def handler(signum: int, _frame: FrameType | None) -> None:
        _stop(stop, reason, signal.Signals(signum).name)

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}

    def restore() -> None:
        for sig, old in previous.items():
            signal.signal(sig, old)

    return restore


def _remove_stale_socket(config: DaemonConfig) -> list[str]:
    with contextlib.suppress(FileNotFoundError):
        if stat.S_ISSOCK(os.lstat(config.socket_path).st_mode):
            os.unlink(config.socket_path)
            return [config.socket_path]
    return []


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m runtime.daemon --home DIR [--config F] [--log-stderr]``."""
    parser = argparse.ArgumentParser(prog="python -m runtime.daemon")
    parser.add_argument("--home", default=None, help="ROOST_HOME (default: $ROOST_HOME)")
    parser.add_argument("--config", help="config file (default: HOME/config.toml)")
    for key in FLAG_SETTINGS:  # --journal, --log-level
        parser.add_argument(f"--{key.replace('_', '-')}", dest=key)
    parser.add_argument("--log-stderr", action="store_true", help="log to stderr, not the file")
    args = parser.parse_args(argv)
    try:
        flags = {key: getattr(args, key) for key in FLAG_SETTINGS}
        settings = resolve_settings(args.home, config_file=args.config, flags=flags)
        os.environ.update(settings.environ())
        config = config_for_home(args.home, settings=settings)
        factory = load_backend_factory()
        return run_daemon(config, factory, log_to_stderr=args.log_stderr)
    except (RoostError, ImportError, ValueError, OSError) as e:
        plain = f"roost: daemon_failed: {' '.join(str(e).split())}"
        print(failure_line(e) if isinstance(e, RoostError) else plain, file=sys.stderr)
        return 1
