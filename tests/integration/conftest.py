"""A real daemon on a temporary ROOST_HOME, driven through the real client.

Every test that starts a daemon stops it in the fixture's finalizer and asserts that no
process of its tree is left.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from runtime.client import Client
from runtime.daemon import start_daemon, stop_daemon
from runtime.daemon.processes import daemon_processes

REPO_ROOT = str(Path(__file__).resolve().parents[2])


READ_TURN = [
    "user.message",
    "llm.started",
    "tool.requested",
    "assistant.message",
    "policy.allowed",
    "tool.started",
    "tool.completed",
    "llm.started",
    "assistant.delta",
    "assistant.message",
    "llm.completed",
]
"""The events of a turn in which the deterministic model reads one file."""


def daemon_env(**extra: str) -> dict[str, str]:
    """Environment for a real daemon (the real backend) started from the tests."""
    env = {
        "PYTHONPATH": os.pathsep.join(p for p in (REPO_ROOT, os.environ.get("PYTHONPATH")) if p),
        "ROOST_BACKEND": "runtime.daemon.backend:create_backend",
        "ROOST_FAULT_INJECTION": "1",  # inject_fault: crash a hosted entity on purpose
    }
    env.update(extra)
    return env


def roost_cli(
    home: str, *args: str, timeout: float = 120, **env: str
) -> subprocess.CompletedProcess[str]:
    """``roost --home HOME ARGS`` as a program (the real CLI), with its exit status."""
    return subprocess.run(
        [sys.executable, "-m", "runtime.cli", "--home", home, *args],
        env={**os.environ, **daemon_env(**env)},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def tree(pid: int) -> list[psutil.Process]:
    """The daemon process and all its descendants."""
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def alive(procs: list[psutil.Process]) -> list[psutil.Process]:
    """Those of ``procs`` still running (zombies count as gone)."""
    out = []
    for proc in procs:
        try:
            if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                out.append(proc)
        except psutil.NoSuchProcess:
            continue
    return out


@dataclass
class Daemon:
    """A running daemon: its home, pid and a way to connect."""

    home: str
    pid: int
    admin_pid: int | None = None

    def client(self, timeout_s: float = 10.0) -> Client:
        """A new client connection."""
        return Client.connect(self.home, timeout_s=timeout_s)

    def processes(self) -> list[psutil.Process]:
        """The daemon's process tree now, and the actor tree under Thespian's admin
        (Thespian daemonizes its admin, so actors are not the daemon's descendants)."""
        out = tree(self.pid)
        if self.admin_pid is None:
            with contextlib.suppress(Exception), self.client() as c:
                self.admin_pid = c.status().get("admin_pid")
        if self.admin_pid:
            out += tree(self.admin_pid)
        return out


def make_root(path: Path) -> str:
    """A project root with seed files and one asset of each kind."""
    path.mkdir(parents=True, exist_ok=True)
    (path / "README.md").write_text("# Seed project\n\nHello from the seed file.\n")
    (path / "notes.txt").write_text("alpha\nbeta\ngamma\n")
    skills = path / ".roost" / "skills"
    skills.mkdir(parents=True)
    (skills / "review.md").write_text("---\ndescription: Review a change\n---\nRead the diff.\n")
    return str(path)


@pytest.fixture
def project_root(tmp_path: Path) -> str:
    """A seeded project root."""
    return make_root(tmp_path / "repo")


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[Daemon]:
    """Start a real daemon; stop it afterwards and assert its whole tree is gone."""
    home = str(tmp_path / "home")
    pid = start_daemon(home, env=daemon_env(), timeout_s=60)
    running = Daemon(home=home, pid=pid)
    seen = running.processes()
    try:
        yield running
    finally:
        seen += running.processes()
        stop_daemon(home, timeout_s=30)
        psutil.wait_procs(alive(seen), timeout=10)  # one still tearing down is not left behind
        left = alive(seen)
        for proc in left:
            proc.kill()
        assert left == [], f"processes left behind: {left}"


@pytest.fixture
def daemon_home(tmp_path: Path) -> Iterator[str]:
    """A ROOST_HOME whose daemons (however many were started, killed or not) are all gone after."""
    path = str(tmp_path / "home")
    yield path
    seen = daemon_processes(path)
    stop_daemon(path, timeout_s=30)
    left = alive(seen + daemon_processes(path))
    for proc in left:
        proc.kill()
    assert left == [], f"processes left behind: {left}"
