"""The one launcher (``sandbox.launcher``) and its long-lived shape (``sandbox.server_process``)."""

from __future__ import annotations

import os
import resource
import select
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from runtime.guard.home import roost_home
from runtime.guard.sandbox import cgroupfs, cgroups
from runtime.guard.sandbox.launcher import Limits, prepare
from runtime.guard.sandbox.layers import DISABLE_ENV, View, probe_layers
from runtime.guard.sandbox.limits import rlimit_values
from runtime.guard.sandbox.run import run_command
from runtime.guard.sandbox.server_process import ServerProcess

ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
LIMITS = Limits(cpu_seconds=60, max_processes=16)

ECHO_SERVER = 'while read -r line; do echo "got:$line"; done'


@pytest.fixture(autouse=True)
def bwrap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(DISABLE_ENV, raising=False)
    if not probe_layers()["mount_isolation"]["available"]:
        pytest.skip(f"bwrap cannot run here: {probe_layers()['bwrap']['detail']}")


def _view(root: Path) -> View:
    return View(writable=(str(root),), cwd=str(root), sensitive_deny=(".env",))


def _start(root: Path, argv: list[str]) -> ServerProcess:
    return ServerProcess.start(argv, view=_view(root), env=ENV, allow_network=False, limits=LIMITS)


def _line(server: ServerProcess, text: str) -> str:
    os.write(server.stdin_fd, text.encode() + b"\n")
    ready, _, _ = select.select([server.stdout_fd], [], [], 30)
    assert ready, "the server did not answer"
    return os.read(server.stdout_fd, 4096).decode()


def test_a_command_gets_no_descriptor_of_the_launcher(tmp_path: Path) -> None:
    result = run_command(
        "ls /proc/self/fd",
        cwd=str(tmp_path),
        env=ENV,
        timeout_s=20,
        allow_network=False,
        view=_view(tmp_path),
    )
    # stdin, stdout, stderr, and the directory ls reads: no memfd, no pipe to the daemon
    assert sorted(result.stdout.split()) == ["0", "1", "2", "3"]


def test_a_command_cannot_write_on_the_init_shells_pipe(tmp_path: Path) -> None:
    # A line forged there would end the run early with status 0; the status is the command's.
    script = "for fd in /proc/[12]/fd/*; do echo 0 > $fd; done 2>/dev/null; sleep 1; exit 5"
    result = run_command(
        script,
        cwd=str(tmp_path),
        env=ENV,
        timeout_s=30,
        allow_network=False,
        view=_view(tmp_path),
    )
    assert (result.timed_out, result.exit_code, result.killed_processes) == (False, 5, 0)


def test_a_server_is_frozen_between_calls_and_stopped_with_its_tree(tmp_path: Path) -> None:
    if not probe_layers()["freezer"]["available"]:
        pytest.skip(f"no freezer here: {probe_layers()['freezer']['detail']}")
    server = _start(tmp_path, ["sh", "-c", f"sleep 600 & {ECHO_SERVER}"])
    try:
        assert _line(server, "one") == "got:one\n"
        first = server.end_call()
        assert first is not None and first.empty and first.quarantined == []
        assert server.launch.freezer is not None and server.launch.freezer.frozen()
        tree = server.pids()
        assert len(tree) >= 3  # bwrap, its init, the shell, the sleep
        server.begin_call()
        assert _line(server, "two") == "got:two\n"
        server.end_call()
    finally:
        server.stop()
    assert not [
        pid for pid in tree if psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie"
    ]


def test_a_server_view_goes_stale_when_a_sensitive_file_appears(tmp_path: Path) -> None:
    server = _start(tmp_path, ["sh", "-c", ECHO_SERVER])
    try:
        server.end_call()
        assert not server.view_is_stale()
        (tmp_path / "notes.txt").write_text("not sensitive\n")
        assert not server.view_is_stale()
        (tmp_path / ".env").write_text("SECRET=1\n")
        assert server.view_is_stale()
    finally:
        server.stop()


@pytest.fixture
def state(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A ``ROOST_HOME`` of the test's own, outside the root: where the review quarantines."""
    place = tmp_path_factory.mktemp("state")
    roost_home.protect(str(place))
    yield place
    roost_home.protect(None)


def test_a_server_cannot_write_git_and_a_repository_it_makes_is_quarantined_after_the_call(
    tmp_path: Path, state: Path
) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    plant = "read -r line; echo x > .git/commondir; git init -q sub; echo done"
    server = _start(tmp_path, ["sh", "-c", plant])
    try:
        server.end_call()
        server.begin_call()
        assert _line(server, "go") == "done\n"
        report = server.end_call()
        assert report is not None
        assert [(q.path, q.reason) for q in report.quarantined] == [("sub/.git", "git_dir_created")]
        assert report.quarantined[0].moved_to is not None
        assert report.quarantined[0].moved_to.startswith(str(state))
    finally:
        server.stop()
    assert not (tmp_path / ".git" / "commondir").exists()
    assert not (tmp_path / "sub" / ".git").exists()


def test_a_launch_closes_its_cgroups(tmp_path: Path) -> None:
    if not probe_layers()["pids_limit"]["available"]:
        pytest.skip("no pids cgroup here")
    launch = prepare(
        view=_view(tmp_path), allow_network=False, limits=Limits(), timeout_s=5, shape="serve"
    )
    groups = [g.path for g in (launch.pids, launch.freezer) if g is not None]
    assert groups and all(os.path.isdir(g) for g in groups)
    launch.close()
    assert not any(os.path.isdir(g) for g in groups)
    assert cgroups.sweep_stale() == {}


def test_a_launch_warms_the_cgroup_lock_until_its_process_joined(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The join shell's move into the cgroup waits for an RCU grace period when the kernel's
    # migration lock is cold (8-13 ms here); the launcher keeps it warm while it prepares.
    if not probe_layers()["pids_limit"]["available"]:
        pytest.skip("no pids cgroup here")
    started: list[tuple[str, Callable[[], bool], threading.Event]] = []
    real = cgroupfs.keep_warm

    def spy(directory: str, joined: Callable[[], bool], stop: threading.Event) -> threading.Thread:
        started.append((directory, joined, stop))
        return real(directory, joined, stop)

    monkeypatch.setattr(cgroupfs, "keep_warm", spy)
    own = cgroupfs.own_cgroups()
    launch = prepare(view=_view(tmp_path), allow_network=False, limits=LIMITS, timeout_s=5)
    proc: subprocess.Popen[bytes] | None = None
    try:
        [(directory, joined, stop)] = started
        parent = cgroupfs.parent_dir("pids")
        assert parent is not None
        assert os.path.normpath(directory) == os.path.normpath(parent[0])  # where it already is
        assert not joined()
        proc = launch.spawn(
            ["true"], cwd=str(tmp_path), env=ENV, stdin=None, stdout=None, stderr=None
        )
        deadline = time.monotonic() + 20
        while not joined() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert joined()  # the child is in the run's cgroup: the warm-up ends
    finally:
        launch.close()
        if proc is not None:
            proc.kill()
            proc.wait()
    assert stop.is_set()
    assert cgroupfs.own_cgroups() == own  # it moved this process nowhere


def test_the_join_shell_sets_the_rlimits_without_a_prlimit_exec(tmp_path: Path) -> None:
    if probe_layers()["rlimits"]["via"] != "prlimit":
        pytest.skip("no prlimit here: the rlimits are set before exec")
    limits = Limits(cpu_seconds=60, file_size_bytes=1 << 20, open_files=77)
    launch = prepare(view=_view(tmp_path), allow_network=False, limits=limits, timeout_s=5)
    launch.close()
    assert not any(os.path.basename(a) == "prlimit" for a in launch.prefix)
    result = run_command(
        "cat /proc/self/limits",
        cwd=str(tmp_path),
        env=ENV,
        timeout_s=20,
        allow_network=False,
        view=_view(tmp_path),
        limits=limits,
    )
    names = {
        "Max cpu time": "RLIMIT_CPU",
        "Max address space": "RLIMIT_AS",
        "Max file size": "RLIMIT_FSIZE",
        "Max open files": "RLIMIT_NOFILE",
        "Max core file size": "RLIMIT_CORE",
    }
    seen = {}
    for line in result.stdout.splitlines():
        for label, name in names.items():
            if line.startswith(label):
                soft, hard = line[len(label) :].split()[:2]
                seen[getattr(resource, name)] = (int(soft), int(hard))
    assert seen == rlimit_values(limits, 5)


def test_without_a_freezer_a_server_runs_between_calls_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(DISABLE_ENV, "freezer")
    assert probe_layers()["freezer"]["available"] is False
    server = _start(tmp_path, ["sh", "-c", ECHO_SERVER])
    try:
        assert not server.frozen_between_calls
        report = server.end_call()
        assert report is not None and report.quarantined == []
        assert _line(server, "between") == "got:between\n"  # it still runs
    finally:
        server.stop()
    assert not server.alive()


LAUNCH_AND_WAIT = """
import os, subprocess, sys, time
from runtime.guard.sandbox.launcher import Limits, prepare
from runtime.guard.sandbox.limits import rlimit_values
from runtime.guard.sandbox.layers import View
root = sys.argv[1]
view = View(writable=(root,), cwd=root)
launch = prepare(view=view, allow_network=False, limits=Limits(max_processes=16), timeout_s=60)
assert "setpriv" not in " ".join(launch.prefix), launch.prefix  # bwrap's --die-with-parent
proc = launch.spawn(["sleep", "600"], cwd=root, env={"PATH": "/usr/bin:/bin"},
                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
deadline = time.monotonic() + 30
while len(launch.cgroup_pids()) < 4 and time.monotonic() < deadline:  # bwrap, init, sh, sleep
    time.sleep(0.01)
print(" ".join(map(str, launch.cgroup_pids())), flush=True)
time.sleep(600)
"""


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_a_sandbox_dies_with_the_process_that_started_it(tmp_path: Path) -> None:
    # The parent-death signal is bubblewrap's own --die-with-parent (no setpriv exec): when
    # the runner is SIGKILLed mid-run, every process of the sandbox dies with it.
    if not probe_layers()["pids_limit"]["available"]:
        pytest.skip("no pids cgroup to list the sandbox's processes by")
    runner = subprocess.Popen(
        [sys.executable, "-c", LAUNCH_AND_WAIT, str(tmp_path)],
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])},
    )
    try:
        assert runner.stdout is not None
        with runner.stdout:
            pids = [int(p) for p in runner.stdout.readline().split()]
        assert len(pids) >= 4 and all(psutil.pid_exists(p) for p in pids)
        runner.kill()
        runner.wait()
        # The kernel sends the parent-death SIGKILL at once; 10 s is for a busy machine.
        # (Not longer: this host's init may reap orphans on its own.)
        deadline = time.monotonic() + 10
        while [p for p in pids if _running(p)] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not [p for p in pids if _running(p)]
    finally:
        runner.kill()
        runner.wait()
        cgroups.sweep_stale()  # what a failed run left: its owner is gone


LEAVE_CGROUP = (
    "for f in $(find /sys/fs/cgroup -name cgroup.procs 2>/dev/null); do "
    'if (echo $$ > "$f") 2>/dev/null; then echo "moved:$f"; fi; done; '
    "unshare -m true 2>/dev/null && echo unshared; cat /proc/self/cgroup"
)


def test_no_process_of_a_sealed_sandbox_can_leave_its_cgroup(tmp_path: Path) -> None:
    # A sealed run's processes are tracked by its cgroup alone (no walk of /proc while it
    # runs): no cgroup.procs file is writable in the view, nothing can be remounted.
    launch = prepare(view=_view(tmp_path), allow_network=False, limits=LIMITS, timeout_s=20)
    try:
        if not launch.cgroup_complete or "seccomp" not in launch.layers:
            pytest.skip("no pids cgroup or no seccomp filter here: the run is walked")
        assert launch.cgroup_sealed
        group = os.path.basename(launch.pids.path) if launch.pids else ""
    finally:
        launch.close()
    result = run_command(
        LEAVE_CGROUP,
        cwd=str(tmp_path),
        env=ENV,
        timeout_s=20,
        allow_network=False,
        view=_view(tmp_path),
        limits=LIMITS,
    )
    assert "moved:" not in result.stdout and "unshared" not in result.stdout
    assert group.split("-")[0] in result.stdout  # still in a call cgroup (roost-...)
