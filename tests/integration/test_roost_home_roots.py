"""A project root may neither contain ROOST_HOME nor lie inside it.

Such a root would let the project's tools (and commands) overwrite the journal, the pid
file or the mailbox. ``project start`` refuses it with ``invalid_root_path`` (through the
real daemon and the real CLI), and a project journaled earlier with such a root does not
stop the daemon from coming back: it is left down, visibly, and the others are restored.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from events import catalog as ev
from events.envelope import format_at, new_correlation_id, new_event
from runtime.daemon import start_daemon, stop_daemon
from runtime.daemon.config import config_for_home
from runtime.errors import InvalidRootPathError
from runtime.journal.store import Journal
from tests.integration.adversarial_helpers import run_daemon
from tests.integration.conftest import Daemon, alive, daemon_env, make_root
from tests.runtime.daemon_helpers import run_roost

CONTAINS = "contains"
INSIDE = "lies inside"


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``base/home`` is the daemon's ROOST_HOME; ``base/repo`` an ordinary root beside it."""
    path = tmp_path_factory.mktemp("home-roots")
    make_root(path / "repo")
    (path / "alias").symlink_to(path)
    return path


@pytest.fixture(scope="module")
def daemon(base: Path) -> Iterator[Daemon]:
    """One real daemon on ``base/home``."""
    with run_daemon(base / "home") as running:
        (base / "into").symlink_to(base / "home" / "logs")
        yield running


def cli_env() -> dict[str, str]:
    """The environment of the ``roost`` program: this one, without ROOST_HOME."""
    env = {**os.environ, **daemon_env()}
    env.pop("ROOST_HOME", None)
    return env


def refusal_line(root: str, home: str, where: str) -> str:
    return (
        f"roost: invalid_root_path: project root {root!r} {where} the daemon's state directory "
        f"ROOST_HOME ({home}), which tools must never reach; choose another root or run the "
        "daemon with another --home\n"
    )


@pytest.mark.parametrize(
    ("spelled", "shown", "reason"),
    [
        ("{base}", "{base}", "contains_roost_home"),
        ("{base}/", "{base}", "contains_roost_home"),
        ("{base}/repo/..", "{base}", "contains_roost_home"),
        ("{base}/alias", "{base}/alias", "contains_roost_home"),
        ("{base}/home", "{base}/home", "contains_roost_home"),
        ("{base}/home/./", "{base}/home", "contains_roost_home"),
        ("{base}/home/logs", "{base}/home/logs", "inside_roost_home"),
        ("{base}/into", "{base}/into", "inside_roost_home"),
        ("{base}/alias/home/logs/", "{base}/alias/home/logs", "inside_roost_home"),
    ],
    ids=["parent", "trailing_slash", "dotdot", "symlink_to_parent", "home", "home_dot",
         "inside", "symlink_inside", "symlink_then_inside"],
)  # fmt: skip
def test_the_cli_refuses_a_root_that_reaches_roost_home(
    daemon: Daemon, base: Path, spelled: str, shown: str, reason: str
) -> None:
    root, shown = spelled.format(base=base), shown.format(base=base)
    where = CONTAINS if reason == "contains_roost_home" else INSIDE
    done = run_roost("--home", daemon.home, "project", "start", root, "--id", "p", env=cli_env())
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == refusal_line(shown, daemon.home, where)
    with daemon.client() as c:
        with pytest.raises(InvalidRootPathError) as info:
            c.start_project(root, project_id="p")
        assert info.value.details == {"root": shown, "reason": reason, "roost_home": daemon.home}
        assert c.list_projects() == []
        assert c.status()["projects"] == 0


def test_a_root_beside_roost_home_starts(daemon: Daemon, base: Path) -> None:
    done = run_roost(
        "--json", "--home", daemon.home, "project", "start", str(base / "repo"), "--id", "beside",
        env=cli_env(),
    )  # fmt: skip
    assert (done.returncode, json.loads(done.stdout), done.stderr) == (
        0,
        {"project_id": "beside"},
        "",
    )
    with daemon.client() as c:
        assert [p["project_id"] for p in c.list_projects()] == ["beside"]
        c.stop_project("beside")


def test_project_start_of_the_user_home_with_the_default_roost_home_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``roost project start ~`` where ROOST_HOME is the default ``~/.local/state/roost``."""
    user_home = tmp_path / "user"
    (user_home / "work").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(user_home))
    monkeypatch.delenv("ROOST_HOME", raising=False)
    roost_home = str(user_home / ".local" / "state" / "roost")
    assert config_for_home(None).home == roost_home
    pid = start_daemon(None, env=daemon_env(), timeout_s=60)
    seen = Daemon(home=roost_home, pid=pid).processes()
    try:
        env = cli_env()
        done = run_roost("project", "start", str(user_home), env=env)
        assert (done.returncode, done.stdout) == (1, "")
        assert done.stderr == refusal_line(str(user_home), roost_home, CONTAINS)
        done = run_roost(
            "--json", "project", "start", str(user_home / "work"), "--id", "w", env=env
        )
        assert (done.returncode, json.loads(done.stdout)) == (0, {"project_id": "w"})
    finally:
        stop_daemon(roost_home, timeout_s=30)
        left = alive(seen)
        for proc in left:
            proc.kill()
        assert left == [], f"processes left behind: {left}"


# --- a project journaled earlier with such a root ------------------------------------------


def journal_a_started_project(home: Path, project_id: str, root: Path) -> None:
    """Record ``project.started`` for ``root`` as an older daemon would have, bypassing the
    start checks: the journal API, with the daemon stopped."""
    started = new_event(
        ev.ProjectStarted(root=str(root), options={}),
        project_id=project_id,
        at=format_at(datetime.now(UTC)),
        correlation_id=new_correlation_id(),
    )
    with Journal.open(str(home), "sqlite") as journal:
        journal.append([started])


def log_records(home: Path, name: str) -> list[dict[str, object]]:
    lines = Path(config_for_home(str(home)).log_path).read_text().splitlines()
    records = [json.loads(line) for line in lines if line.startswith("{")]
    return [r for r in records if r.get("event") == name]


def test_a_journaled_project_with_such_a_root_does_not_stop_the_daemon_from_restarting(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    ok_root = make_root(tmp_path / "ok")
    with run_daemon(home) as daemon, daemon.client() as c:
        c.start_project(ok_root, project_id="ok")
        c.start_conversation("ok", conversation_id="c1")
    (home / "projects" / "p").mkdir(parents=True)
    journal_a_started_project(home, "wide", tmp_path)
    journal_a_started_project(home, "inner", home / "projects" / "p")

    with run_daemon(home) as daemon, daemon.client() as c:
        assert [p["project_id"] for p in c.list_projects()] == ["ok"]
        for project_id, conflict in (("wide", "contains"), ("inner", "inside")):
            reason = f"invalid_root_path: {conflict}_roost_home"
            assert c.diagnostics(project_id)["health"] == {"status": "failed", "reason": reason}
        refused = log_records(home, "project_restore_refused")
        assert [(r["project_id"], r["root"], r["reason"]) for r in refused] == [
            ("inner", str(home / "projects" / "p"), "invalid_root_path: inside_roost_home"),
            ("wide", str(tmp_path), "invalid_root_path: contains_roost_home"),
        ]
        # the other project came back and works
        done = c.run_tool("ok", {"name": "fs.read", "args": {"path": "notes.txt"}, "meta": {}})
        assert done["status"] == "ok", done
        assert c.send_message("ok", "c1", "hello", wait=True)["outcome"] == "llm.completed"
        status = run_roost("--json", "--home", daemon.home, "project", "list", env=cli_env())
        assert status.returncode == 0
        assert [p["project_id"] for p in json.loads(status.stdout)] == ["ok"]
        shown = run_roost(
            "--json", "--home", daemon.home, "project", "diagnostics", "wide", env=cli_env()
        )
        assert json.loads(shown.stdout)["health"] == {
            "status": "failed",
            "reason": "invalid_root_path: contains_roost_home",
        }
        for project_id in ("wide", "inner"):
            verified = c.verify(project_id)
            assert (verified["ok"], verified["chain_ok"]) == (True, True)

    with Journal.open(str(home), "sqlite") as journal:
        for project_id, conflict in (("wide", "contains"), ("inner", "inside")):
            # the journal seals a project in the transaction of its project.stopped
            events = [e for e in journal.read_project(project_id) if e.type != "journal.checkpoint"]
            assert [e.type for e in events] == ["project.started", "project.stopped"]
            assert events[-1].data == {"reason": f"invalid_root_path: {conflict}_roost_home"}

    # Recorded as stopped, they are not tried again; the good project still comes back.
    with run_daemon(home) as daemon, daemon.client() as c:
        assert [p["project_id"] for p in c.list_projects()] == ["ok"]
        assert c.diagnostics("wide")["health"] == {"status": "stopped"}
    assert len(log_records(home, "project_restore_refused")) == 2


# --- a project on the user's home, with ROOST_HOME elsewhere -------------------------------


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_a_project_on_the_user_home_cannot_make_every_git_command_run_a_program(
    tmp_path: Path,
) -> None:
    """``roost --home /elsewhere project start ~``: git's global config stays out of reach."""
    user_home, marker = tmp_path / "user", tmp_path / "fsmonitor-ran"
    (user_home / "work").mkdir(parents=True)
    script = tmp_path / "fsmonitor.sh"
    script.write_text(f"#!/bin/sh\ntouch '{marker}'\n")
    script.chmod(0o755)
    git_env = {"PATH": os.environ["PATH"], "HOME": str(user_home), "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run(["git", "init", "-q"], cwd=user_home / "work", env=git_env, check=True)
    planted = f"[core]\n\tfsmonitor = {script}\n"
    with run_daemon(tmp_path / "roost-home", HOME=str(user_home)) as daemon, daemon.client() as c:
        c.start_project(str(user_home), project_id="home")
        for path, place in (
            (".gitconfig", "~/.gitconfig"),
            (".config/git/config", "$XDG_CONFIG_HOME/git/"),
        ):
            done = c.run_tool(
                "home", {"name": "fs.write", "args": {"path": path, "content": planted}}
            )
            assert done["status"] == "error", done
            assert {k: done["reason"].get(k) for k in ("code", "reason", "pattern")} == {
                "code": "sensitive_path_denied",
                "reason": "protected_path",
                "pattern": place,
            }
        done = c.run_tool(
            "home", {"name": "fs.write", "args": {"path": "notes.txt", "content": "x"}}
        )
        assert done["status"] == "ok", done
    assert not (user_home / ".gitconfig").exists()
    assert not (user_home / ".config").exists()
    status = subprocess.run(
        ["git", "status", "--porcelain"], cwd=user_home / "work", env=git_env,
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert status.returncode == 0, status.stderr
    assert not marker.exists()
