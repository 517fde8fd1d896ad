"""The daemon's log file: rotation by size across processes, reading its end, following it."""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from runtime.cli.local import log_line_text
from runtime.client import Client
from runtime.daemon import start_daemon
from runtime.errors import ProjectNotFoundError
from runtime.logfiles import (
    DEFAULT_BACKUPS,
    DEFAULT_MAX_BYTES,
    RotatingLogFile,
    follow,
    last_lines,
    rotation_settings,
)
from tests.runtime.daemon_helpers import daemon_env, stop_and_check, wait_for


def lines_of(directory: Path) -> dict[str, list[str]]:
    return {p.name: p.read_text().splitlines() for p in sorted(directory.iterdir())}


def test_the_rotation_settings_come_from_the_environment_with_defaults() -> None:
    assert rotation_settings({}) == (DEFAULT_MAX_BYTES, DEFAULT_BACKUPS) == (10485760, 5)
    env = {"ROOST_LOG_MAX_BYTES": "0", "ROOST_LOG_BACKUPS": "2"}
    assert rotation_settings(env) == (0, 2)


@pytest.mark.parametrize("value", ["-1", "1.5", "ten"])
def test_a_rotation_setting_that_is_not_a_non_negative_integer_is_refused(value: str) -> None:
    with pytest.raises(
        ValueError, match=rf"^ROOST_LOG_BACKUPS must be a non-negative integer, got '{value}'$"
    ):
        rotation_settings({"ROOST_LOG_BACKUPS": value})


def test_a_full_file_is_rotated_and_only_the_kept_backups_remain(tmp_path: Path) -> None:
    log = RotatingLogFile(str(tmp_path / "daemon.log"), max_bytes=20, backups=2)
    for n in range(7):
        log.write(f"line {n} 123456789\n")  # 19 bytes: one per file
    log.close()
    assert lines_of(tmp_path) == {
        "daemon.log": ["line 6 123456789"],
        "daemon.log.1": ["line 5 123456789"],
        "daemon.log.2": ["line 4 123456789"],
    }
    assert oct(os.stat(tmp_path / "daemon.log").st_mode & 0o777) == "0o600"


def test_no_backups_means_the_full_file_is_dropped(tmp_path: Path) -> None:
    log = RotatingLogFile(str(tmp_path / "daemon.log"), max_bytes=20, backups=0)
    for n in range(3):
        log.write(f"line {n} 123456789\n")
    assert lines_of(tmp_path) == {"daemon.log": ["line 2 123456789"]}


def test_a_limit_of_zero_never_rotates(tmp_path: Path) -> None:
    log = RotatingLogFile(str(tmp_path / "daemon.log"), max_bytes=0, backups=2)
    for n in range(50):
        log.write(f"line {n}\n")
    assert [name for name in lines_of(tmp_path)] == ["daemon.log"]
    assert len(lines_of(tmp_path)["daemon.log"]) == 50


def _writer(path: str, tag: str, count: int) -> None:
    log = RotatingLogFile(path, max_bytes=4000, backups=50)
    for n in range(count):
        log.write(json.dumps({"tag": tag, "n": n, "pad": "x" * 40}) + "\n")


def test_processes_sharing_the_file_lose_no_line_and_never_mix_two(tmp_path: Path) -> None:
    path = str(tmp_path / "daemon.log")
    context = multiprocessing.get_context("fork")
    writers = [context.Process(target=_writer, args=(path, tag, 300)) for tag in "abcd"]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join(60)
    assert [w.exitcode for w in writers] == [0, 0, 0, 0]
    files = lines_of(tmp_path)
    records = [json.loads(line) for lines in files.values() for line in lines]
    assert sorted((r["tag"], r["n"]) for r in records) == [
        (tag, n) for tag in "abcd" for n in range(300)
    ]
    assert len(files) > 5
    longest = max(len(line) + 1 for lines in files.values() for line in lines)
    for name in files:  # a line each of the other writers may land past the check
        assert os.path.getsize(tmp_path / name) <= 4000 + 3 * longest


def _write_once(log: RotatingLogFile) -> None:
    log.write("from the child\n")


def test_a_child_forked_while_a_thread_holds_the_lock_can_still_write(tmp_path: Path) -> None:
    log = RotatingLogFile(str(tmp_path / "daemon.log"), max_bytes=0, backups=0)
    child = multiprocessing.get_context("fork").Process(target=_write_once, args=(log,))
    with log._lock:  # as a thread writing a line at the moment of the fork would
        child.start()
    child.join(10)
    if child.exitcode is None:
        child.kill()
        child.join()
    assert child.exitcode == 0
    assert lines_of(tmp_path) == {"daemon.log": ["from the child"]}


def test_stdout_and_stderr_that_were_the_rotated_file_follow_the_new_one(tmp_path: Path) -> None:
    path = tmp_path / "daemon.log"
    code = (
        "import sys, os\n"
        "from runtime.logfiles import RotatingLogFile\n"
        f"log = RotatingLogFile({str(path)!r}, max_bytes=30, backups=3)\n"
        "log.write('first line of the log 0123\\n')\n"
        "log.write('second line, after rotation\\n')\n"
        "os.write(2, b'stray stderr\\n')\n"
    )
    with open(path, "ab") as out:
        done = subprocess.run([sys.executable, "-c", code], stdout=out, stderr=out, check=False)
    assert done.returncode == 0
    assert lines_of(tmp_path) == {
        "daemon.log": ["second line, after rotation", "stray stderr"],
        "daemon.log.1": ["first line of the log 0123"],
    }


def test_last_lines_reads_the_end_and_reaches_into_the_previous_file(tmp_path: Path) -> None:
    (tmp_path / "daemon.log.1").write_text("a\nb\nc\n")
    (tmp_path / "daemon.log").write_text("d\ne\n")
    path = str(tmp_path / "daemon.log")
    assert last_lines(path, 1) == ["e"]
    assert last_lines(path, 4) == ["b", "c", "d", "e"]
    assert last_lines(path, 0) == []
    assert last_lines(str(tmp_path / "none.log"), 3) == []


def test_follow_yields_new_lines_across_a_rotation(tmp_path: Path) -> None:
    path = str(tmp_path / "daemon.log")
    log = RotatingLogFile(path, max_bytes=30, backups=2)
    log.write("before following\n")
    got: list[str] = []
    done = threading.Event()

    def read() -> None:
        for line in follow(path, from_end=False, poll_s=0.01, stop=done.is_set):
            got.append(line)

    reader = threading.Thread(target=read)
    reader.start()
    try:
        wait_for(lambda: got == ["before following"], 5, "the first line")
        for text in ("one 0123456789", "two 0123456789", "three 012345678"):
            log.write(text + "\n")
        wait_for(lambda: len(got) == 4, 10, "three more lines")
    finally:
        done.set()
        reader.join(5)
    assert got == ["before following", "one 0123456789", "two 0123456789", "three 012345678"]
    assert os.path.exists(path + ".2")


def test_a_log_line_reads_as_time_level_component_event_and_fields() -> None:
    line = json.dumps(
        {
            "component": "roost.gateway",
            "code": "project_not_found",
            "event": "request_failed",
            "level": "info",
            "timestamp": "2026-11-22T03:40:26.871185Z",
        }
    )
    assert log_line_text(line) == (
        "2026-11-22T03:40:26.871185Z info roost.gateway request_failed code=project_not_found"
    )
    assert log_line_text("Traceback (most recent call last):") == (
        "Traceback (most recent call last):"
    )


def test_a_daemon_rotates_its_log_and_keeps_the_configured_number(tmp_path: Path) -> None:
    home = str(tmp_path / "home")
    pid = start_daemon(home, env=daemon_env(ROOST_LOG_MAX_BYTES="1500", ROOST_LOG_BACKUPS="2"))
    try:
        with Client.connect(home) as client:
            for _ in range(30):  # each failed request logs a request_failed line
                with pytest.raises(ProjectNotFoundError):
                    client.stop_project("nope")
    finally:
        stop_and_check(home, pid)
    logs = Path(home, "logs")
    names = sorted(p.name for p in logs.iterdir() if p.name.startswith("daemon.log"))
    assert names == ["daemon.log", "daemon.log.1", "daemon.log.2"]
    for name in names:
        assert (logs / name).stat().st_size <= 1500
        assert all(json.loads(line)["component"] for line in (logs / name).read_text().splitlines())


def test_a_log_file_someone_else_created_readable_to_others_is_made_owner_only(
    tmp_path: Path,
) -> None:
    path = tmp_path / "daemon.log"
    path.write_text("")
    path.chmod(0o644)
    RotatingLogFile(str(path), max_bytes=0, backups=0).write("x\n")
    assert oct(path.stat().st_mode & 0o777) == "0o600"
