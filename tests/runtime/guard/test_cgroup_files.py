"""Where a run's cgroups are made and what is written in them, on cgroup v1 and v2.

The hierarchies are given (``mounts`` and ``own_cgroups`` replaced): every case of the
choice of a parent, and every limit file, without a writable cgroup filesystem.
"""

from __future__ import annotations

import os
import resource
import subprocess
import threading
from pathlib import Path

import pytest

from runtime.guard.sandbox import cgroupfs, cgroups
from runtime.guard.sandbox.cgroupfs import Controller
from runtime.guard.sandbox.cgroups import CgroupLimits, _limit_files
from runtime.guard.sandbox.limits import ulimit_script
from tests.runtime.daemon_helpers import wait_for

LIMITS = CgroupLimits(max_pids=7, memory_bytes=1024, cpu_cores=1.5)


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_the_pids_limit_is_one_file_on_either_version(version: str) -> None:
    assert _limit_files("pids", version, LIMITS) == [("pids.max", "7", True)]


def test_the_memory_limit_keeps_swap_out_on_either_version() -> None:
    assert _limit_files("memory", "v1", LIMITS) == [
        ("memory.limit_in_bytes", "1024", True),
        ("memory.memsw.limit_in_bytes", "1024", False),
    ]
    assert _limit_files("memory", "v2", LIMITS) == [
        ("memory.max", "1024", True),
        ("memory.swap.max", "0", False),
    ]


def test_the_cpu_limit_is_a_quota_of_the_period_with_a_floor() -> None:
    assert _limit_files("cpu", "v1", LIMITS) == [
        ("cpu.cfs_period_us", "100000", True),
        ("cpu.cfs_quota_us", "150000", True),
    ]
    assert _limit_files("cpu", "v2", LIMITS) == [("cpu.max", "150000 100000", True)]
    tiny = CgroupLimits(max_pids=1, cpu_cores=0.001)
    assert _limit_files("cpu", "v2", tiny) == [("cpu.max", "1000 100000", True)]


@pytest.mark.parametrize("controller", ["memory", "cpu"])
@pytest.mark.parametrize("version", ["v1", "v2"])
def test_a_limit_not_asked_for_writes_nothing(controller: Controller, version: str) -> None:
    assert _limit_files(controller, version, CgroupLimits(max_pids=1)) == []


def _hierarchy(
    monkeypatch: pytest.MonkeyPatch,
    mounts: list[tuple[str, str, set[str]]],
    own: dict[str, str],
) -> None:
    monkeypatch.setattr(cgroupfs, "mounts", lambda: mounts)
    monkeypatch.setattr(cgroupfs, "own_cgroups", lambda: own)


def test_a_v1_hierarchy_of_the_controller_comes_first(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    v2 = tmp_path / "unified"
    (v2 / "me").mkdir(parents=True)
    (v2 / "me" / "cgroup.subtree_control").write_text("pids memory\n")
    mounts = [
        (str(v2), "cgroup2", set()),
        (str(tmp_path / "pids"), "cgroup", {"rw", "pids"}),
        (str(tmp_path / "freezer"), "cgroup", {"rw", "freezer"}),
    ]
    _hierarchy(monkeypatch, mounts, {"pids": "/me", "freezer": "/me", "": "/me"})
    assert cgroupfs.parent_dir("pids") == (str(tmp_path / "pids" / "me"), "v1")
    assert cgroupfs.parent_dir("memory") == (str(v2 / "me"), "v2")
    assert cgroupfs.parent_dir("cpu") is None
    assert cgroupfs.freezer_parent() == (str(tmp_path / "freezer" / "me"), "v1")


def test_a_v2_hierarchy_serves_what_it_delegates(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    unreadable = tmp_path / "other"
    v2 = tmp_path / "unified"
    (v2 / "me").mkdir(parents=True)
    (v2 / "me" / "cgroup.subtree_control").write_text("cpu\n")
    mounts = [
        (str(tmp_path / "pids"), "cgroup", {"pids"}),
        (str(unreadable), "cgroup2", set()),
        (str(v2), "cgroup2", set()),
    ]
    _hierarchy(monkeypatch, mounts, {"": "/me"})
    assert cgroupfs.parent_dir("pids") is None
    assert cgroupfs.parent_dir("cpu") == (str(v2 / "me"), "v2")
    assert cgroupfs.freezer_parent() == (str(v2 / "me"), "v2")
    _hierarchy(monkeypatch, mounts, {"pids": "/me"})
    assert cgroupfs.parent_dir("cpu") is None
    assert cgroupfs.freezer_parent() is None


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write any directory")
def test_a_v2_cgroup_this_process_cannot_write_has_no_freezer(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    v2 = tmp_path / "unified"
    (v2 / "me").mkdir(parents=True)
    (v2 / "me").chmod(0o500)
    _hierarchy(monkeypatch, [(str(v2), "cgroup2", set())], {"": "/me"})
    try:
        assert cgroupfs.freezer_parent() is None
    finally:
        (v2 / "me").chmod(0o700)


def test_closing_a_run_kills_what_is_left_and_removes_every_cgroup() -> None:
    available, detail, _ = cgroups.probe()
    if not available:
        pytest.skip(f"no pids cgroup here: {detail}")
    limits = CgroupLimits(max_pids=8, memory_bytes=256 * 1024**2, cpu_cores=1.0)
    group = cgroups.ToolCgroup.create(limits)
    sleeper = subprocess.Popen([*cgroupfs.join_argv(group), "/bin/sleep", "60"])
    try:
        wait_for(lambda: bool(group.pids()), 10, "the sleeper to join")
        group.close()
        assert sleeper.wait(5) == -9
    finally:
        sleeper.kill()
        sleeper.wait()
    assert [d for d in group.dirs.values() if os.path.exists(d)] == []


def test_cgroup_mounts_read_escaped_and_non_utf8_mount_points(tmp_path: Path) -> None:
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_bytes(
        b"30 25 0:26 / /sys/fs/cgroup/my\\040pids rw,nosuid - cgroup cgroup rw,pids\n"
        b"31 25 0:27 / /sys/fs/cgroup/m\xffem rw - cgroup cgroup rw,memory\n"
        b"32 25 0:28 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw,nsdelegate\n"
        b"33 25 0:29 / /proc rw - proc proc rw\n"
    )
    found = cgroupfs.mounts(str(mountinfo))
    assert found == [
        ("/sys/fs/cgroup/my pids", "cgroup", {"rw", "pids"}),
        ("/sys/fs/cgroup/m\udcffem", "cgroup", {"rw", "memory"}),
        ("/sys/fs/cgroup/unified", "cgroup2", {"rw", "nsdelegate"}),
    ]
    assert os.fsencode(found[1][0]) == b"/sys/fs/cgroup/m\xffem"  # the same bytes back


def test_the_warm_up_moves_this_process_where_it_is_until_the_join_came(tmp_path: Path) -> None:
    procs = tmp_path / "cgroup.procs"
    procs.write_text(str(os.getpid()))  # a cgroup this process is in
    asked: list[int] = []

    def joined() -> bool:
        asked.append(1)
        return len(asked) == 3

    thread = cgroupfs.keep_warm(str(tmp_path), joined, threading.Event())
    assert thread is not None
    thread.join(10)
    assert len(asked) == 3  # a write, then one more after each "not yet"
    assert procs.read_text() == str(os.getpid())


def test_the_warm_up_never_writes_to_a_cgroup_this_process_is_not_in(tmp_path: Path) -> None:
    procs = tmp_path / "cgroup.procs"
    procs.write_text("1\n")  # another cgroup: a write would move the daemon into it
    assert cgroupfs.keep_warm(str(tmp_path), lambda: False, threading.Event()) is None
    assert procs.read_text() == "1\n"


def test_the_warm_up_ends_when_stopped_or_refused(tmp_path: Path) -> None:
    stop = threading.Event()
    stop.set()
    asked: list[int] = []
    (tmp_path / "cgroup.procs").write_text(str(os.getpid()))
    stopped = cgroupfs.keep_warm(str(tmp_path), lambda: bool(asked.append(1)), stop)
    assert stopped is not None
    stopped.join(10)
    assert asked == []  # stopped after its first write, without asking
    # A write that fails, with a stop that is not set: the loop gives up at once, without
    # asking whether the join came.
    cgroupfs._warm(
        str(tmp_path / "gone" / "cgroup.procs"), lambda: bool(asked.append(1)), threading.Event()
    )
    assert asked == []


def test_the_rlimits_become_ulimit_commands_only_when_exact() -> None:
    values = {
        resource.RLIMIT_CPU: (31, 32),
        resource.RLIMIT_AS: (1 << 31, 1 << 31),
        resource.RLIMIT_FSIZE: (1 << 30, 1 << 30),
        resource.RLIMIT_CORE: (0, 0),
    }
    assert ulimit_script(values) == (
        "ulimit -t 32 && ulimit -S -t 31 && ulimit -v 2097152 && ulimit -f 2097152 && ulimit -c 0"
    )
    assert ulimit_script({resource.RLIMIT_FSIZE: (100000, 100000)}) is None  # not 512-byte blocks
    assert ulimit_script({resource.RLIMIT_AS: (1000, 1000)}) is None
    assert ulimit_script({resource.RLIMIT_NPROC: (5, 5)}) is None  # no option for it
    assert ulimit_script({resource.RLIMIT_CPU: (5, 4)}) is None


def test_the_rlimits_apply_after_the_join_so_few_open_files_do_not_break_it(
    tmp_path: Path,
) -> None:
    procs = tmp_path / "cgroup.procs"
    procs.write_text("")

    class _Group:
        procs_files = [str(procs)]

    argv = cgroupfs.join_argv(_Group(), first="ulimit -n 8")
    done = subprocess.run([*argv, "/bin/sh", "-c", "ulimit -n"], capture_output=True, check=False)
    assert (done.returncode, done.stdout.strip()) == (0, b"8"), done.stderr
    assert procs.read_text().strip().isdigit()  # the shell joined, then lowered its limits


def test_a_ulimit_that_fails_stops_the_join_with_125(tmp_path: Path) -> None:
    argv = cgroupfs.join_argv(first="ulimit -t 4 && ulimit -S -t 5")  # soft above hard
    done = subprocess.run([*argv, "/bin/echo", "ran"], capture_output=True, check=False)
    assert (done.returncode, done.stdout) == (125, b"")
