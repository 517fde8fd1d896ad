"""The daemon's git: no discovery, no bare fall-through, other users' checkouts, fail closed."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from runtime.guard.review.git_probe import GitProbeError, git_dir, hooks_paths

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed here")


def _git(repo: Path, *args: str) -> None:
    env = {"PATH": os.environ["PATH"], "HOME": str(repo.parent), "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run(["git", "-C", str(repo), *args], env=env, check=True)


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    path = tmp_path / "repo"
    path.mkdir()
    _git(path, "init", "-q")
    _git(path, "config", "core.hooksPath", ".husky")
    return path


def test_the_hooks_path_of_a_repository_is_read(repo: Path) -> None:
    assert hooks_paths(str(repo)) == [".husky"]


def test_a_root_without_git_has_no_hooks_path_and_git_never_walks_up(tmp_path: Path) -> None:
    inner = tmp_path / "repo" / "sub"
    inner.mkdir(parents=True)
    _git(tmp_path / "repo", "init", "-q")
    _git(tmp_path / "repo", "config", "core.hooksPath", ".husky")

    assert hooks_paths(str(inner)) == []


def test_a_symlinked_or_fifo_dot_git_is_no_repository(repo: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / ".git").symlink_to(repo / ".git")
    fifo = tmp_path / "fifo"
    fifo.mkdir()
    os.mkfifo(fifo / ".git")

    assert git_dir(str(other)) is None and hooks_paths(str(other)) == []
    assert git_dir(str(fifo)) is None


def test_a_spoiled_head_still_reads_the_repositorys_own_config_not_the_roots(repo: Path) -> None:
    (repo / ".git" / "HEAD").write_text("garbage\n")
    (repo / "HEAD").write_text("ref: refs/heads/main\n")
    (repo / "objects").mkdir()
    (repo / "refs").mkdir()
    (repo / "config").write_text("[core]\n\thooksPath = elsewhere\n")

    assert hooks_paths(str(repo)) == [".husky"]


@pytest.mark.slow
def test_an_include_of_a_fifo_fails_closed_instead_of_blocking(repo: Path) -> None:
    os.mkfifo(repo / "pipe")
    with open(repo / ".git" / "config", "a", encoding="utf-8") as f:
        f.write("[include]\n\tpath = ../pipe\n")

    with pytest.raises(GitProbeError, match="no answer within"):
        hooks_paths(str(repo))


def test_a_planted_fsmonitor_never_runs(repo: Path, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    script = tmp_path / "monitor.sh"
    script.write_text(f"#!/bin/sh\ntouch {marker}\n")
    script.chmod(0o755)
    _git(repo, "config", "core.fsmonitor", str(script))

    assert hooks_paths(str(repo)) == [".husky"]
    assert not marker.exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to own a checkout as another user")
def test_a_checkout_another_user_owns_is_read_all_the_same(repo: Path) -> None:
    for place in [repo, *repo.rglob("*")]:
        os.lchown(place, 65534, 65534)

    assert hooks_paths(str(repo)) == [".husky"]


@pytest.mark.slow
def test_a_write_decision_fails_closed_when_git_cannot_say_where_hooks_live(repo: Path) -> None:
    from runtime.errors import ToolError
    from runtime.guard.workspace import Workspace

    os.mkfifo(repo / "pipe")
    with open(repo / ".git" / "config", "a", encoding="utf-8") as f:
        f.write("[include]\n\tpath = ../pipe\n")

    with Workspace(str(repo), {}) as ws, pytest.raises(ToolError) as caught:
        ws.check_path("notes.txt", write=True)
    assert caught.value.code == "isolation_unavailable"
    assert caught.value.details["layer"] == "git_config"


def test_a_config_that_prints_too_much_fails_closed(repo: Path) -> None:
    with open(repo / ".git" / "config", "a", encoding="utf-8") as f:
        for n in range(70):
            f.write(f"[core]\n\thooksPath = {str(n) * 1000}\n")

    with pytest.raises(GitProbeError, match=r"git printed more than 65536 bytes$"):
        hooks_paths(str(repo))
