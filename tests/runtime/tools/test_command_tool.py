"""The ``command.run`` tool (runtime.tools.command), called as the ToolRunner calls it."""

from __future__ import annotations

import os
import re
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from events.catalog import (
    SecurityCommandBlocked,
    SecurityEnvDenied,
    ToolChanges,
    ToolChildProcessesTerminated,
)
from runtime.errors import ToolError
from runtime.guard.sandbox.layers import DISABLE_ENV, probe_layers
from runtime.tools.base import ToolContext
from runtime.tools.command import SPECS, TOOL, TOOLS, _fit, command_run
from tests.runtime.sandbox_helpers import (
    CountingServer,
    counting_server,
    no_survivors,
    unique_sleep,
    wait_until,
)


@pytest.fixture
def server() -> Iterator[CountingServer]:
    with counting_server() as running:
        yield running


def make_ctx(root: Path, **options: Any) -> ToolContext:
    opts = {"network_egress_policy": "deny", "tool_env_allowlist": [], **options}
    return ToolContext(root=str(root), options=opts, call_id="call-1", timeout_s=20.0)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "root"
    path.mkdir()
    return path


@pytest.fixture(params=["kernel"])
def mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """``kernel``: bubblewrap's view, egress denied (without it commands are refused)."""
    monkeypatch.delenv(DISABLE_ENV, raising=False)
    if not probe_layers()["mount_isolation"]["available"]:
        pytest.skip("bubblewrap cannot run here: every command is refused")
    return str(request.param)


def ctx_for(mode: str, root: Path, **options: Any) -> ToolContext:
    policy = "deny" if mode == "kernel" else "allow"
    return make_ctx(root, network_egress_policy=policy, **options)


def fail(ctx: ToolContext, args: dict[str, Any]) -> ToolError:
    with pytest.raises(ToolError) as info:
        command_run(ctx, args)
    return info.value


def test_the_tool_is_registered_with_a_strict_schema() -> None:
    assert [spec.name for spec in SPECS] == [TOOL] == list(TOOLS)
    spec = SPECS[0]
    assert spec.runs_commands and not spec.read_only
    assert spec.input_schema["required"] == ["command"]
    assert spec.input_schema["additionalProperties"] is False
    assert set(spec.input_schema["properties"]) == {"command", "cwd", "timeout_ms", "env"}


def test_a_non_zero_exit_is_a_normal_result(root: Path, mode: str) -> None:
    result = command_run(ctx_for(mode, root), {"command": "echo out; echo err >&2; exit 3"})
    assert {k: v for k, v in result.items() if k != "duration_ms"} == {
        "exit_code": 3,
        "stdout": "out\n",
        "stderr": "err\n",
        "stdout_truncated": False,
        "stderr_truncated": False,
    }
    assert isinstance(result["duration_ms"], int)


def test_an_argv_list_runs_directly(root: Path, mode: str) -> None:
    result = command_run(ctx_for(mode, root), {"command": ["printf", "%s|", "a b", "$X"]})
    assert result["stdout"] == "a b|$X|"


def test_a_blocklisted_command_is_refused_before_anything_runs(root: Path, mode: str) -> None:
    ctx = ctx_for(mode, root)
    error = fail(ctx, {"command": "touch ran; s'u'do rm -rf /"})
    assert error.code == "command_blocked"
    assert error.details == {"pattern": "sudo"}
    assert ctx.signals == [SecurityCommandBlocked(pattern="sudo", call_id="call-1")]
    assert not (root / "ran").exists()


def test_an_env_key_not_allowlisted_is_refused_with_a_signal(root: Path, mode: str) -> None:
    ctx = ctx_for(mode, root, tool_env_allowlist=["CI"])
    error = fail(ctx, {"command": "touch ran", "env": {"CI": "1", "SECRET_MODE": "x"}})
    assert error.code == "env_vars_not_allowed"
    assert error.details == {"keys": ["SECRET_MODE"]}
    assert ctx.signals == [
        SecurityEnvDenied(denied_keys=["SECRET_MODE"], tool=TOOL, call_id="call-1")
    ]
    assert not (root / "ran").exists()


def test_ld_preload_is_refused_even_when_allowlisted(root: Path, mode: str) -> None:
    ctx = ctx_for(mode, root, tool_env_allowlist=["LD_PRELOAD"])
    error = fail(ctx, {"command": "true", "env": {"LD_PRELOAD": "/x.so"}})
    assert (error.code, error.details) == ("env_vars_not_allowed", {"keys": ["LD_PRELOAD"]})


def test_an_invalid_env_payload_is_refused_with_its_reason(root: Path, mode: str) -> None:
    ctx = ctx_for(mode, root)
    error = fail(ctx, {"command": "true", "env": {"A": 1}})
    assert (error.code, error.details) == (
        "invalid_env_payload",
        {"reason": "expected_string_values"},
    )
    assert ctx.signals == [
        SecurityEnvDenied(reason="expected_string_values", tool=TOOL, call_id="call-1")
    ]


def test_an_allowlisted_env_key_reaches_the_command(root: Path, mode: str) -> None:
    ctx = ctx_for(mode, root, tool_env_allowlist=["GREETING"])
    result = command_run(ctx, {"command": 'echo "$GREETING"', "env": {"GREETING": "hi"}})
    assert result["stdout"] == "hi\n"


def test_the_daemon_environment_does_not_leak_into_the_command(
    root: Path, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ROOST_TEST_SECRET", "leaked")
    result = command_run(ctx_for(mode, root), {"command": 'echo "[$ROOST_TEST_SECRET]"'})
    assert result["stdout"] == "[]\n"


def test_home_is_a_scratch_directory_removed_after_the_call(root: Path, mode: str) -> None:
    result = command_run(ctx_for(mode, root), {"command": 'touch "$HOME/x" && echo "$HOME"'})
    home = result["stdout"].strip()
    assert result["exit_code"] == 0
    assert home != str(root) and not os.path.exists(home)


def test_cwd_is_resolved_inside_the_root(root: Path, mode: str) -> None:
    (root / "sub").mkdir()
    result = command_run(ctx_for(mode, root), {"command": "pwd", "cwd": "sub"})
    assert result["stdout"] == f"{os.path.realpath(root / 'sub')}\n"


@pytest.mark.parametrize("cwd", ["..", "/", "sub/../../.."])
def test_a_cwd_outside_the_root_is_refused(root: Path, cwd: str) -> None:
    (root / "sub").mkdir()
    error = fail(make_ctx(root), {"command": "true", "cwd": cwd})
    assert (error.code, error.details) == ("outside_root", {"path": cwd})


def test_a_cwd_symlink_pointing_outside_is_refused(root: Path, tmp_path: Path) -> None:
    (root / "link").symlink_to(tmp_path)
    error = fail(make_ctx(root), {"command": "true", "cwd": "link"})
    assert (error.code, error.details) == ("outside_root", {"path": "link"})


def test_a_cwd_that_is_not_a_directory_is_invalid(root: Path) -> None:
    (root / "file").write_text("x")
    error = fail(make_ctx(root), {"command": "true", "cwd": "file"})
    assert error.code == "invalid_tool_args"
    assert error.details["reason"] == "not_a_directory"


@pytest.mark.parametrize(
    "args",
    [{"command": ""}, {"command": []}, {"command": 3}, {"command": "a\x00b"}, {"command": [1]}],
)
def test_a_malformed_command_is_invalid(root: Path, args: dict[str, Any]) -> None:
    error = fail(make_ctx(root), args)
    assert (error.code, error.details["arg"]) == ("invalid_tool_args", "command")


@pytest.mark.parametrize("timeout_ms", [0, -5, "100", True, 1.5])
def test_a_malformed_timeout_is_invalid(root: Path, timeout_ms: object) -> None:
    error = fail(make_ctx(root), {"command": "true", "timeout_ms": timeout_ms})
    assert (error.code, error.details["arg"]) == ("invalid_tool_args", "timeout_ms")


def test_a_timeout_fails_the_call_and_reports_the_killed_processes(root: Path, mode: str) -> None:
    marker = unique_sleep()
    ctx = ctx_for(mode, root)
    error = fail(
        ctx, {"command": f"sleep {marker} & setsid sleep {marker} & wait", "timeout_ms": 800}
    )
    assert error.code == "timeout"
    assert error.details == {"timeout_ms": 800, "killed_processes": 3}
    assert ctx.signals == [
        ToolChildProcessesTerminated(call_id="call-1", reason="timeout", count=3)
    ]
    assert no_survivors(marker)


def test_the_call_timeout_caps_the_requested_timeout(root: Path, mode: str) -> None:
    ctx = ctx_for(mode, root)
    ctx.timeout_s = 0.8
    error = fail(ctx, {"command": f"sleep {unique_sleep()}", "timeout_ms": 60000})
    assert error.code == "timeout"
    assert 700 <= error.details["timeout_ms"] <= 800


def test_cancelling_fails_the_call_as_cancelled(root: Path, mode: str) -> None:
    marker = unique_sleep()
    ctx = ctx_for(mode, root)
    errors: list[ToolError] = []

    def call() -> None:
        try:
            command_run(ctx, {"command": f"sleep {marker} & touch started; wait"})
        except ToolError as e:
            errors.append(e)

    worker = threading.Thread(target=call)
    worker.start()
    assert wait_until((root / "started").exists, 10.0)
    ctx.cancelled.set()
    worker.join(10)
    assert errors[0].code == "conversation_cancelled"
    killed = [s for s in ctx.signals if isinstance(s, ToolChildProcessesTerminated)]
    assert killed == [ToolChildProcessesTerminated(call_id="call-1", reason="cancel", count=2)]
    changes = [s for s in ctx.signals if isinstance(s, ToolChanges)]
    assert [[c["path"] for c in s.created] for s in changes] == [["started"]]
    assert no_survivors(marker)


class CancelAtLook(threading.Event):
    """A cancel flag that sets itself the ``at``-th time it is read.

    It puts a cancel at one chosen point of a command's launch (the read before the
    sandbox is prepared, the one before the spawn, the supervisor's first looks), with no
    timing involved.
    """

    def __init__(self, at: int) -> None:
        super().__init__()
        self.at = at
        self.looks = 0

    def is_set(self) -> bool:
        self.looks += 1
        if self.looks == self.at:
            self.set()
        return super().is_set()


@pytest.mark.parametrize("at", [1, 2, 3, 4, 6])
def test_a_cancel_at_any_stage_of_the_launch_is_recorded_and_leaves_nothing_running(
    root: Path, mode: str, at: int
) -> None:
    marker = unique_sleep()
    ctx = ctx_for(mode, root)
    ctx.cancelled = CancelAtLook(at)
    error = fail(ctx, {"command": f"sleep {marker}"})
    assert error.code == "conversation_cancelled"
    [killed] = [s for s in ctx.signals if isinstance(s, ToolChildProcessesTerminated)]
    assert (killed.call_id, killed.reason, killed.count) == (
        "call-1",
        "cancel",
        error.details["killed_processes"],
    )
    assert no_survivors(marker)


def test_a_command_cancelled_before_its_launch_is_not_run_and_the_cancel_is_recorded(
    root: Path, mode: str
) -> None:
    ctx = ctx_for(mode, root)
    ctx.cancelled.set()
    error = fail(ctx, {"command": "touch ran"})
    assert (error.code, error.details) == ("conversation_cancelled", {"killed_processes": 0})
    assert ctx.signals == [ToolChildProcessesTerminated(call_id="call-1", reason="cancel", count=0)]
    assert not (root / "ran").exists()


def test_background_leftovers_of_a_finished_command_are_reported(root: Path, mode: str) -> None:
    marker = unique_sleep()
    ctx = ctx_for(mode, root)
    result = command_run(ctx, {"command": f"sleep {marker} & echo started"})
    assert result["stdout"] == "started\n"
    assert ctx.signals == [
        ToolChildProcessesTerminated(call_id="call-1", reason="completed", count=1)
    ]
    assert no_survivors(marker)


def test_the_result_always_fits_the_output_limit(root: Path, mode: str) -> None:
    ctx = ctx_for(mode, root, tool_max_output_bytes=4096)
    command = "head -c 100000 /dev/zero | tr '\\0' a; head -c 100000 /dev/zero | tr '\\0' b >&2"
    result = command_run(ctx, {"command": command})
    assert len(msgspec.json.encode(result)) <= 4096
    assert result["stdout_truncated"] and result["stderr_truncated"]
    assert set(result["stdout"]) == {"a"} and set(result["stderr"]) == {"b"}


def test_control_characters_cannot_push_the_result_past_the_limit(root: Path, mode: str) -> None:
    ctx = ctx_for(mode, root, tool_max_output_bytes=2048)
    result = command_run(ctx, {"command": "head -c 5000 /dev/zero | tr '\\0' '\\1'"})
    assert len(msgspec.json.encode(result)) <= 2048
    assert result["stdout_truncated"]


def test_egress_denied_keeps_a_command_off_the_network(
    root: Path,
    monkeypatch: pytest.MonkeyPatch,
    server: CountingServer,
) -> None:
    monkeypatch.delenv(DISABLE_ENV, raising=False)
    if probe_layers()["netns"]["via"] is None:
        pytest.skip("no network namespace can be created on this machine")
    result = command_run(make_ctx(root), {"command": [sys.executable, "-c", server.fetch_code()]})
    assert result["exit_code"] == 1
    assert server.hits == 0


@pytest.mark.parametrize("egress", ["deny", "allow"])
@pytest.mark.parametrize("disabled", ["bwrap,unshare", "bwrap"])
def test_without_bubblewrap_every_command_fails_closed(
    root: Path, monkeypatch: pytest.MonkeyPatch, server: CountingServer, egress: str, disabled: str
) -> None:
    """Even with a network namespace (unshare) or with egress allowed: no view, no run."""
    monkeypatch.setenv(DISABLE_ENV, disabled)
    ctx = make_ctx(root, network_egress_policy=egress)
    command = f"touch ran; {sys.executable} -c '{server.fetch_code()}'"
    error = fail(ctx, {"command": command})
    assert (error.code, error.details["layer"]) == ("isolation_unavailable", "mount_isolation")
    assert re.match(r"^commands run only inside bubblewrap's filesystem view", str(error))
    assert not (root / "ran").exists() and server.hits == 0


@settings(max_examples=100, deadline=None)
@given(
    stdout=st.text(max_size=3000),
    stderr=st.text(max_size=3000),
    max_bytes=st.integers(min_value=400, max_value=4000),
)
def test_a_fitted_result_fits_and_keeps_prefixes_of_both_streams(
    stdout: str, stderr: str, max_bytes: int
) -> None:
    result = {
        "exit_code": 0,
        "stdout": stdout,
        "stderr": stderr,
        "stdout_truncated": False,
        "stderr_truncated": False,
        "duration_ms": 12,
    }
    fitted = _fit(dict(result), max_bytes)
    assert len(msgspec.json.encode(fitted)) <= max_bytes
    assert stdout.startswith(fitted["stdout"]) and stderr.startswith(fitted["stderr"])
    assert fitted["stdout_truncated"] == (fitted["stdout"] != stdout)
    assert fitted["stderr_truncated"] == (fitted["stderr"] != stderr)


def test_a_stream_larger_than_the_artifact_cap_is_truncated_not_failed(tmp_path: Path) -> None:
    from runtime.policy.options import validate_options
    from runtime.tools.base import ToolContext
    from runtime.tools.command import command_run

    options = validate_options(
        {
            "tool_max_output_bytes": 100000,
            "tool_max_artifact_bytes": 1000,
            "network_egress_policy": "allow",
        }
    )
    ctx = ToolContext(root=str(tmp_path), options=options)
    result = command_run(ctx, {"command": "yes xy | head -c 5000 | tr -d '\\n'"})
    assert result["stdout_truncated"] is True
    assert result["stdout"] == "xy" * 499
