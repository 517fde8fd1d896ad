"""Helpers for tests that run a real daemon process on the fake backend."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil

from runtime.daemon import daemon_processes, stop_daemon
from runtime.wire.transport import bind_unix_socket, connect_unix_socket

REPO_ROOT = str(Path(__file__).resolve().parents[2])
FAKE_BACKEND = "tests.runtime.fake_backend:create"


def daemon_env(**extra: str) -> dict[str, str]:
    """The environment a child needs to run the daemon on the fake backend."""
    env = dict(os.environ)
    env["ROOST_BACKEND"] = FAKE_BACKEND
    env["PYTHONPATH"] = os.pathsep.join(p for p in (REPO_ROOT, env.get("PYTHONPATH")) if p)
    env.pop("ROOST_HOME", None)
    env.update(extra)
    return env


def run_roost(
    *args: str, env: dict[str, str] | None = None, timeout: float = 60.0
) -> subprocess.CompletedProcess[str]:
    """Run ``roost ARGS`` (``python -m runtime.cli``) in a child process."""
    return subprocess.run(
        [sys.executable, "-m", "runtime.cli", *args],
        env=env or daemon_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def process_gone(pid: int) -> bool:
    """True when ``pid`` no longer runs (a zombie waiting for its reaper counts as gone)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def wait_for(predicate: Callable[[], bool], timeout_s: float = 10.0, what: str = "") -> None:
    """Wait until ``predicate()`` is true, or fail the test after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what or predicate}")
        time.sleep(0.01)


def start_via_cli(home: str) -> int:
    """``roost --json daemon start --home HOME``; return the daemon's pid."""
    done = run_roost("--json", "daemon", "start", "--home", home)
    assert done.returncode == 0, done.stderr
    pid: int = json.loads(done.stdout)["pid"]
    return pid


def stop_and_check(home: str, pid: int) -> None:
    """Stop the daemon of ``home`` and assert nothing of it is left running."""
    family = daemon_processes(home)
    stop_daemon(home, timeout_s=10)
    wait_for(lambda: process_gone(pid), 10, f"daemon {pid} to exit")
    for proc in family:
        wait_for(lambda p=proc: process_gone(p.pid), 10, f"process {proc.pid} to exit")
    assert daemon_processes(home) == []


@contextlib.contextmanager
def running_daemon(home: str) -> Iterator[int]:
    """A daemon started with the CLI, stopped (and checked gone) at the end."""
    pid = start_via_cli(home)
    try:
        yield pid
    finally:
        stop_and_check(home, pid)


class SocketProxy:
    """A Unix-socket proxy in front of a daemon, to cut connections on purpose.

    Clients use ``home`` (the proxy's socket is ``home/roost.sock``). ``cut()`` closes
    every current connection; ``drop_next_reply`` closes the client's connection as
    soon as the daemon starts answering (the request was served, the reply is lost).
    """

    def __init__(self, home: str, target_socket: str) -> None:
        self.home = home
        self.target = target_socket
        self.listener = bind_unix_socket(os.path.join(home, "roost.sock"))
        self.listener.settimeout(0.05)
        self.pairs: list[tuple[socket.socket, socket.socket]] = []
        self.lock = threading.Lock()
        self.drop_next_reply = False
        self.connections = 0
        self.closed = False
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            client.settimeout(None)
            upstream = connect_unix_socket(self.target, 5.0)
            upstream.settimeout(None)
            with self.lock:
                self.pairs.append((client, upstream))
                self.connections += 1
            threading.Thread(target=self._pump, args=(client, upstream, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, True), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, replies: bool) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if replies and self.drop_next_reply:
                    self.drop_next_reply = False
                    break
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
        src.close()

    def cut(self) -> None:
        """Close every connection through the proxy (the proxy keeps listening)."""
        with self.lock:
            pairs, self.pairs = self.pairs, []
        for pair in pairs:
            for s in pair:
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        """Stop listening and cut everything."""
        self.closed = True
        self.thread.join(5)
        self.listener.close()
        self.cut()
