"""What a command sees (``guard.sandbox.view``) and the per-run process limit (``cgroups``)."""

from __future__ import annotations

import os
import re
import socket
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime.guard.home import roost_home
from runtime.guard.paths.rules import SensitiveRules
from runtime.guard.review import rootscan
from runtime.guard.review.rootscan import MAX_SCAN_ENTRIES
from runtime.guard.sandbox import cgroupfs, cgroups
from runtime.guard.sandbox.hidden import (
    ROOST_STATE_ENV,
    etc_secrets,
    hidden_state,
    sensitive_files,
)
from runtime.guard.sandbox.layers import DISABLE_ENV, View, probe_layers
from runtime.guard.sandbox.run import run_command

ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}


@pytest.fixture
def bwrap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(DISABLE_ENV, raising=False)
    if not probe_layers()["mount_isolation"]["available"]:
        pytest.skip(f"bwrap cannot run here: {probe_layers()['bwrap']['detail']}")


@pytest.fixture
def hidden() -> Iterator[None]:
    yield
    roost_home.protect(None)


def sh(view: View, command: str) -> tuple[int, str, str]:
    result = run_command(
        command, cwd=view.cwd, env=ENV, timeout_s=20, allow_network=False, view=view
    )
    return result.exit_code, result.stdout, result.stderr


# --- plain rules ------------------------------------------------------------------------


def test_sensitive_files_are_found_at_any_depth_with_the_allowlist_as_exception(
    tmp_path: Path,
) -> None:
    (tmp_path / "app" / "certs").mkdir(parents=True)
    for name in (".env", "app/.ENV.local", "app/certs/server.pem", "app/ok.txt", "keep.pem"):
        (tmp_path / name).write_text("x")
    (tmp_path / "secrets.key").mkdir()
    (tmp_path / "secrets.key" / "inner.txt").write_text("x")
    rules = SensitiveRules([".env", ".env.*", "*.pem", "*.key"], ["keep.pem"])

    assert sensitive_files([str(tmp_path)], rules) == sorted(
        str(tmp_path / n) for n in (".env", "app/.ENV.local", "app/certs/server.pem", "secrets.key")
    )


def test_a_root_too_large_to_scan_is_refused_rather_than_half_hidden(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for i in range(5):
        (tmp_path / f"f{i}").write_text("x")
    monkeypatch.setattr(rootscan, "MAX_SCAN_ENTRIES", 3)
    with pytest.raises(OverflowError, match=r"^more than 3 entries under "):
        sensitive_files([str(tmp_path)], SensitiveRules([".env"]))
    assert MAX_SCAN_ENTRIES == 500_000


def test_etc_secrets_are_the_entries_other_users_cannot_read() -> None:
    found = etc_secrets()
    for path in found:
        mode = os.lstat(path).st_mode
        assert not stat.S_ISLNK(mode) and not mode & stat.S_IROTH, path
    if os.path.exists("/etc/shadow") and not os.stat("/etc/shadow").st_mode & stat.S_IROTH:
        assert "/etc/shadow" in found
    assert "/etc/passwd" not in found


def test_hidden_state_is_the_protected_home_the_profiles_and_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hidden: None
) -> None:
    roost_home.protect(str(tmp_path / "home"))
    monkeypatch.setenv(roost_home.PROFILE_DIR_ENV, str(tmp_path / "profiles"))
    monkeypatch.setenv(ROOST_STATE_ENV, str(tmp_path / "extra"))
    assert hidden_state() == [str(tmp_path / n) for n in ("extra", "home", "profiles")]


# --- the view, through a real bubblewrap ------------------------------------------------


def test_roost_state_inside_a_bound_path_is_hidden_and_not_writable(
    tmp_path: Path, bwrap: None, hidden: None
) -> None:
    root = tmp_path / "root"
    state = root / "state"
    state.mkdir(parents=True)
    (state / "journal.sqlite").write_text("journal")
    roost_home.protect(str(state))
    code, out, err = sh(View(writable=(str(root),), cwd=str(root)), "ls -A state; touch state/x")
    assert (code, out) == (1, "")
    assert "Read-only file system" in err
    assert sorted(os.listdir(state)) == ["journal.sqlite"]


def test_sensitive_files_read_as_nothing_and_other_files_as_themselves(
    tmp_path: Path, bwrap: None
) -> None:
    (tmp_path / ".env").write_text("TOKEN=hidden\n")
    (tmp_path / "a.txt").write_text("visible\n")
    view = View(writable=(str(tmp_path),), cwd=str(tmp_path), sensitive_deny=(".env",))
    code, out, _ = sh(view, "cat a.txt; cat .env")
    assert (code, out) == (1, "visible\n")


def test_a_listening_socket_inside_the_root_is_masked_unless_allowlisted(
    tmp_path: Path, bwrap: None
) -> None:
    path = tmp_path / "dev.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(4)
    probe = (
        "python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); "
        's.connect(sys.argv[1]); print("connected")\' dev.sock'
    )
    try:
        masked = View(writable=(str(tmp_path),), cwd=str(tmp_path))
        code, out, _ = sh(masked, probe)
        assert (code, out) == (1, "")
        allowed = View(writable=(str(tmp_path),), cwd=str(tmp_path), sockets=(str(path),))
        assert sh(allowed, probe)[:2] == (0, "connected\n")
    finally:
        server.close()


def test_extra_read_paths_are_visible_and_read_only(tmp_path: Path, bwrap: None) -> None:
    root, tools = tmp_path / "root", tmp_path / "tools"
    root.mkdir()
    tools.mkdir()
    (tools / "tool.sh").write_text("echo tool\n")
    outside = f"cat {tools}/tool.sh; touch {tools}/x"
    assert sh(View(writable=(str(root),), cwd=str(root)), outside)[1] == ""
    view = View(writable=(str(root),), cwd=str(root), read_only=(str(tools),))
    code, out, err = sh(view, outside)
    assert (code, out) == (1, "echo tool\n")
    assert "Read-only file system" in err


# --- the process limit ------------------------------------------------------------------


def test_a_pids_cgroup_refuses_forks_past_its_limit_and_is_removed() -> None:
    available, detail, _ = cgroups.probe()
    if not available:
        pytest.skip(f"no pids cgroup here: {detail}")
    group = cgroups.ToolCgroup.create(cgroups.CgroupLimits(max_pids=6))
    code = (
        "import os,time\nn=0\nfor i in range(50):\n"
        "    try: pid=os.fork()\n    except OSError: break\n"
        "    if pid==0: os.closerange(0, 3); time.sleep(20); os._exit(0)\n    n+=1\nprint(n)"
    )
    try:
        done = subprocess.run(
            [*cgroupfs.join_argv(group), "/usr/bin/python3", "-c", code],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        assert done.stdout == "5\n"
        assert group.peak_refused() >= 1
        assert len(group.pids()) == 5
    finally:
        group.close()
    assert not os.path.exists(group.path)


def test_a_read_path_over_etc_does_not_uncover_its_secrets(tmp_path: Path, bwrap: None) -> None:
    secrets = [p for p in etc_secrets() if os.path.isfile(p)]
    if not secrets:
        pytest.skip("no /etc file here that other users cannot read")
    view = View(writable=(str(tmp_path),), cwd=str(tmp_path), read_only=("/etc",))
    _code, out, _ = sh(view, f"cat {secrets[0]} | wc -c")
    assert out.strip() == "0"


def _dead_pid() -> int:
    child = subprocess.Popen(["/bin/true"])
    child.wait()
    return child.pid  # a pid that no process has any more


def _home_key(home: Path) -> str:
    roost_home.protect(str(home))
    try:
        return cgroupfs.home_key()
    finally:
        roost_home.protect(None)


def test_the_cgroup_of_a_killed_runner_is_removed_by_the_next_call(
    hidden: None, tmp_path: Path
) -> None:
    available, detail, _ = cgroups.probe()
    if not available:
        pytest.skip(f"no pids cgroup here: {detail}")
    roost_home.protect(str(tmp_path / "home"))  # a home of its own: no other test's cgroups
    group = cgroups.ToolCgroup.create(cgroups.CgroupLimits(max_pids=4))
    parent = os.path.dirname(group.path)
    stale = os.path.join(parent, f"roost-{_dead_pid()}-{cgroupfs.home_key()}-0123456789ab")
    group.close()
    os.mkdir(stale)
    try:
        fresh = cgroups.ToolCgroup.create(cgroups.CgroupLimits(max_pids=4))
        fresh.close()
        assert not os.path.exists(stale)
    finally:
        if os.path.exists(stale):
            os.rmdir(stale)


def test_a_cgroup_is_named_after_its_home_and_only_its_home_sweeps_it(
    hidden: None, tmp_path: Path
) -> None:
    available, detail, _ = cgroups.probe()
    if not available:
        pytest.skip(f"no pids cgroup here: {detail}")
    mine, other = _home_key(tmp_path / "mine"), _home_key(tmp_path / "other")
    assert re.fullmatch(r"[0-9a-f]{12}", mine) and mine != other
    roost_home.protect(str(tmp_path / "mine"))
    assert re.fullmatch(rf"roost-{os.getpid()}-{mine}-[0-9a-f]{{12}}", cgroupfs.fresh_name())
    group = cgroups.ToolCgroup.create(cgroups.CgroupLimits(max_pids=4))
    parent = os.path.dirname(group.path)
    group.close()
    dead = _dead_pid()
    names = {
        "mine, dead owner": f"roost-{dead}-{mine}-0123456789ab",
        "mine, live owner": f"roost-{os.getpid()}-{mine}-0123456789ab",
        "other, dead owner": f"roost-{dead}-{other}-0123456789ab",
        "other, dead owner, empty": f"roost-{dead}-{other}-0123456789ac",
        "unkeyed, dead owner, empty": f"roost-{dead}-0123456789ad",
    }
    for name in names.values():
        os.mkdir(os.path.join(parent, name))
    held = subprocess.Popen(["sleep", "60"])
    cgroupfs.write_control(
        os.path.join(parent, names["other, dead owner"]), "cgroup.procs", str(held.pid)
    )
    try:
        # a runner's sweep: this home's cgroups whose owner is gone; another home's (or an
        # unkeyed) one only when empty, and nothing in one is killed
        assert cgroups.sweep_stale() == {os.path.join(parent, names["mine, dead owner"]): []}
        for gone in ("other, dead owner, empty", "unkeyed, dead owner, empty"):
            assert not os.path.exists(os.path.join(parent, names[gone]))
        # a daemon's start: every cgroup of this home, and still none of another home's
        swept = cgroups.sweep_stale(any_owner=True)
        assert swept == {os.path.join(parent, names["mine, live owner"]): []}
        assert os.path.isdir(os.path.join(parent, names["other, dead owner"]))
        assert held.poll() is None
    finally:
        held.kill()
        held.wait()
        for name in names.values():
            if os.path.exists(os.path.join(parent, name)):
                os.rmdir(os.path.join(parent, name))
