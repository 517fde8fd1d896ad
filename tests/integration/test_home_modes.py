"""File modes with the real daemon: its home is private, the user's projects keep their modes.

``roost daemon start --home DIR`` on a home that an older Roost (or a umask of 022) left
group- and world-readable: afterwards, and for everything the running daemon writes
(the SQLite journal with its ``-wal``/``-shm``, logs, the pid file, both sockets, the
mailbox), the home is 0700 and every file of Roost's in it 0600. The files its tools create in a
project get the user's umask (022 here), not the daemon's 077.
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime.client import Client
from tests.integration.adversarial_helpers import LAYERS, wait_until
from tests.integration.conftest import make_root
from tests.runtime.daemon_helpers import daemon_env, run_roost, stop_and_check


def mode(path: Path | str) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def not_private(home: Path) -> dict[str, str]:
    """What under ``home`` (itself included, ``stray.txt`` not) is not owner-only."""
    wrong = {} if mode(home) == 0o700 else {".": oct(mode(home))}
    for directory, dirs, files in os.walk(home):
        for name in [*dirs, *files]:
            path = os.path.join(directory, name)
            if os.path.islink(path) or path == str(home / "stray.txt"):
                continue
            wanted = 0o700 if os.path.isdir(path) else 0o600
            if mode(path) != wanted:
                wrong[os.path.relpath(path, home)] = oct(mode(path))
    return wrong


@pytest.fixture
def user_umask() -> Iterator[None]:
    """The user's umask, 022, inherited by the CLI and the daemon it starts."""
    before = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(before)


@pytest.fixture
def open_home(tmp_path: Path, user_umask: None) -> Path:
    """A home left 0755 with a 0644 journal, log and stray file."""
    home = tmp_path / "home"
    (home / "logs").mkdir(parents=True)
    sqlite3.connect(home / "journal.sqlite").close()
    (home / "logs" / "daemon.log").write_text("")
    (home / "stray.txt").write_text("from an older version\n")
    for path in (home, home / "logs"):
        os.chmod(path, 0o755)
    assert mode(home / "journal.sqlite") == 0o644
    return home


def test_daemon_start_makes_the_home_private_and_keeps_everything_in_it_so(
    open_home: Path, tmp_path: Path
) -> None:
    env = daemon_env(ROOST_BACKEND="runtime.daemon.backend:create_backend")
    done = run_roost("--json", "daemon", "start", "--home", str(open_home), env=env)
    assert done.returncode == 0, done.stderr
    pid = json.loads(done.stdout)["pid"]
    root = make_root(tmp_path / "repo")
    try:
        with Client.connect(str(open_home)) as c:
            c.start_project(root, project_id="p1")
            c.start_conversation("p1", conversation_id="c1")
            c.send_message("p1", "c1", "list skills", wait=True)
            wait_until((open_home / "journal.sock").exists, 30, "the journal link")
            for name in ("roost.sock", "journal.sock", "roost.pid", "journal.sqlite-wal"):
                assert (open_home / name).exists(), name
            assert not_private(open_home) == {}
    finally:
        stop_and_check(str(open_home), pid)
    assert not_private(open_home) == {}
    assert mode(open_home / "stray.txt") == 0o644  # not Roost's: only the 0700 home guards it


@pytest.mark.skipif(not LAYERS["netns"]["available"], reason="commands need a namespace here")
def test_files_the_tools_create_in_a_project_get_the_users_umask(
    tmp_path: Path, user_umask: None
) -> None:
    home = tmp_path / "home"
    env = daemon_env(ROOST_BACKEND="runtime.daemon.backend:create_backend")
    done = run_roost("--json", "daemon", "start", "--home", str(home), env=env)
    assert done.returncode == 0, done.stderr
    pid = json.loads(done.stdout)["pid"]
    root = Path(make_root(tmp_path / "repo"))
    try:
        with Client.connect(str(home)) as c:
            c.start_project(str(root), project_id="p1")
            wrote = c.run_tool(
                "p1", {"name": "fs.write", "args": {"path": "new/dir/a.txt", "content": "a"}}
            )
            assert wrote["status"] == "ok", wrote
            ran = c.run_tool(
                "p1", {"name": "command.run", "args": {"command": "mkdir made && touch made/b"}}
            )
            assert ran["status"] == "ok" and ran["result"]["exit_code"] == 0, ran
    finally:
        stop_and_check(str(home), pid)
    assert {
        p: oct(mode(root / p)) for p in ("new", "new/dir", "new/dir/a.txt", "made", "made/b")
    } == {
        "new": "0o755",
        "new/dir": "0o755",
        "new/dir/a.txt": "0o644",
        "made": "0o755",
        "made/b": "0o644",
    }
