"""The ``roost`` command line, in process and as a program, against a real daemon."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import types
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from runtime.cli import app as cli
from runtime.client import Client
from tests.runtime.daemon_helpers import daemon_env, run_roost, running_daemon


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Iterator[str]:
    path = str(tmp_path_factory.mktemp("daemon") / "home")
    with running_daemon(path):
        yield path


@pytest.fixture
def project(home, tmp_path) -> tuple[str, str]:
    with Client.connect(home) as c:
        project_id = c.start_project(str(tmp_path), project_id="p-" + uuid.uuid4().hex[:8])
        return project_id, c.start_conversation(project_id, conversation_id="c1")


def roost(capsys, *args: str) -> tuple[int, str, str]:
    code = cli.main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_json_is_accepted_before_and_after_the_command(capsys, home, project) -> None:
    before = roost(capsys, "--json", "--home", home, "project", "diagnostics", project[0])
    after = roost(capsys, "project", "diagnostics", project[0], "--home", home, "--json")
    assert before[0] == after[0] == 0
    assert json.loads(before[1]) == json.loads(after[1])
    assert json.loads(before[1])["project_id"] == project[0]


def test_project_start_passes_opt_pairs_and_an_options_file(capsys, home, tmp_path) -> None:
    options_file = tmp_path / "opts.json"
    options_file.write_text('{"max_rounds": 4, "tool_timeout_ms": 1000}')
    code, out, _ = roost(
        capsys, "--json", "project", "start", str(tmp_path), "--id", "opts", "--home", home,
        "--options-file", str(options_file), "--opt", "tool_timeout_ms=2000",
    )  # fmt: skip
    assert (code, json.loads(out)) == (0, {"project_id": "opts"})
    with Client.connect(home) as c:
        options = c.diagnostics("opts")["options"]
    assert (options["max_rounds"], options["tool_timeout_ms"]) == (4, 2000)


def test_project_list_prints_an_aligned_table(capsys, home, project) -> None:
    code, out, _ = roost(capsys, "project", "list", "--home", home)
    lines = out.splitlines()
    assert code == 0
    assert lines[0].split() == ["PROJECT", "ROOT", "CONVERSATIONS", "STARTED"]
    row = next(line for line in lines if line.startswith(project[0] + " "))
    assert row.index("/") == lines[0].index("ROOT")


def test_a_failed_request_prints_one_error_line_and_exits_1(capsys, home) -> None:
    assert roost(capsys, "project", "stop", "nope", "--home", home) == (
        1,
        "",
        "roost: project_not_found: no project 'nope'\n",
    )


def test_a_usage_error_prints_one_line_and_exits_2(capsys, home) -> None:
    code, out, err = roost(capsys, "timeline", "p1", "--home", home)
    assert (code, out) == (2, "")
    assert err == (
        "roost: usage: the following arguments are required: CONV (see `roost timeline --help`)\n"
    )


def test_invalid_json_arguments_are_usage_errors(capsys, home) -> None:
    code, _, err = roost(capsys, "event", "p", "c", "--type", "t", "--data", "[1]", "--home", home)
    assert code == 2
    assert err.startswith("roost: usage: argument --data: expected a JSON object, got '[1]'")


def test_no_daemon_gives_the_daemon_unreachable_line_and_exit_3(capsys, tmp_path) -> None:
    code, _, err = roost(capsys, "project", "list", "--home", str(tmp_path))
    assert code == 3
    assert err == (
        f"roost: daemon_unreachable: no daemon answers on {tmp_path}/roost.sock (No such file "
        f"or directory); start one with `roost daemon start --home {tmp_path}`, or point at a "
        "running one with --home DIR (or ROOST_HOME)\n"
    )


def test_send_event_and_timeline_commands_round_trip(capsys, home, project) -> None:
    p, c = project
    code, out, _ = roost(capsys, "send", p, c, "hello", "--wait", "--json", "--home", home)
    assert (code, json.loads(out)["outcome"]) == (0, "completed")
    code, out, _ = roost(
        capsys, "event", p, c, "--type", "user.message", "--data", '{"content": "raw"}',
        "--correlation-id", "corr-e", "--home", home, "--json",
    )  # fmt: skip
    assert json.loads(out)["correlation_id"] == "corr-e"
    code, out, _ = roost(capsys, "timeline", p, c, "--correlation-id", "corr-e", "--home", home)
    assert out.splitlines()[0] == f"timeline of {p}/{c} (correlation corr-e): 1 of 1 entries"
    assert out.splitlines()[1].split() == ["SEQ", "AT", "SOURCE", "TYPE", "CORRELATION", "DATA"]
    assert '{"content":"raw"}' in out.splitlines()[2]


def test_projection_incident_and_tools_print_for_people(capsys, home, project) -> None:
    p, c = project
    assert roost(capsys, "projection", p, c, "pending_tool_calls", "--home", home)[1] == (
        "(no pending calls)\n"
    )
    assert roost(capsys, "incident", p, c, "--home", home)[1] == "# Incident report: c1\n\n"
    out = roost(capsys, "incident", p, c, "--home", home, "--json")[1]
    assert json.loads(out)["conversation_id"] == c
    tools = roost(capsys, "project", "tools", p, "--home", home)[1].splitlines()
    assert tools[0].split() == ["NAME", "FLAGS", "DESCRIPTION"]
    assert tools[1].split()[:2] == ["fs.list", "ro"]


def test_incident_output_replaces_the_file_and_leaves_no_temporary(
    capsys, home, project, tmp_path
) -> None:
    p, c = project
    target = tmp_path / "out" / "incident.md"
    target.parent.mkdir()
    target.write_text("an older report, longer than the new one\n")
    said = f"wrote {target} (md, 23 bytes)\n"  # one line naming the file, nothing else
    assert roost(capsys, "incident", p, c, "--home", home, "-o", str(target)) == (0, said, "")
    assert target.read_text() == "# Incident report: c1\n\n"
    out = roost(capsys, "--json", "incident", p, c, "--home", home, "-o", str(target))[1]
    size = len(target.read_bytes())
    assert json.loads(out) == {"path": str(target), "format": "json", "bytes": size}
    assert json.loads(target.read_text())["conversation_id"] == c
    assert [path.name for path in target.parent.iterdir()] == ["incident.md"]


def test_incident_output_to_a_missing_directory_exits_1(capsys, home, project, tmp_path) -> None:
    p, c = project
    target = tmp_path / "nowhere" / "incident.html"
    code, out, err = roost(capsys, "incident", p, c, "--home", home, "--output", str(target))
    assert (code, out) == (1, "")
    assert err.startswith(f"roost: output_not_written: cannot write {target}: ")
    assert not target.parent.exists()


def test_run_tool_exits_1_when_the_tool_fails(capsys, home, project) -> None:
    code, out, err = roost(capsys, "run-tool", project[0], "nope", "--home", home, "--json")
    assert (code, json.loads(out)["status"]) == (1, "error")
    assert json.loads(err) == {
        "code": "unknown_tool",
        "message": "no tool 'nope'",
        "details": {},
        "exit_status": 1,
    }


def test_verify_exits_1_and_lists_the_mismatches(capsys, home, tmp_path) -> None:
    (tmp_path / ".fake-verify-mismatch").write_text("")
    roost(capsys, "project", "start", str(tmp_path), "--id", "broken", "--home", home)
    code, out, err = roost(capsys, "verify", "broken", "--home", home)
    assert code == 1
    assert out == (
        "NOT OK: 1 events checked, hash chain ok\n"
        "1 mismatch:\n"
        "  - projection: conversation_id=c1, projection=timeline\n"
    )
    assert err == "roost: verify_failed: project broken does not verify (1 mismatch)\n"


def test_verify_of_a_good_project_exits_0(capsys, home, project) -> None:
    assert roost(capsys, "verify", project[0], "--home", home) == (
        0,
        "ok: 2 events checked, hash chain ok\n",
        "",
    )


def test_tail_prints_json_lines_and_exits_0_on_ctrl_c(home, project) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "runtime.cli", "tail", project[0], "--json", "--home", home],
        env=daemon_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        lines = [json.loads(proc.stdout.readline()) for _ in range(2)]
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert [e["type"] for e in lines] == ["project.started", "conversation.started"]
    assert (proc.returncode, err) == (0, "")


def test_the_cli_runs_as_a_program_with_the_same_error_line(home) -> None:
    done = run_roost("conversation", "stop", "nope", "c1", "--home", home)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == "roost: project_not_found: no project 'nope'\n"


def test_soak_without_the_harness_says_it_is_not_available(capsys, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "soak.cli", None)
    code, _, err = roost(capsys, "soak", "--projects", "1")
    assert code == 1
    assert err.startswith("roost: not_available: the soak harness is not available (")


def test_soak_arguments_are_handed_to_the_harness(capsys, monkeypatch) -> None:
    seen: list[Any] = []
    fake = types.ModuleType("soak.cli")
    fake.main = lambda argv: seen.append(argv) or 0  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "soak.cli", fake)
    code, _, _ = roost(capsys, "--home", "/h", "soak", "--projects", "3", "--json", "r.json")
    assert (code, seen) == (0, [["--home", "/h", "--projects", "3", "--json", "r.json"]])


def test_version_prints_the_installed_version(capsys) -> None:
    from runtime.daemon.config import roost_version

    assert roost(capsys, "--version") == (0, f"roost {roost_version()}\n", "")


def test_help_shows_each_options_default_and_an_example(capsys) -> None:
    code, out, _ = roost(capsys, "send", "--help")
    assert code == 0
    assert "seconds for --wait (default: 60.0)" in " ".join(out.split())
    assert out.rstrip().endswith('example:\n  roost send p1 c1 "read README.md" --wait')
    code, out, _ = roost(capsys, "timeline", "--help")
    assert "the last N entries, 1 to 500 (default: 100)" in " ".join(out.split())
    code, out, _ = roost(capsys, "--help")
    assert "3 no daemon answers" in out
    assert "roost send p1 c1" in out


def test_an_unknown_option_points_at_the_help_of_its_command(capsys, home) -> None:
    assert roost(capsys, "send", "p", "c", "hi", "--bogus", "--home", home) == (
        2,
        "",
        "roost: usage: unrecognized arguments: --bogus (see `roost send --help`)\n",
    )


@pytest.mark.parametrize("limit", ["0", "-1", "501", "ten"])
def test_a_timeline_limit_outside_1_to_500_is_a_usage_error(capsys, home, limit) -> None:
    assert roost(capsys, "timeline", "p", "c", "--limit", limit, "--home", home) == (
        2,
        "",
        f"roost: usage: argument --limit: expected an integer from 1 to 500, got '{limit}' "
        "(see `roost timeline --help`)\n",
    )


def test_the_largest_timeline_limit_is_accepted(capsys, home, project) -> None:
    code, out, _ = roost(capsys, "--json", "timeline", *project, "--limit", "500", "--home", home)
    assert (code, json.loads(out)["limit"]) == (0, 500)


def test_a_wait_that_runs_out_exits_4(capsys, home, project) -> None:
    code, out, err = roost(
        capsys, "event", *project, "--type", "user.message", "--data", '{"hang": true}',
        "--wait", "--wait-timeout", "0.2", "--home", home,
    )  # fmt: skip
    assert (code, out) == (4, "")
    assert err == "roost: timeout: the turn did not end within 0.2 s\n"


def test_quiet_lists_only_ids_and_applies_to_pending_calls_only(capsys, home, project) -> None:
    code, out, _ = roost(capsys, "project", "list", "-q", "--home", home)
    assert code == 0
    assert project[0] in out.splitlines()
    assert all(" " not in line for line in out.splitlines())
    assert roost(capsys, "projection", *project, "pending_tool_calls", "-q", "--home", home) == (
        0,
        "",
        "",
    )
    assert roost(capsys, "projection", *project, "timeline", "-q", "--home", home) == (
        2,
        "",
        "roost: usage: -q applies to pending_tool_calls only (see `roost projection --help`)\n",
    )


def test_a_bad_log_rotation_setting_stops_daemon_start_with_bad_config(tmp_path) -> None:
    home = str(tmp_path / "home")
    done = run_roost("daemon", "start", "--home", home, env=daemon_env(ROOST_LOG_MAX_BYTES="10MB"))
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (
        "roost: bad_config: ROOST_LOG_MAX_BYTES must be a non-negative integer, got '10MB'\n"
    )
    assert not (tmp_path / "home" / "roost.pid").exists()


def test_completion_prints_a_script_and_completes_commands(tmp_path) -> None:
    script = run_roost("completion", "bash")
    assert script.returncode == 0
    assert "complete " in script.stdout
    assert "roost" in script.stdout
    out = tmp_path / "completions"
    line = "roost conv"
    done = run_roost(
        env=daemon_env(
            _ARGCOMPLETE="1",
            _ARGCOMPLETE_IFS="\n",
            COMP_LINE=line,
            COMP_POINT=str(len(line)),
            _ARGCOMPLETE_STDOUT_FILENAME=str(out),
        )
    )
    assert done.returncode == 0, done.stderr
    assert out.read_text().split() == ["conversation"]


def test_soak_with_the_global_json_asks_the_harness_for_json_on_stdout(capsys, monkeypatch) -> None:
    seen: list[Any] = []
    fake = types.ModuleType("soak.cli")
    fake.main = lambda argv: seen.append(argv) or 0  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "soak.cli", fake)
    assert roost(capsys, "--json", "soak", "--projects", "1")[0] == 0
    assert seen == [["--json", "-", "--projects", "1"]]


def test_verify_draws_a_progress_bar_on_a_terminal_and_none_when_piped(home, project) -> None:
    import pty

    master, slave = pty.openpty()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "runtime.cli", "verify", project[0], "--home", home],
            env=daemon_env(),
            stdout=subprocess.PIPE,
            stderr=slave,
            text=True,
            timeout=60,
            check=False,
        )
        os.close(slave)
        drawn = b""
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # the terminal is closed once everything was read
                break
            if not chunk:
                break
            drawn += chunk
    finally:
        os.close(master)
    piped = run_roost("verify", project[0], "--home", home)
    assert (done.returncode, done.stdout) == (0, "ok: 2 events checked, hash chain ok\n")
    assert f"verifying {project[0]}".encode() in drawn
    assert "━".encode() in drawn
    assert (piped.returncode, piped.stderr) == (0, "")


def test_tail_until_an_unknown_event_type_is_a_usage_error(capsys, home) -> None:
    assert roost(capsys, "tail", "p", "--until", "llm.complete", "--home", home) == (
        2,
        "",
        "roost: usage: argument --until: 'llm.complete' is not an event type (see "
        "docs/events.md), e.g. llm.completed (see `roost tail --help`)\n",
    )


@pytest.mark.parametrize(
    ("ack", "expected"),
    [
        ({"outcome": "llm.completed", "outcome_data": {}}, None),
        ({"status": "accepted"}, None),
        (
            {"outcome": "llm.failed", "outcome_data": {"reason": "timeout", "message": "slow"}},
            "llm.failed: timeout: slow",
        ),
        ({"outcome": "llm.failed", "outcome_data": {"reason": "timeout"}}, "llm.failed: timeout"),
        (
            {
                "outcome": "budget.exceeded",
                "outcome_data": {"budget": "max_rounds", "limit": 1, "used": 1},
            },
            "budget.exceeded: max_rounds (limit 1, used 1)",
        ),
        # data a daemon of this version never sends: still a failure, named as such
        ({"outcome": "llm.failed", "outcome_data": {"reason": 7}}, "llm.failed: unknown"),
        ({"outcome": "budget.exceeded", "outcome_data": None}, "budget.exceeded: unknown"),
    ],
)
def test_a_waited_turn_that_failed_is_described_from_its_typed_outcome(
    ack: dict[str, Any], expected: str | None
) -> None:
    from runtime.cli.commands import turn_failure

    assert turn_failure(ack) == expected
