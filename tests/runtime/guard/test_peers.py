"""The peer checks of Roost's sockets, on real processes: namespaces, ancestry, liveness."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from runtime.guard.sandbox.peers import (
    PeerRefusal,
    Throttle,
    ancestry,
    carries_sandbox_mark,
    examine_peer,
    peer_refusal,
    pid_namespace,
)
from runtime.guard.sandbox.proctree import MARKER_ENV
from runtime.wire.transport import PeerCredentials, bind_unix_socket
from tests.runtime.daemon_helpers import wait_for
from tests.runtime.peer_helpers import (
    marked_parent_prefix,
    pid_namespace_prefixes,
    sandbox_init_prefix,
)

SLEEPER = [sys.executable, "-c", "import time; time.sleep(60)"]


def creds(pid: int, uid: int | None = None) -> PeerCredentials:
    return PeerCredentials(pid=pid, uid=os.getuid() if uid is None else uid, gid=os.getgid())


@pytest.fixture
def spawn() -> Iterator[object]:
    """Start processes (argv, env) that are killed with their whole tree at the end."""
    started: list[subprocess.Popen[bytes]] = []

    def start(argv: list[str], env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(argv, env=env, start_new_session=True)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def leaf(proc: subprocess.Popen[bytes]) -> int:
    """The pid of the :data:`SLEEPER` itself under ``proc``'s wrappers (waits for it)."""
    found: list[int] = []

    def look() -> bool:
        try:
            tree = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
            found[:] = [p.pid for p in tree if p.cmdline() == SLEEPER]
        except psutil.NoSuchProcess:
            return False
        return bool(found)

    wait_for(look, 10, "the sleeper to start")
    return found[0]


def test_the_ancestry_of_a_child_runs_through_this_process() -> None:
    with subprocess.Popen(SLEEPER) as child:
        try:
            chain = ancestry(child.pid)
            assert chain is not None
            assert chain[:2] == [child.pid, os.getpid()]
            assert chain[-1] == 1 or psutil.Process(chain[-1]).ppid() == 0
        finally:
            child.kill()


def test_the_ancestry_of_a_missing_process_is_unknown() -> None:
    assert ancestry(2**22 + 12345) is None


def test_a_process_has_the_namespace_of_its_parent() -> None:
    assert pid_namespace("self") == pid_namespace(os.getpid())
    assert pid_namespace("self") is not None
    assert (pid_namespace("self") or "").startswith("pid:[")


def test_a_child_of_this_process_is_allowed(spawn) -> None:
    child = spawn(SLEEPER)
    assert peer_refusal(creds(child.pid), server_uid=os.getuid()) is None
    assert peer_refusal(creds(child.pid), server_uid=os.getuid(), tree_roots=[os.getpid()]) is None


def test_another_uid_is_refused_first() -> None:
    assert peer_refusal(creds(os.getpid(), uid=os.getuid() + 1), server_uid=os.getuid()) == (
        PeerRefusal.OTHER_UID
    )


def test_a_pid_the_kernel_could_not_translate_is_another_namespace() -> None:
    assert peer_refusal(creds(0), server_uid=os.getuid()) == PeerRefusal.OTHER_PID_NAMESPACE


def test_a_process_that_is_gone_is_refused_as_gone() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert peer_refusal(creds(child.pid), server_uid=os.getuid()) == PeerRefusal.GONE


@pytest.mark.parametrize("via", ["unshare", "bwrap"])
def test_a_process_in_another_pid_namespace_is_refused(spawn, tmp_path: Path, via: str) -> None:
    prefix = pid_namespace_prefixes(str(tmp_path)).get(via)
    if prefix is None:
        pytest.skip(f"{via} cannot make a PID namespace here")
    outer = spawn([*prefix, *SLEEPER])
    inner = leaf(outer)
    assert pid_namespace(inner) != pid_namespace("self")
    assert peer_refusal(creds(inner), server_uid=os.getuid()) == PeerRefusal.OTHER_PID_NAMESPACE


def test_a_descendant_of_the_sandbox_init_is_refused(spawn) -> None:
    outer = spawn([*sandbox_init_prefix(), *SLEEPER])
    inner = leaf(outer)
    assert carries_sandbox_mark(outer.pid) is True
    assert carries_sandbox_mark(inner) is False
    assert peer_refusal(creds(inner), server_uid=os.getuid()) == PeerRefusal.SANDBOXED


def test_a_descendant_of_a_marked_process_is_refused_though_it_dropped_the_marker(spawn) -> None:
    outer = spawn([*marked_parent_prefix("run-1234"), *SLEEPER])
    inner = leaf(outer)
    assert MARKER_ENV not in psutil.Process(inner).environ()
    assert peer_refusal(creds(inner), server_uid=os.getuid()) == PeerRefusal.SANDBOXED


def test_a_process_carrying_the_marker_itself_is_refused(spawn) -> None:
    child = spawn(SLEEPER, env={**os.environ, MARKER_ENV: "run-5678"})
    wait_for(lambda: MARKER_ENV in psutil.Process(child.pid).environ(), 10, "the child's exec")
    assert carries_sandbox_mark(child.pid) is True
    assert peer_refusal(creds(child.pid), server_uid=os.getuid()) == PeerRefusal.SANDBOXED


def test_a_marker_equal_to_the_servers_own_is_not_counted(spawn) -> None:
    child = spawn(SLEEPER, env={**os.environ, MARKER_ENV: "same-run"})
    wait_for(lambda: MARKER_ENV in psutil.Process(child.pid).environ(), 10, "the child's exec")
    assert carries_sandbox_mark(child.pid, own_marker="same-run") is False
    assert carries_sandbox_mark(child.pid, own_marker="other-run") is True


def test_a_server_started_inside_a_roost_command_still_allows_its_own_children(
    spawn, monkeypatch
) -> None:
    # This process (the "server") itself carries a marker its peers inherit with a value
    # of their own: a daemon started inside a Roost command still serves its own clients.
    monkeypatch.setenv(MARKER_ENV, "outer-run")
    child = spawn(SLEEPER)
    assert peer_refusal(creds(child.pid), server_uid=os.getuid()) is None


def test_a_process_outside_the_tree_roots_is_refused(spawn) -> None:
    root = spawn(SLEEPER)
    stranger = spawn(SLEEPER)
    assert peer_refusal(creds(stranger.pid), server_uid=os.getuid(), tree_roots=[root.pid]) == (
        PeerRefusal.OUTSIDE_TREE
    )


def test_the_peer_of_a_socket_connected_from_another_pid_namespace_is_refused(
    spawn, tmp_path: Path
) -> None:
    prefixes = pid_namespace_prefixes(str(tmp_path))
    if not prefixes:
        pytest.skip("no way to make a PID namespace here")
    path = str(tmp_path / "s.sock")
    listener = bind_unix_socket(path)
    connect = "import socket,time; s=socket.socket(socket.AF_UNIX); s.connect({!r}); time.sleep(60)"
    with listener:
        spawn([*next(iter(prefixes.values())), sys.executable, "-c", connect.format(path)])
        listener.settimeout(20)
        conn, _ = listener.accept()
        with conn:
            peer, refusal = examine_peer(conn)
    assert refusal == PeerRefusal.OTHER_PID_NAMESPACE
    assert peer.uid == os.getuid() and peer.pid > 0


def test_the_peer_of_a_socket_connected_by_this_process_is_allowed(tmp_path: Path) -> None:
    path = str(tmp_path / "s.sock")
    with bind_unix_socket(path) as listener, socket.socket(socket.AF_UNIX) as client:
        client.connect(path)
        conn, _ = listener.accept()
        with conn:
            peer, refusal = examine_peer(conn, tree_roots=[os.getpid()])
    assert (peer.pid, refusal) == (os.getpid(), None)


def test_a_peer_that_exits_before_it_is_examined_is_refused_as_gone(tmp_path: Path) -> None:
    path = str(tmp_path / "s.sock")
    with bind_unix_socket(path) as listener:
        # The child connects, hands its socket to a grandchild that keeps it open, and exits.
        code = (
            f"import os,socket,time; s=socket.socket(socket.AF_UNIX); s.connect({path!r})\n"
            "if os.fork() == 0: time.sleep(30)\n"
        )
        keeper = subprocess.Popen([sys.executable, "-c", code])
        keeper.wait()
        conn, _ = listener.accept()
        with conn:
            _, refusal = examine_peer(conn)
        for proc in psutil.process_iter(["cmdline"]):
            if code in " ".join(proc.info["cmdline"] or []):
                proc.kill()
    assert refusal == PeerRefusal.GONE


def test_the_throttle_lets_a_few_through_per_second_and_counts_the_rest() -> None:
    throttle = Throttle(per_second=2)
    assert [throttle.allow(), throttle.allow(), throttle.allow(), throttle.allow()] == [
        0,
        0,
        None,
        None,
    ]
    let_through: list[int] = []
    wait_for(lambda: (n := throttle.allow()) is not None and not let_through.append(n), 5)
    assert let_through[0] >= 2
