"""Why an MCP server did not start: the cause inside the SDK's exception groups, the
server's exit status and stderr tail (bounded, redacted), the fix for common causes."""

from __future__ import annotations

import asyncio
import os

from runtime.errors import ToolError
from runtime.guard.sandbox.server_process import StderrTail
from runtime.lifecycle.project_health import health, server_problems
from runtime.tools.mcp_client.failure import MAX_TAIL_CHARS, clean_tail, hint_for, start_failure
from runtime.tools.sdk_loop import root_cause, short_error

TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "tools/docs_server.py", line 1, in <module>\n'
    "ModuleNotFoundError: No module named 'mcp'\n"
)


def _group() -> BaseExceptionGroup[BaseException]:
    inner = ExceptionGroup("inner", [ConnectionError("Connection closed")])
    return BaseExceptionGroup("unhandled errors in a TaskGroup", [asyncio.CancelledError(), inner])


def test_the_error_inside_nested_task_groups_is_found() -> None:
    assert isinstance(root_cause(_group()), ConnectionError)
    assert short_error(_group()) == "ConnectionError: Connection closed"
    only_cancelled = BaseExceptionGroup("g", [asyncio.CancelledError()])
    assert isinstance(root_cause(only_cancelled), asyncio.CancelledError)


def test_a_server_that_exited_is_named_with_its_status_last_line_and_fix() -> None:
    report = {"exit_status": 1, "stderr_tail": TRACEBACK}
    error = start_failure("docs", _group(), report, ["python3", "tools/docs_server.py"])
    assert error.message.startswith(
        "MCP server docs exited with status 1 before it answered "
        "(ConnectionError: Connection closed); stderr: ModuleNotFoundError: No module named 'mcp'"
    )
    assert error.details["exit_status"] == 1
    assert error.details["stderr_tail"] == TRACEBACK.strip()
    assert "(python3) has no module 'mcp'" in error.details["hint"]
    assert "command_read_paths" in error.message


def test_a_signal_a_stop_and_a_refusal_are_told_apart() -> None:
    killed = start_failure("s", RuntimeError("x"), {"exit_status": -9, "stderr_tail": ""}, [])
    assert "was killed by signal 9" in killed.message and "hint" not in killed.details
    stopped = start_failure("s", RuntimeError("x"), {"exit_status": None, "stderr_tail": ""}, [])
    assert "did not answer and was stopped" in stopped.message
    refused = ToolError("isolation_unavailable", "no bubblewrap")
    assert start_failure("s", ExceptionGroup("g", [refused]), {}, []) is refused


def test_hints_only_for_what_they_know() -> None:
    part = "ModuleNotFoundError: No module named 'mcp.server.fastmcp'"
    assert hint_for(part, ["py"]) == ""  # the package is there; a part of it is not
    assert "has no program nope" in hint_for("bwrap: execvp nope: No such file or directory", [])
    assert hint_for("Segmentation fault", ["py"]) == ""


def test_the_tail_is_bounded_redacted_and_printable() -> None:
    token = "ghp_" + "a1B2c3D4e5" * 3 + "abcdef"
    noisy = "x" * 5000 + "\n\x1b[31mred\x1b[0m " + token + "\nlast line\n"
    tail = clean_tail(noisy)
    assert len(tail) <= MAX_TAIL_CHARS + 3 and tail.endswith("last line")
    assert token not in tail and "[REDACTED:github_token]" in tail
    assert "\x1b" not in tail


def test_the_stderr_reader_keeps_only_the_last_bytes() -> None:
    read, write = os.pipe()
    tail = StderrTail(read, limit=100)
    for i in range(200):
        os.write(write, f"line {i}\n".encode())
    os.close(write)
    text = tail.text(wait_s=10)
    assert len(text.encode()) <= 100 and text.endswith("line 199\n")


def test_servers_that_did_not_start_make_the_project_degraded() -> None:
    errors = [
        {"type": "mcp_server", "key": "docs", "reason": "tool_error: x", "exit_status": 1},
        {"type": "mcp_server", "key": "off", "reason": "protocol_not_allowed: mcp is not ..."},
        {"type": "skills", "key": "bad", "reason": "no front matter"},
    ]
    problems = server_problems(errors)
    assert problems == [{"server": "docs", "reason": "tool_error: x", "exit_status": 1}]
    assert health(problems) == {
        "status": "degraded",
        "problems": {"docs": {"reason": "tool_error: x", "exit_status": 1}},
    }
    assert health([]) == {"status": "ok"}
