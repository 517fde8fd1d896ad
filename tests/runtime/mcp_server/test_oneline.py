"""What the SDKs log, as Roost's one-line messages: the cause's code, never a traceback."""

from __future__ import annotations

import logging
import sys

import pytest

from runtime.errors import ProjectNotFoundError
from runtime.mcp_server.oneline import exception_line, one_line, route_logging


def record(message: str, error: BaseException | None = None) -> logging.LogRecord:
    exc_info = (type(error), error, error.__traceback__) if error is not None else None
    return logging.LogRecord("mcp.server", logging.ERROR, __file__, 1, message, (), exc_info)


def chained() -> BaseException:
    try:
        try:
            raise ProjectNotFoundError("no project p1 runs; start it\nwith roost project start")
        except ProjectNotFoundError as e:
            raise RuntimeError("wrapped") from e
    except RuntimeError as e:
        return e


def test_the_roost_error_at_the_root_of_a_chain_names_the_cause() -> None:
    assert exception_line(chained()) == "project_not_found: no project p1 runs; start it"
    assert exception_line(ValueError("bad\nvalue")) == "ValueError: bad"
    assert exception_line(KeyError()) == "KeyError"


def test_a_record_is_one_prefixed_line() -> None:
    line = one_line(record("listing failed\nmore", chained()), "mcp")
    assert line == (
        "roost: mcp: error: listing failed (project_not_found: no project p1 runs; start it)"
    )
    assert one_line(record("Invalid HTTP request received."), "a2a") == (
        "roost: a2a: error: Invalid HTTP request received."
    )


def test_route_logging_prints_sdk_and_uvicorn_records_as_one_line_each(
    capsys: pytest.CaptureFixture[str],
) -> None:
    root = logging.getLogger()
    before = (list(root.handlers), root.level)
    try:
        route_logging("mcp")
        try:
            raise chained()
        except RuntimeError:
            logging.getLogger("mcp.server.streamable_http").exception("Error handling request")
        logging.getLogger("uvicorn.error").warning("Invalid HTTP request received.")
        logging.getLogger("mcp").info("not shown: below warning")
        sys.stderr.flush()
        err = capsys.readouterr().err
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
        for handler in before[0]:
            root.addHandler(handler)
        root.setLevel(before[1])
        logging.captureWarnings(False)
    assert err.splitlines() == [
        "roost: mcp: error: Error handling request (project_not_found: no project p1 runs; "
        "start it)",
        "roost: mcp: warning: Invalid HTTP request received.",
    ]
