"""Take the actor tree down when the daemon process dies (a thread in the Supervisor)."""

from __future__ import annotations

import os
import signal
import threading
import time

import psutil

__all__ = ["watch_daemon"]


def watch_daemon(pid: int, started: float, interval_s: float = 0.5) -> threading.Thread:
    """Take the actor tree down if the daemon process dies.

    Thespian daemonizes its admin (``setsid`` and a double fork), so the actor processes
    are not the daemon's descendants and would outlive a daemon killed by a signal. A
    thread in the Supervisor watches the daemon's pid (and create time, against pid
    reuse) and, once it is gone, kills this process group: the admin and every actor.
    """

    def alive() -> bool:
        try:
            proc = psutil.Process(pid)
            same = abs(proc.create_time() - started) < 1.0
            return bool(same and proc.status() != psutil.STATUS_ZOMBIE)
        except psutil.NoSuchProcess:
            return False

    def watch() -> None:
        while alive():
            time.sleep(interval_s)
        os.killpg(os.getpgid(0), signal.SIGKILL)

    thread = threading.Thread(target=watch, name="roost-daemon-watch", daemon=True)
    thread.start()
    return thread
