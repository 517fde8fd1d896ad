"""The sandbox's protected mounts and layer switches (``runtime.guard.sandbox.layers``), as plain
code."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from runtime.guard.sandbox.layers import (
    DISABLE_ENV,
    FORCE_NO_OPENAT2_ENV,
    View,
    bwrap_argv,
    disabled_layers,
    executables,
    protected_mounts,
)
from runtime.guard.workspace import Workspace


def test_every_git_and_the_assets_inside_writable_paths_are_protected(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    (root / ".git" / "hooks").mkdir(parents=True)
    (root / ".git" / "worktrees" / "wt").mkdir(parents=True)
    (root / ".git" / "worktrees" / "wt" / "commondir").write_text("../..\n")
    (root / ".roost").mkdir()
    (root / "wt").mkdir()
    (root / "wt" / ".git").write_text("gitdir: ../.git/worktrees/wt\n")
    (root / "vendor" / "lib" / ".git").mkdir(parents=True)
    home = tmp_path / "home"
    home.mkdir()
    (home / ".git").write_text("gitdir: /elsewhere\n")
    gits = [root / ".git", root / "wt" / ".git", root / "vendor" / "lib" / ".git", home / ".git"]

    assert protected_mounts([str(root), str(home)], gits=[str(g) for g in gits]) == [
        str(home / ".git"),
        str(root / ".git"),
        str(root / ".git" / "worktrees" / "wt"),
        str(root / ".roost"),
        str(root / "vendor" / "lib" / ".git"),
        str(root / "wt" / ".git"),
    ]


def test_missing_and_symlinked_places_are_left_alone(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    (root / "real-git" / "hooks").mkdir(parents=True)
    (root / ".git").symlink_to("real-git")
    (root / ".roost").symlink_to("/etc")

    assert protected_mounts([str(root)]) == []


@pytest.mark.skipif("bwrap" not in executables(), reason="bubblewrap is not installed")
def test_bwrap_binds_every_git_and_the_assets_read_only_after_the_writable_root(
    tmp_path: Path,
) -> None:
    (tmp_path / ".roost").mkdir()
    (tmp_path / ".git" / "hooks").mkdir(parents=True)
    (tmp_path / "sub" / ".git").mkdir(parents=True)
    argv = bwrap_argv(False, View(writable=(str(tmp_path),), cwd=str(tmp_path)))

    writable = argv.index("--bind")
    assert argv[writable : writable + 3] == ["--bind", str(tmp_path), str(tmp_path)]
    assert "--bind" not in argv[writable + 1 :]
    for place in (".roost", ".git", "sub/.git"):
        readonly = argv.index(str(tmp_path / place)) - 1
        assert argv[readonly] == "--ro-bind" and readonly > writable


def test_force_no_openat2_switches_the_openat2_layer_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DISABLE_ENV, "bwrap")
    monkeypatch.setenv(FORCE_NO_OPENAT2_ENV, "1")

    assert disabled_layers() == frozenset({"bwrap", "openat2"})


def test_the_workspace_walks_when_the_openat2_layer_is_disabled(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(DISABLE_ENV, "openat2")

    with Workspace(str(tmp_path)) as ws:
        assert ws.mode == "walk"


def test_an_interpreter_outside_the_system_is_bound_back_read_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    from runtime.guard.sandbox import layers as sandbox
    from runtime.guard.sandbox import view as sandbox_view

    venv = Path("/tmp") / f"roost-venv-test-{os.getpid()}"
    venv.mkdir(exist_ok=True)
    try:
        monkeypatch.setattr(sys, "prefix", str(venv))
        assert str(venv) in sandbox_view._interpreter_places(["/usr"])
        if "bwrap" in sandbox.executables():
            view = View(writable=(str(tmp_path),), cwd=str(tmp_path))
            argv = sandbox.bwrap_argv(False, view)
            tmpfs = argv.index("/tmp", argv.index("--tmpfs"))
            bound = argv.index(str(venv))
            assert argv[bound - 1] == "--ro-bind" and bound > tmpfs
    finally:
        venv.rmdir()


def test_a_gitfiles_git_directory_and_its_commondir_are_protected_only_inside_the_root(
    tmp_path: Path,
) -> None:
    root = tmp_path / "repo"
    (root / "store" / "main").mkdir(parents=True)
    (root / "store" / "wt").mkdir()
    (root / "store" / "wt" / "commondir").write_text("../main\n")
    (root / "store" / "lone").mkdir()  # a git directory without a commondir
    (root / "store" / "away").mkdir()
    (root / "store" / "away" / "commondir").write_text(f"{tmp_path / 'outside'}\n")
    (tmp_path / "outside").mkdir()
    gits = []
    for name in ("wt", "lone", "away"):
        (root / name).mkdir()
        (root / name / ".git").write_text(f"gitdir: ../store/{name}\n")
        gits.append(str(root / name / ".git"))
    (root / "gone").mkdir()
    (root / "gone" / ".git").write_text("gitdir: ../store/missing\n")
    (root / "junk").mkdir()
    (root / "junk" / ".git").write_text("not a gitfile\n")
    gits += [str(root / "gone" / ".git"), str(root / "junk" / ".git")]

    assert protected_mounts([str(root)], gits=gits) == [
        str(root / "away" / ".git"),
        str(root / "gone" / ".git"),
        str(root / "junk" / ".git"),
        str(root / "lone" / ".git"),
        str(root / "store" / "away"),
        str(root / "store" / "lone"),
        str(root / "store" / "main"),
        str(root / "store" / "wt"),
        str(root / "wt" / ".git"),
    ]
