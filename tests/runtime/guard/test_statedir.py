"""``ROOST_HOME`` is 0700 and every file in it 0600: the checks and fixes at start."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime.errors import ConfigError
from runtime.guard.home.statedir import (
    PRIVATE_UMASK,
    PROJECT_UMASK_ENV,
    ROOST_ENTRIES,
    private_umask,
    project_mode,
    project_umask,
    secure_home,
)
from tests.runtime.daemon_helpers import daemon_env, run_roost, running_daemon

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")


def mode(path: Path | str) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def modes(home: Path) -> dict[str, int]:
    """``relative path → mode`` of the home and everything in it (symlinks excluded)."""
    found = {".": mode(home)}
    for directory, dirs, files in os.walk(home):
        for name in [*dirs, *files]:
            path = os.path.join(directory, name)
            if not os.path.islink(path):
                found[os.path.relpath(path, home)] = mode(path)
    return found


@pytest.fixture
def open_home(tmp_path: Path) -> Path:
    """A home as an old Roost (or a careless umask) left it: 0755, files 0644."""
    home = tmp_path / "home"
    (home / "logs").mkdir(parents=True)
    (home / "mailbox").mkdir()
    for name in ("journal.sqlite", "journal.sqlite-wal", "logs/daemon.log", "notes.txt"):
        (home / name).write_text("x")
        os.chmod(home / name, 0o644)
    for directory in (home, home / "logs", home / "mailbox"):
        os.chmod(directory, 0o755)
    return home


def test_a_missing_home_is_created_owner_only(tmp_path: Path) -> None:
    home = tmp_path / "a" / "home"
    assert secure_home(str(home)) == []
    assert mode(home) == 0o700


def test_an_open_home_and_roosts_files_in_it_become_owner_only(open_home: Path) -> None:
    changed = secure_home(str(open_home))
    assert changed[0] == str(open_home)
    entries = ["logs", "mailbox", "journal.sqlite", "journal.sqlite-wal", "logs/daemon.log"]
    assert sorted(changed[1:]) == sorted(str(open_home / p) for p in entries)
    assert modes(open_home) == {
        ".": 0o700,
        "logs": 0o700,
        "mailbox": 0o700,
        "journal.sqlite": 0o600,
        "journal.sqlite-wal": 0o600,
        "logs/daemon.log": 0o600,
        "notes.txt": 0o644,  # not Roost's: behind the 0700 home, left as it was
    }
    assert secure_home(str(open_home)) == []  # nothing left to fix


def test_a_home_pointed_at_someones_files_only_closes_the_directory(tmp_path: Path) -> None:
    home = tmp_path / "src"
    (home / "bin").mkdir(parents=True)
    (home / "bin" / "tool").write_text("#!/bin/sh\n")
    os.chmod(home / "bin" / "tool", 0o755)
    os.chmod(home, 0o755)
    assert secure_home(str(home)) == [str(home)]
    assert modes(home) == {".": 0o700, "bin": 0o755, "bin/tool": 0o755}


def test_roosts_entries_are_the_names_its_parts_use() -> None:
    from runtime.daemon import config as backend_api
    from runtime.journal import link as journal_link

    names = {
        backend_api.SOCKET_NAME,
        backend_api.PID_NAME,
        backend_api.LOG_NAME.split(os.sep)[0],
        backend_api.MAILBOX_DIR,
        journal_link.LINK_SOCKET_NAME,
        "journal.sqlite",
    }
    assert names <= ROOST_ENTRIES
    assert {n for n in ROOST_ENTRIES if n.startswith("journal.sqlite")} == {
        "journal.sqlite",
        "journal.sqlite-wal",
        "journal.sqlite-shm",
        "journal.sqlite-journal",
    }


def test_a_symlink_inside_is_neither_followed_nor_changed(open_home: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("not Roost's")
    os.chmod(outside, 0o644)
    (open_home / "link").symlink_to(outside)
    secure_home(str(open_home))
    assert mode(outside) == 0o644


def test_a_symlinked_home_is_refused(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir(mode=0o755)
    link = tmp_path / "link"
    link.symlink_to(real)
    with pytest.raises(ConfigError) as info:
        secure_home(str(link))
    assert info.value.code == "bad_config"
    assert info.value.message == (
        f"ROOST_HOME is a symbolic link: {link}; point --home (or ROOST_HOME) at the real directory"
    )
    assert info.value.details == {"reason": "home_is_symlink", "path": str(link)}
    assert mode(real) == 0o755


def test_a_home_that_is_a_file_is_refused(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.write_text("")
    with pytest.raises(ConfigError, match=r"^ROOST_HOME is not a directory: .*/home; move it"):
        secure_home(str(home))


@needs_root
def test_a_home_of_another_user_is_refused(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o755)
    os.chown(home, 4242, 4242)
    with pytest.raises(ConfigError) as info:
        secure_home(str(home))
    assert info.value.details == {"reason": "home_not_owned", "path": str(home)}
    assert info.value.message == (
        f"ROOST_HOME belongs to uid 4242, not 0: {home}; use a directory of your own "
        "(the daemon's user) as --home"
    )
    assert mode(home) == 0o755


@needs_root
def test_an_entry_of_another_user_is_refused(open_home: Path) -> None:
    os.chown(open_home / "logs" / "daemon.log", 4242, 4242)
    with pytest.raises(ConfigError) as info:
        secure_home(str(open_home))
    assert info.value.details == {
        "reason": "entry_not_owned",
        "path": str(open_home / "logs" / "daemon.log"),
        "uid": 0,
    }


@pytest.fixture
def restored_umask(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv(PROJECT_UMASK_ENV, raising=False)
    before = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(before)


def test_the_private_umask_keeps_the_users_for_projects(restored_umask: None) -> None:
    assert private_umask() == 0o022
    assert os.umask(PRIVATE_UMASK) == 0o077
    assert os.environ[PROJECT_UMASK_ENV] == "022"
    assert project_umask() == 0o022


def test_a_file_made_under_the_private_umask_gets_the_users_modes(
    restored_umask: None, tmp_path: Path
) -> None:
    private_umask()
    fd = os.open(tmp_path / "f", os.O_WRONLY | os.O_CREAT, 0o666)
    os.mkdir(tmp_path / "d", 0o777)
    dfd = os.open(tmp_path / "d", os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert (mode(tmp_path / "f"), mode(tmp_path / "d")) == (0o600, 0o700)
        project_mode(fd)
        project_mode(dfd, directory=True)
    finally:
        os.close(fd)
        os.close(dfd)
    assert (mode(tmp_path / "f"), mode(tmp_path / "d")) == (0o644, 0o755)


# --- through the real CLI ---------------------------------------------------------------


@pytest.mark.slow
def test_daemon_start_makes_an_open_home_private(open_home: Path) -> None:
    os.remove(open_home / "notes.txt")
    with running_daemon(str(open_home)):
        found = modes(open_home)
    assert found.pop(".") == 0o700
    assert {
        p: m for p, m in found.items() if m != (0o700 if (open_home / p).is_dir() else 0o600)
    } == {}
    assert {"roost.sock", "roost.pid", "logs/daemon.log", "journal.sqlite"} <= set(found)


@pytest.mark.slow
def test_daemon_start_on_a_symlinked_home_fails_with_bad_config(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir(mode=0o755)
    link = tmp_path / "link"
    link.symlink_to(real)
    done = run_roost("daemon", "start", "--home", str(link), env=daemon_env())
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr == (
        f"roost: bad_config: ROOST_HOME is a symbolic link: {link}; point --home (or "
        "ROOST_HOME) at the real directory\n"
    )
    assert os.listdir(real) == []
