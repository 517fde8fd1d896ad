"""``roost timeline`` pages, and a journal of the old schema, through a real daemon and CLI.

The timeline is read through the journal's conversation index; ``--after-seq`` and
``--before-seq`` page through it (forward and back, each page covering the timeline once),
bad values are usage errors (exit 2) or ``bad_request`` with a stable ``reason`` for API
callers, and a journal written before the index columns existed is migrated when the
daemon opens it.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime.errors import BadRequestError
from tests.integration.adversarial_helpers import run_daemon
from tests.integration.conftest import Daemon, make_root
from tests.integration.test_operator_cli import roost
from tests.runtime.journal.old_format import to_layout_1


def _ok(home: str, *args: str) -> str:
    done = roost(home, *args)
    assert done.returncode == 0, (args, done.stderr)
    return done.stdout


def _timeline(home: str, *args: str) -> dict[str, Any]:
    value: dict[str, Any] = json.loads(_ok(home, "--json", "timeline", "p1", "c1", *args))
    return value


def _seqs(value: dict[str, Any]) -> list[int]:
    return [e["seq"] for e in value["entries"]]


@pytest.fixture(scope="module")
def desk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    """A daemon with project ``p1`` whose conversation ``c1`` has had three turns."""
    base = tmp_path_factory.mktemp("paging")
    root = make_root(base / "repo")
    with run_daemon(base / "home") as daemon:
        _ok(daemon.home, "project", "start", root, "--id", "p1")
        _ok(daemon.home, "conversation", "start", "p1", "--id", "c1")
        for n in range(3):
            _ok(daemon.home, "send", "p1", "c1", f"hello {n}", "--wait")
        yield daemon


def test_pages_forward_and_back_cover_the_timeline_once(desk: Daemon) -> None:
    whole = _timeline(desk.home, "--limit", "500")
    everything = _seqs(whole)
    assert whole["total_entries"] == len(everything) > 10
    forward: list[int] = []
    cursor = 0
    while True:
        page = _timeline(desk.home, "--limit", "7", "--after-seq", str(cursor))
        assert page["total_entries"] == len(everything)
        if not page["entries"]:
            break
        forward += _seqs(page)
        cursor = forward[-1]
    back: list[int] = []
    args: list[str] = []
    while True:
        page = _timeline(desk.home, "--limit", "7", *args)
        if not page["entries"]:
            break
        back = _seqs(page) + back
        args = ["--before-seq", str(back[0])]
    assert forward == back == everything
    low, high = everything[2], everything[9]
    window = _timeline(desk.home, "--after-seq", str(low), "--before-seq", str(high))
    assert _seqs(window) == everything[3:9]


def test_a_full_page_names_the_cursor_of_the_next_one(desk: Daemon) -> None:
    everything = _seqs(_timeline(desk.home, "--limit", "500"))
    text = _ok(desk.home, "timeline", "p1", "c1", "--limit", "4")
    assert text.splitlines()[-1] == f"earlier entries: --before-seq {everything[-4]}"
    text = _ok(desk.home, "timeline", "p1", "c1", "--limit", "4", "--after-seq", "0")
    assert text.splitlines()[-1] == f"later entries: --after-seq {everything[3]}"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--after-seq", "-1"], "argument --after-seq: expected a non-negative integer, got '-1'"),
        (["--before-seq", "0"], "argument --before-seq: expected a positive integer, got '0'"),
        (["--before-seq", "x"], "argument --before-seq: expected a positive integer, got 'x'"),
        (
            ["--after-seq", "9", "--before-seq", "9"],
            "--before-seq 9 must be greater than --after-seq 9: no entry lies between them",
        ),
    ],
)
def test_bad_cursors_are_usage_errors_that_say_what_to_fix(
    desk: Daemon, args: list[str], message: str
) -> None:
    done = roost(desk.home, "timeline", "p1", "c1", *args)
    assert done.returncode == 2
    assert done.stderr.startswith(f"roost: usage: {message}")
    assert "roost timeline --help" in done.stderr


def test_bad_cursors_from_an_api_caller_are_bad_requests_with_a_reason(desk: Daemon) -> None:
    with desk.client() as c:
        with pytest.raises(BadRequestError) as empty:
            c.incident_timeline("p1", "c1", after_seq=5, before_seq=3)
        assert empty.value.details["reason"] == "empty_seq_window"
        assert "before_seq (3) must be greater than after_seq (5)" in str(empty.value)
        with pytest.raises(BadRequestError) as negative:
            c.incident_timeline("p1", "c1", after_seq=-1)
        assert negative.value.details["reason"] == "invalid_args"
        assert c.ping() is not None  # the daemon keeps serving


def test_a_journal_of_the_old_schema_is_migrated_when_the_daemon_opens_it(
    tmp_path: Path,
) -> None:
    root = make_root(tmp_path / "repo")
    home = tmp_path / "home"
    with run_daemon(home) as daemon:
        _ok(daemon.home, "project", "start", root, "--id", "p1")
        _ok(daemon.home, "conversation", "start", "p1", "--id", "c1")
        _ok(daemon.home, "send", "p1", "c1", "hello", "--wait")
        before = _timeline(daemon.home)
    # as older versions wrote it: layout 1, format-1 states, no index columns
    to_layout_1(str(home / "journal.sqlite"), index_columns=False)
    with run_daemon(home) as daemon:
        after = _timeline(daemon.home)
        assert _seqs(after)[: len(_seqs(before))] == _seqs(before)
        assert json.loads(_ok(daemon.home, "--json", "verify", "p1"))["ok"] is True
    with sqlite3.connect(home / "journal.sqlite") as conn:
        columns = {row[1] for row in conn.execute("PRAGMA table_info(stored_events)")}
    assert {"conversation_id", "correlation_id"} <= columns
