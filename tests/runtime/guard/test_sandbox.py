"""The command sandbox (``guard.sandbox.layers``, ``proctree``): layers, limits, process trees.

Tests run in three modes: ``bwrap`` and ``unshare`` (the kernel layers; skipped with the
probe's reason where they cannot work on this machine) and ``fallback`` (both forced off
with ``ROOST_SANDBOX_DISABLE``, so only rlimits, sessions and the psutil walk remain).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from runtime.errors import ToolError
from runtime.guard.sandbox.layers import DISABLE_ENV, disabled_layers, probe_layers
from runtime.guard.sandbox.run import CommandResult, Limits, run_command
from tests.runtime.sandbox_helpers import (
    CountingServer,
    counting_server,
    no_survivors,
    survivors,
    unique_sleep,
    wait_until,
)

DISABLE_FOR_MODE = {"bwrap": "", "unshare": "bwrap", "fallback": "bwrap,unshare"}
BASE_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}


@pytest.fixture(params=["bwrap", "unshare", "fallback"])
def mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    name: str = request.param
    monkeypatch.setenv(DISABLE_ENV, DISABLE_FOR_MODE[name])
    if name != "fallback":
        layer = probe_layers()[name]
        if not layer["available"]:
            pytest.skip(f"{name} cannot isolate on this machine: {layer['detail']}")
    return name


@pytest.fixture
def kernel_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The best kernel layer here (bwrap, else unshare); skipped when neither works."""
    monkeypatch.delenv(DISABLE_ENV, raising=False)
    via = probe_layers()["netns"]["via"]
    if via is None:
        layers = probe_layers()
        pytest.skip(
            "no network namespace here: bwrap: "
            f"{layers['bwrap']['detail']}; unshare: {layers['unshare']['detail']}"
        )
    return str(via)


def run(
    tmp_path: Path,
    command: str | list[str],
    *,
    allow_network: bool = True,
    timeout_s: float = 20.0,
    cancel: threading.Event | None = None,
    max_output_bytes: int = 262144,
    limits: Limits | None = None,
) -> CommandResult:
    root = tmp_path / "root"
    root.mkdir(exist_ok=True)
    return run_command(
        command,
        cwd=str(root),
        env=BASE_ENV,
        timeout_s=timeout_s,
        allow_network=allow_network,
        cancel=cancel,
        max_output_bytes=max_output_bytes,
        limits=limits,
        writable_paths=[str(root)],
    )


# --- probing -----------------------------------------------------------------------------


def test_the_probe_reports_every_layer_with_its_availability() -> None:
    layers = probe_layers()
    assert set(layers) == {
        "bwrap",
        "unshare",
        "netns",
        "pidns",
        "mount_isolation",
        "openat2",
        "rlimits",
        "pdeathsig",
        "pids_limit",
        "memory_limit",
        "cpu_limit",
        "seccomp",
        "no_new_privs",
        "proc_masks",
        "tmpfs_size",
        "freezer",
        "process_group_kill",
        "process_tree_kill",
    }
    assert all(isinstance(entry["available"], bool) for entry in layers.values())
    assert layers["rlimits"]["available"] is True
    assert layers["process_tree_kill"]["available"] is True


def test_disabled_layers_are_reported_off_with_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DISABLE_ENV, " bwrap , UNSHARE,prlimit")
    assert disabled_layers() == frozenset({"bwrap", "unshare", "prlimit"})
    layers = probe_layers()
    assert layers["bwrap"] == {"available": False, "detail": f"disabled by {DISABLE_ENV}"}
    assert layers["unshare"]["available"] is False
    assert layers["netns"] == {"available": False, "via": None}
    assert layers["pidns"] == {"available": False, "via": None}
    assert layers["rlimits"]["via"] == "preexec"


def test_the_probe_result_is_a_copy_callers_cannot_corrupt() -> None:
    probe_layers()["bwrap"]["available"] = "corrupted"
    assert isinstance(probe_layers()["bwrap"]["available"], bool)


# --- isolation decisions --------------------------------------------------------------------


def test_without_any_namespace_a_command_denied_egress_fails_closed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(DISABLE_ENV, "bwrap,unshare")
    marker = tmp_path / "ran"
    with pytest.raises(ToolError) as info:
        run(tmp_path, f"touch {marker}", allow_network=False)
    assert info.value.code == "isolation_unavailable"
    assert info.value.details == {"layer": "netns"}
    assert not marker.exists()


def test_without_any_namespace_a_command_allowed_egress_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(DISABLE_ENV, "bwrap,unshare")
    result = run(tmp_path, "echo ran", allow_network=True)
    assert (result.exit_code, result.stdout) == (0, "ran\n")
    assert "netns" not in result.layers and "pidns" not in result.layers


@pytest.fixture
def server() -> Iterator[CountingServer]:
    with counting_server() as running:
        yield running


def test_a_command_in_a_network_namespace_cannot_reach_a_loopback_server(
    tmp_path: Path, kernel_mode: str, server: CountingServer
) -> None:
    result = run(tmp_path, [sys.executable, "-c", server.fetch_code()], allow_network=False)
    assert result.exit_code == 1
    assert "netns" in result.layers
    assert server.hits == 0


@pytest.mark.parametrize("disable", ["bwrap", "bwrap,unshare"])
def test_a_command_allowed_egress_reaches_the_loopback_server(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    server: CountingServer,
    disable: str,
) -> None:
    monkeypatch.setenv(DISABLE_ENV, disable)
    result = run(tmp_path, [sys.executable, "-c", server.fetch_code()], allow_network=True)
    assert (result.exit_code, server.hits) == (0, 1)


@pytest.fixture
def bwrap_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(DISABLE_ENV, raising=False)
    if not probe_layers()["bwrap"]["available"]:
        pytest.skip(f"bwrap cannot run here: {probe_layers()['bwrap']['detail']}")


@pytest.fixture
def dir_outside_tmp() -> Iterator[Path]:
    """A directory outside the temp dir (which bubblewrap replaces with a private one)."""
    path = Path(tempfile.mkdtemp(prefix="roost-test-", dir=Path.home()))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def test_under_bubblewrap_the_system_is_read_only_and_home_is_not_there(
    tmp_path: Path, bwrap_only: None, dir_outside_tmp: Path
) -> None:
    script = f"touch inside; touch /usr/x; ls {dir_outside_tmp}; touch {dir_outside_tmp}/x"
    result = run(tmp_path, script, allow_network=False)
    assert result.exit_code == 1
    lines = result.stderr.splitlines()
    assert lines[0] == "touch: cannot touch '/usr/x': Read-only file system"
    assert lines[1].endswith(f"cannot access '{dir_outside_tmp}': No such file or directory")
    assert (tmp_path / "root" / "inside").exists()
    assert not (dir_outside_tmp / "x").exists()
    assert "mount_isolation" in result.layers


def test_under_bubblewrap_the_temp_dir_is_private_to_the_command(
    tmp_path: Path, bwrap_only: None
) -> None:
    secret = tmp_path / "host-only.txt"
    secret.write_text("host")
    scratch = f"/tmp/roost-scratch-{uuid.uuid4().hex}"
    result = run(tmp_path, f"cat {secret}; touch {scratch} && echo wrote", allow_network=False)
    assert "No such file or directory" in result.stderr
    assert result.stdout == "wrote\n"
    assert not Path(scratch).exists()


@pytest.mark.parametrize("kernel", ["bwrap", "unshare"])
def test_a_command_in_a_namespace_has_no_capabilities(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kernel: str
) -> None:
    monkeypatch.setenv(DISABLE_ENV, DISABLE_FOR_MODE[kernel])
    if not probe_layers()[kernel]["available"]:
        pytest.skip(f"{kernel} cannot isolate here: {probe_layers()[kernel]['detail']}")
    result = run(tmp_path, "grep -E '^Cap(Prm|Eff)' /proc/self/status", allow_network=False)
    assert result.stdout == "CapPrm:\t0000000000000000\nCapEff:\t0000000000000000\n"


def test_as_root_unshare_is_refused_without_setpriv_to_drop_capabilities(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if os.geteuid() != 0:
        pytest.skip("only root keeps capabilities inside unshare's namespaces")
    monkeypatch.setenv(DISABLE_ENV, "bwrap,setpriv")
    assert probe_layers()["unshare"] == {
        "available": False,
        "detail": "as root, unshare needs setpriv to drop capabilities",
        "user_namespace": False,
        "drop_caps": False,
    }


# --- the process -------------------------------------------------------------------------------


def test_stdin_is_closed_so_cat_returns_at_once_with_nothing(tmp_path: Path, mode: str) -> None:
    result = run(tmp_path, "cat", timeout_s=20.0)
    assert (result.exit_code, result.stdout, result.timed_out) == (0, "", False)


def test_a_run_whose_preparation_took_its_whole_time_starts_nothing(
    tmp_path: Path, mode: str
) -> None:
    """The timeout counts from the call: with none left at the spawn, no process starts."""
    marker = tmp_path / "root" / "ran"
    result = run(tmp_path, f"touch {marker}", timeout_s=0.0)
    assert (result.timed_out, result.cancelled, result.killed_processes) == (True, False, 0)
    assert result.exit_code == 137
    assert not marker.exists()


def test_exit_status_and_both_streams_are_returned(tmp_path: Path, mode: str) -> None:
    result = run(tmp_path, "echo out; echo err >&2; exit 7")
    assert (result.exit_code, result.stdout, result.stderr) == (7, "out\n", "err\n")


def test_a_command_killed_by_a_signal_reports_128_plus_the_signal(
    tmp_path: Path, mode: str
) -> None:
    assert run(tmp_path, "kill -TERM $$").exit_code == 143


def test_an_argv_command_runs_without_a_shell(tmp_path: Path, mode: str) -> None:
    result = run(tmp_path, ["echo", "$HOME", "; ls"])
    assert result.stdout == "$HOME ; ls\n"


def test_a_missing_program_exits_127(tmp_path: Path, mode: str) -> None:
    result = run(tmp_path, ["no-such-program-roost"])
    assert result.exit_code == 127


def test_the_environment_is_exactly_what_was_given(tmp_path: Path, mode: str) -> None:
    result = run(tmp_path, [sys.executable, "-c", "import os; print(sorted(os.environ))"])
    names = eval(result.stdout)
    assert set(names) - {"ROOST_COMMAND_ID", "PWD", "SHLVL", "_"} == {"PATH", "LANG"}


@pytest.mark.parametrize("disable", ["", "prlimit"])
def test_writing_past_the_file_size_limit_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, disable: str
) -> None:
    monkeypatch.setenv(DISABLE_ENV, f"bwrap,unshare,{disable}")
    code = "open('big', 'wb').write(b'x' * 300000)"
    result = run(tmp_path, [sys.executable, "-c", code], limits=Limits(file_size_bytes=100000))
    assert result.exit_code == 1
    assert "File too large" in result.stderr
    assert (tmp_path / "root" / "big").stat().st_size == 100000


def test_the_open_files_limit_applies(tmp_path: Path, mode: str) -> None:
    result = run(tmp_path, "ulimit -n", limits=Limits(open_files=64))
    assert result.stdout == "64\n"


@pytest.mark.slow
def test_output_beyond_the_cap_is_dropped_and_flagged_without_blocking(
    tmp_path: Path, mode: str
) -> None:
    command = "head -c 3000000 /dev/zero | tr '\\0' a; head -c 2000000 /dev/zero | tr '\\0' b >&2"
    result = run(tmp_path, command, max_output_bytes=1000)
    assert result.exit_code == 0
    assert (result.stdout, result.stderr) == ("a" * 1000, "b" * 1000)
    assert result.stdout_truncated and result.stderr_truncated


def test_a_timeout_kills_the_whole_tree_including_a_setsid_grandchild(
    tmp_path: Path, mode: str
) -> None:
    marker = unique_sleep()
    result = run(tmp_path, f"sleep {marker} & setsid sleep {marker} & wait", timeout_s=1.0)
    assert result.timed_out and result.exit_code == 137
    assert result.killed_processes == 3  # the shell and both sleeps
    assert no_survivors(marker)


def test_a_timeout_kills_an_orphaned_double_forked_daemon(tmp_path: Path, mode: str) -> None:
    marker = unique_sleep()
    result = run(tmp_path, f"(setsid sleep {marker} &); sleep {marker}; true", timeout_s=1.0)
    assert result.timed_out
    assert result.killed_processes == 3  # the shell, its sleep, the orphaned daemon
    assert no_survivors(marker)


def test_the_sandbox_s_preparation_counts_against_the_timeout(
    tmp_path: Path, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One clock with the runner waiting on the call: a slow preparation (a loaded
    machine) leaves the command less time, so its kill comes within the runner's grace."""
    import runtime.guard.sandbox.run as run_module

    prepare, supervise = run_module.prepare, run_module.supervise
    given: list[float] = []

    def slow_prepare(**kwargs: Any) -> Any:
        time.sleep(0.6)
        return prepare(**kwargs)

    def spy(*args: Any, **kwargs: Any) -> Any:
        given.append(kwargs["timeout_s"])
        return supervise(*args, **kwargs)

    monkeypatch.setattr(run_module, "prepare", slow_prepare)
    monkeypatch.setattr(run_module, "supervise", spy)
    marker = unique_sleep()
    result = run(tmp_path, f"sleep {marker}", timeout_s=1.0)
    assert result.timed_out
    [left] = given
    assert left <= 0.4  # 1.0 s from the call, less the 0.6 s the preparation took
    assert no_survivors(marker)


def test_a_run_cancelled_before_it_starts_spawns_nothing(tmp_path: Path, mode: str) -> None:
    cancel = threading.Event()
    cancel.set()
    result = run(tmp_path, "touch ran", cancel=cancel)
    assert (result.cancelled, result.killed_processes, result.timed_out) == (True, 0, False)
    assert not (tmp_path / "root" / "ran").exists()


def test_cancelling_kills_the_tree_and_reports_cancelled(tmp_path: Path, mode: str) -> None:
    marker = unique_sleep()
    cancel = threading.Event()
    started = tmp_path / "root" / "started"
    results: list[CommandResult] = []
    command = f"sleep {marker} & setsid sleep {marker} & touch started; wait"
    worker = threading.Thread(
        target=lambda: results.append(run(tmp_path, command, cancel=cancel, timeout_s=60.0))
    )
    worker.start()
    assert wait_until(started.exists, 10.0)
    cancel.set()
    worker.join(10)
    assert results[0].cancelled and not results[0].timed_out
    assert results[0].killed_processes == 3
    assert no_survivors(marker)


def test_background_children_left_by_a_finished_command_are_killed_and_counted(
    tmp_path: Path, mode: str
) -> None:
    marker = unique_sleep()
    result = run(tmp_path, f"sleep {marker} & setsid sleep {marker} & echo done")
    assert (result.exit_code, result.stdout) == (0, "done\n")
    assert result.killed_processes == 2
    assert no_survivors(marker)


def test_a_command_that_leaves_nothing_behind_kills_nothing(tmp_path: Path, mode: str) -> None:
    result = run(tmp_path, "cat /dev/null | grep -c x; true")
    assert result.killed_processes == 0


def test_the_layers_used_are_reported(tmp_path: Path, mode: str) -> None:
    layers = run(tmp_path, "true", allow_network=mode == "fallback").layers
    expected_kernel = {"bwrap": {"bwrap", "netns", "pidns"}, "unshare": {"unshare", "netns"}}
    assert expected_kernel.get(mode, set()) <= set(layers)
    assert {"rlimits", "process_group_kill", "process_tree_kill"} <= set(layers)
    if mode == "fallback":
        assert not {"bwrap", "unshare", "netns", "pidns"} & set(layers)


def test_the_test_leaves_no_sandbox_process_behind() -> None:
    me = psutil.Process(os.getpid())
    assert [p for p in me.children(recursive=True) if p.status() != psutil.STATUS_ZOMBIE] == []


def test_concurrent_commands_only_clean_up_their_own_processes(tmp_path: Path, mode: str) -> None:
    long_marker, short_marker = unique_sleep(), unique_sleep()
    cancel = threading.Event()
    results: list[CommandResult] = []
    started = tmp_path / "root" / "long-started"
    worker = threading.Thread(
        target=lambda: results.append(
            run(tmp_path, f"touch {started}; sleep {long_marker}", cancel=cancel, timeout_s=60.0)
        )
    )
    worker.start()
    try:
        assert wait_until(started.exists, 10.0)
        short = run(tmp_path, f"sleep {short_marker} & echo done")
        assert short.killed_processes == 1
        assert no_survivors(short_marker)
        assert survivors(long_marker) != []
    finally:
        cancel.set()
        worker.join(10)
    assert results[0].cancelled
    assert no_survivors(long_marker)
