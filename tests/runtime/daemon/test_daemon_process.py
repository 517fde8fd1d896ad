"""A real daemon process: start, stop, signals, stale files, one daemon per home."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys

import psutil
import pytest

from runtime.client import Client
from runtime.daemon.control import daemon_pid, daemon_status, start_daemon, stop_daemon
from runtime.daemon.processes import daemon_processes
from runtime.errors import DaemonUnreachableError
from runtime.guard.home.pidfile import DaemonAlreadyRunningError
from tests.runtime.daemon_helpers import (
    daemon_env,
    process_gone,
    run_roost,
    running_daemon,
    start_via_cli,
    stop_and_check,
    wait_for,
)


@pytest.fixture
def home(tmp_path) -> str:
    return str(tmp_path / "home")


def test_daemon_start_returns_once_the_daemon_answers(home) -> None:
    with running_daemon(home) as pid:
        with Client.connect(home) as c:
            assert c.ping() == {"pong": True, "pid": pid}
        assert daemon_pid(home) == pid
        with open(os.path.join(home, "roost.pid")) as f:
            assert f.read() == f"{pid}\n"


def test_the_daemon_logs_json_lines_to_its_log_file(home) -> None:
    with running_daemon(home) as pid, open(os.path.join(home, "logs", "daemon.log")) as f:
        lines = [json.loads(line) for line in f if line.startswith("{")]
    started = [line for line in lines if line["event"] == "daemon_started"]
    assert started[0]["pid"] == pid
    assert started[0]["level"] == "info"


def test_sigterm_stops_the_daemon_cleanly(home) -> None:
    pid = start_via_cli(home)
    try:
        os.kill(pid, signal.SIGTERM)
        wait_for(lambda: process_gone(pid), 10, "the daemon to exit")
        assert not os.path.exists(os.path.join(home, "roost.sock"))
        assert not os.path.exists(os.path.join(home, "roost.pid"))
        with open(os.path.join(home, "logs", "daemon.log")) as f:
            assert '"reason":"SIGTERM"' in f.read()
    finally:
        stop_and_check(home, pid)


def test_daemon_stop_shuts_it_down_and_leaves_no_file(home) -> None:
    pid = start_via_cli(home)
    done = run_roost("daemon", "stop", "--home", home)
    assert done.returncode == 0
    assert done.stdout == f"daemon stopped (pid {pid}) in {home}\n"
    assert process_gone(pid)
    assert sorted(os.listdir(home)) == ["logs"]


def test_daemon_stop_when_none_runs_says_so_and_exits_0(home) -> None:
    done = run_roost("daemon", "stop", "--home", home)
    assert (done.returncode, done.stdout, done.stderr) == (
        0,
        f"daemon is not running in {home}\n",
        "",
    )


@pytest.mark.slow
def test_a_second_daemon_on_the_same_home_is_refused(home) -> None:
    with running_daemon(home) as pid:
        again = run_roost("daemon", "start", "--home", home)
        direct = subprocess.run(
            [sys.executable, "-m", "runtime.daemon", "--home", home],
            env=daemon_env(),
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        assert daemon_pid(home) == pid
    assert again.returncode == 1
    assert again.stderr == (
        f"roost: daemon_already_running: daemon already running (pid {pid}) in {home}\n"
    )
    assert direct.returncode == 1
    assert f"daemon already running (pid {pid})" in direct.stderr


def test_a_stale_pid_file_and_socket_from_a_crash_are_cleaned_at_start(home) -> None:
    os.makedirs(home, mode=0o700)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    with open(os.path.join(home, "roost.pid"), "w") as f:
        f.write(f"{dead.pid}\n")
    leftover = socket.socket(socket.AF_UNIX)
    leftover.bind(os.path.join(home, "roost.sock"))
    leftover.close()
    assert daemon_pid(home) is None
    assert daemon_status(home)["stale_files"] == [
        os.path.join(home, "roost.sock"),
        os.path.join(home, "roost.pid"),
    ]
    with running_daemon(home), open(os.path.join(home, "logs", "daemon.log")) as f:
        events = [json.loads(line) for line in f if line.startswith("{")]
    found = {e["event"]: e for e in events}
    assert found["stale_pid_file_found"]["stale_pid"] == dead.pid
    assert found["stale_socket_removed"]["path"] == os.path.join(home, "roost.sock")


@pytest.mark.slow
def test_a_sigkilled_daemon_leaves_files_that_the_next_start_takes_over(home) -> None:
    pid = start_via_cli(home)
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: process_gone(pid), 10, "the daemon to die")
    assert os.path.exists(os.path.join(home, "roost.sock"))
    status = run_roost("--json", "daemon", "status", "--home", home)
    assert status.returncode == 3
    assert json.loads(status.stdout)["running"] is False
    with running_daemon(home) as new_pid, Client.connect(home) as c:
        assert c.status()["pid"] == new_pid


def test_daemon_status_reports_a_running_daemon(home) -> None:
    with running_daemon(home) as pid:
        done = run_roost("daemon", "status", "--home", home, "--json")
    status = json.loads(done.stdout)
    assert done.returncode == 0
    assert (status["running"], status["responding"], status["pid"]) == (True, True, pid)
    assert status["projects"] == 0


def test_a_daemon_whose_backend_cannot_load_fails_start_with_its_log_line(home) -> None:
    env = daemon_env(ROOST_BACKEND="tests.runtime.no_such_module:create")
    done = run_roost("daemon", "start", "--home", home, env=env)
    assert done.returncode == 3
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith(
        "roost: daemon_unreachable: the daemon exited with status 1 before answering: "
        "roost: daemon_failed: cannot import backend module"
    )
    assert daemon_pid(home) is None
    assert not os.path.exists(os.path.join(home, "roost.sock"))


def test_start_daemon_in_process_returns_the_pid_and_stop_reaps_it(home) -> None:
    pid = start_daemon(home, env=daemon_env())
    try:
        with pytest.raises(DaemonAlreadyRunningError) as info:
            start_daemon(home, env=daemon_env())
        assert info.value.details == {"pid": pid, "home": home}
    finally:
        assert stop_daemon(home) is True
    assert not psutil.pid_exists(pid)
    assert stop_daemon(home) is False


@pytest.mark.slow
def test_daemon_processes_finds_the_detached_daemon_of_a_home(home, tmp_path) -> None:
    other = str(tmp_path / "other")
    with running_daemon(home) as pid, running_daemon(other) as other_pid:
        assert [p.pid for p in daemon_processes(home)] == [pid]
        assert [p.pid for p in daemon_processes(other)] == [other_pid]
    assert daemon_processes(home) == []


def test_a_daemon_that_will_not_stop_is_killed_and_its_files_removed(home) -> None:
    pid = start_daemon(home, env=daemon_env(ROOST_FAKE_CLOSE_HANG="1"))
    try:
        assert stop_daemon(home, timeout_s=0.5) is True
        assert process_gone(pid)
        assert sorted(os.listdir(home)) == ["logs"]
    finally:
        stop_and_check(home, pid)


def test_the_foreground_daemon_stops_on_sigint(home) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "runtime.cli", "daemon", "start", "--foreground", "--home", home],
        env=daemon_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(lambda: _answers(home), 20, "the foreground daemon to answer")
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0
    assert "daemon_stopped" in err
    assert sorted(os.listdir(home)) == []


def _answers(home: str) -> bool:
    try:
        with Client.connect(home) as c:
            return bool(c.ping()["pong"])
    except DaemonUnreachableError:
        return False
