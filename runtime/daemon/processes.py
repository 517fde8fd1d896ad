"""The daemon's processes: finding all of them, waiting for them, killing them.

A detached daemon's actor processes are forked from it (same command line) but may leave
its process tree: Thespian's admin starts its own session and is re-parented to init.
:func:`daemon_processes` finds them anyway, for ``stop_daemon``'s last resort, for the
tests' "no process left" checks and for the soak harness's memory figures.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time

import psutil

from runtime.daemon.config import resolve_home
from runtime.logging import get_logger

__all__ = [
    "SPAWNED",
    "daemon_processes",
    "kill_tree",
    "reap_stragglers",
    "wait_gone",
]

log = get_logger("roost.daemon")

SPAWNED: dict[int, subprocess.Popen[bytes]] = {}
"""Daemons this process spawned, kept so they can be reaped (no zombies, no warnings)."""


def wait_gone(pid: int, timeout_s: float) -> bool:
    """Wait for ``pid`` to exit (reaping it if it is our child); True when it is gone."""
    proc = SPAWNED.get(pid)
    if proc is not None:
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            return False
        SPAWNED.pop(pid, None)
        return True
    deadline = time.monotonic() + timeout_s
    delay = 0.001
    while True:
        try:
            # Not our child: once it is a zombie it has exited; its parent (init) reaps it.
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(delay)
        delay = min(delay * 2, 0.05)


def daemon_processes(home: str | None) -> list[psutil.Process]:
    """Every process of the detached daemon of ``home``: itself, its actors, their children.

    Actor processes are forked from the daemon (same command line) but may leave its tree
    (Thespian's admin starts its own session and is re-parented to init), so they are
    found by command line (``-m runtime.daemon --home HOME``, this user) and descendants.
    """
    tail = ["-m", "runtime.daemon", "--home", resolve_home(home)]
    uid = os.getuid()
    # One pass over /proc: every actor has the daemon's command line, so asking each root
    # for its children (a full scan each) cost seconds with a hundred conversations.
    children: dict[int, list[psutil.Process]] = {}
    found: dict[int, psutil.Process] = {}
    for proc in psutil.process_iter(["cmdline", "uids", "ppid"]):
        info = proc.info
        children.setdefault(info.get("ppid") or 0, []).append(proc)
        uids = info.get("uids")
        if uids is not None and uids.real == uid and (info.get("cmdline") or [])[-4:] == tail:
            found[proc.pid] = proc
    stack = list(found)
    while stack:
        for child in children.get(stack.pop(), []):
            if child.pid not in found:
                found[child.pid] = child
                stack.append(child.pid)
    return sorted(found.values(), key=lambda p: p.pid)


def kill_tree(pid: int, home: str | None = None) -> None:
    """SIGKILL a daemon, its process group if it leads one, and all its processes."""
    family = daemon_processes(home) if home is not None else []
    with contextlib.suppress(psutil.NoSuchProcess):
        family += psutil.Process(pid).children(recursive=True)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if os.getpgid(pid) == pid:
            os.killpg(pid, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGKILL)
    for proc in family:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.kill()


def reap_stragglers(home: str, timeout_s: float = 5.0) -> int:
    """Give processes left by a stopped daemon ``timeout_s`` to exit, then SIGKILL them.

    Waits (``timeout_s`` again) for the killed ones to be gone: a busy machine takes a
    moment to tear a killed process down, and the caller was promised none is left.
    """
    left = daemon_processes(home)
    if not left:
        return 0
    _, alive = psutil.wait_procs(left, timeout=timeout_s)
    alive = [p for p in alive if not _is_zombie(p)]
    for proc in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.kill()
    if alive:
        log.warning("daemon_stragglers_killed", pids=[p.pid for p in alive])
        psutil.wait_procs(alive, timeout=timeout_s)  # gone when this returns, not dying
    return len(alive)


def _is_zombie(proc: psutil.Process) -> bool:
    try:
        return proc.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True
