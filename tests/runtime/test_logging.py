"""The log file: logging never raises on a full disk, and every line has a fixed event name."""

from __future__ import annotations

import json
import multiprocessing
import os
import resource
import signal
from pathlib import Path

from runtime.logging import configure_logging, get_logger

CTX = multiprocessing.get_context("fork")


def _log_through_a_full_disk(path: str) -> None:
    configure_logging(json=True, log_file=path)
    log = get_logger("roost.test")
    log.info("before")
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes past the limit fail with EFBIG
    _soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (os.path.getsize(path), hard))
    for n in range(5):
        log.warning("while_full", n=n)  # must not raise
    import logging

    logging.getLogger("thespian").warning("a standard library record")
    resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))
    log.info("after")
    os._exit(0)


def test_lines_that_cannot_be_written_are_dropped_and_counted(tmp_path: Path) -> None:
    path = tmp_path / "daemon.log"
    child = CTX.Process(target=_log_through_a_full_disk, args=(str(path),))
    child.start()
    child.join(30)
    assert child.exitcode == 0  # an OSError from a log call would have ended it with 1
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [line["event"] for line in lines] == ["before", "log_lines_dropped", "after"]
    dropped = lines[1]
    assert (dropped["count"], dropped["level"], dropped["component"]) == (
        6,
        "warning",
        "roost.logging",
    )
    assert dropped["reason"] == "the log file could not be written (disk full?)"


def _log_a_library_record(path: str) -> None:
    import logging

    configure_logging(json=True, log_file=path)
    logging.getLogger("httpx").warning("HTTP Request: GET http://x %s", "200 OK")
    os._exit(0)


def test_a_library_record_gets_a_fixed_event_name_and_keeps_its_text(tmp_path: Path) -> None:
    path = tmp_path / "daemon.log"
    child = CTX.Process(target=_log_a_library_record, args=(str(path),))
    child.start()
    child.join(30)
    assert child.exitcode == 0
    (line,) = [json.loads(line) for line in path.read_text().splitlines()]
    assert (line["event"], line["component"], line["message"]) == (
        "library_message",
        "httpx",
        "HTTP Request: GET http://x 200 OK",
    )
