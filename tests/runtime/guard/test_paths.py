"""Workspace confinement, adversarially, in every resolution mode.

Each confinement test runs three times: kernel ``openat2``, the ``O_NOFOLLOW`` walk with
``/proc`` re-checks, and the bare walk as on a system without ``/proc``. Each refusal
asserts the exact code and reason and that nothing outside the workspace changed.
"""

from __future__ import annotations

import errno
import gc
import os
import socket
import stat
import unicodedata
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from events.catalog import (
    SecuritySandboxExceptionUsed,
    SecuritySandboxViolation,
    SecuritySensitivePathDenied,
)
from runtime.errors import InvalidRootPathError, InvalidRuntimeOptError, ToolError
from runtime.guard import workspace as workspace_module
from runtime.guard.home.roost_home import home as state_home
from runtime.guard.home.roost_home import protect as protect_state_home
from runtime.guard.paths import openat2
from runtime.guard.workspace import (
    PathDecision,
    Workspace,
    check_all_paths,
    exception_signal,
    root_home_conflict,
    signal_for,
)

MODES = {
    "openat2": {"force_fallback": False},
    "walk": {"force_fallback": True},
    "walk-noproc": {"force_fallback": True, "use_proc": False},
}


def tree_state(top: Path) -> dict[str, Any]:
    """Everything under ``top``: file bytes, link targets, directory markers."""
    state: dict[str, Any] = {}
    for dirpath, dirnames, filenames in os.walk(top):
        for name in dirnames + filenames:
            p = Path(dirpath, name)
            rel = str(p.relative_to(top))
            if p.is_symlink():
                state[rel] = ("link", os.readlink(p))
            elif p.is_dir():
                state[rel] = ("dir",)
            elif p.is_file():
                state[rel] = ("file", p.read_bytes())
            else:
                state[rel] = ("special",)
    return state


class Layout:
    """A workspace root and an outside directory holding a secret, side by side."""

    def __init__(self, base: Path, kwargs: dict[str, Any]) -> None:
        self.root = base / "root"
        self.outside = base / "outside"
        self.root.mkdir()
        self.outside.mkdir()
        (self.outside / "secret.txt").write_text("outside secret\n")
        (self.outside / ".env").write_text("TOKEN=1\n")
        (self.root / "a.txt").write_text("alpha\n")
        (self.root / "sub").mkdir()
        (self.root / "sub" / "b.txt").write_text("beta\n")
        self.kwargs = kwargs
        self.before = tree_state(self.outside)

    def ws(self, options: dict[str, Any] | None = None) -> Workspace:
        return Workspace(str(self.root), options or {}, **self.kwargs)

    def outside_unchanged(self) -> bool:
        return tree_state(self.outside) == self.before


@pytest.fixture(params=list(MODES))
def lay(request, tmp_path) -> Layout:
    if request.param == "openat2" and not openat2.available():
        pytest.skip("openat2 is not available on this kernel")
    return Layout(tmp_path, MODES[request.param])


def refusal(fn, *args, **kwargs) -> tuple[str, Any]:
    with pytest.raises(ToolError) as exc:
        fn(*args, **kwargs)
    return exc.value.code, exc.value.details.get("reason")


def read(ws: Workspace, path: str) -> bytes:
    fd = ws.open_for_read(path)
    try:
        return os.read(fd, 1 << 16)
    finally:
        os.close(fd)


def write(ws: Workspace, path: str, data: bytes, **kwargs: Any) -> None:
    fd = ws.open_for_write(path, **kwargs)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def all_refuse(ws: Workspace, path: str) -> set[tuple[str, Any]]:
    """The refusals of check, read and write for ``path`` (one element if they agree)."""
    return {
        refusal(ws.check_path, path),
        refusal(ws.open_for_read, path),
        refusal(write, ws, path, b"x"),
    }


# --- modes ---------------------------------------------------------------------------


def test_the_openat2_mode_is_used_where_the_kernel_has_it(tmp_path):
    if not openat2.available():
        pytest.skip("openat2 is not available on this kernel")
    with Workspace(str(tmp_path), {}, force_fallback=False) as ws:
        assert ws.mode == "openat2"


def test_the_environment_switch_forces_the_walk(tmp_path, monkeypatch):
    monkeypatch.setenv("ROOST_FORCE_NO_OPENAT2", "1")
    with Workspace(str(tmp_path), {}) as ws:
        assert ws.mode == "walk"


def test_the_kernel_refuses_an_escape_with_exdev(tmp_path):
    if not openat2.available():
        pytest.skip("openat2 is not available on this kernel")
    fd = os.open(tmp_path, os.O_PATH | os.O_DIRECTORY)
    try:
        with pytest.raises(OSError) as exc:
            openat2.openat2(fd, "../x", os.O_RDONLY, resolve=openat2.RESOLVE_BENEATH)
        assert exc.value.errno == errno.EXDEV
    finally:
        os.close(fd)


def test_a_missing_root_is_an_invalid_root_path(tmp_path):
    with pytest.raises(InvalidRootPathError):
        Workspace(str(tmp_path / "missing"), {})


def test_a_malformed_outside_root_allowlist_fails_the_workspace_without_leaking(tmp_path):
    gc.collect()
    before = len(os.listdir("/proc/self/fd"))
    with pytest.raises(InvalidRuntimeOptError) as exc:
        Workspace(str(tmp_path), {"outside_root_allowlist": [{"path": "/x"}]})
    assert exc.value.reason == "invalid_entry"
    assert len(os.listdir("/proc/self/fd")) == before


def test_an_absolute_path_may_spell_the_root_through_a_symlink(lay, tmp_path):
    (tmp_path / "alias").symlink_to(lay.root)
    with Workspace(str(tmp_path / "alias"), {}, **lay.kwargs) as ws:
        assert ws.root == str(lay.root)
        assert read(ws, str(tmp_path / "alias" / "a.txt")) == b"alpha\n"


def test_no_file_descriptor_is_left_open_by_opens_and_refusals(lay):
    os.mkfifo(lay.root / "pipe")
    (lay.root / "out").symlink_to(lay.outside)
    gc.collect()  # let earlier tests' garbage close its fds first
    before = len(os.listdir("/proc/self/fd"))
    with lay.ws() as ws:
        for path in ["a.txt", "sub", "pipe", "out/secret.txt", "../x", "new/x", ".env"]:
            for op in (ws.check_path, ws.open_for_read, ws.open_dir, ws.open_for_write):
                try:
                    result = op(path)
                except ToolError:
                    continue
                if isinstance(result, int):
                    os.close(result)
    assert len(os.listdir("/proc/self/fd")) == before


# --- ordinary paths ----------------------------------------------------------------------


def test_a_file_inside_the_root_is_read(lay):
    with lay.ws() as ws:
        assert read(ws, "sub/b.txt") == b"beta\n"
        assert ws.check_path("sub/b.txt") == PathDecision(
            resolved=str(lay.root / "sub" / "b.txt"), inside_root=True
        )


def test_an_absolute_path_inside_the_root_is_accepted(lay):
    with lay.ws() as ws:
        assert read(ws, str(lay.root / "a.txt")) == b"alpha\n"


def test_dotdot_that_stays_inside_the_root_is_accepted(lay):
    with lay.ws() as ws:
        assert read(ws, "sub/../a.txt") == b"alpha\n"


def test_a_symlink_inside_the_root_is_followed(lay):
    (lay.root / "link").symlink_to("sub/b.txt")
    (lay.root / "dirlink").symlink_to("sub")
    with lay.ws() as ws:
        assert read(ws, "link") == b"beta\n"
        assert read(ws, "dirlink/b.txt") == b"beta\n"
        assert ws.check_path("link").resolved == str(lay.root / "sub" / "b.txt")


def test_an_absolute_symlink_back_into_the_root_is_followed(lay):
    (lay.root / "abs").symlink_to(lay.root / "sub" / "b.txt")
    with lay.ws() as ws:
        assert read(ws, "abs") == b"beta\n"
        write(ws, "abs", b"new\n")
    assert (lay.root / "sub" / "b.txt").read_bytes() == b"new\n"


def test_a_new_file_is_created_and_an_existing_one_truncated(lay):
    with lay.ws() as ws:
        write(ws, "sub/new.txt", b"fresh")
        write(ws, "a.txt", b"A")
    assert (lay.root / "sub" / "new.txt").read_bytes() == b"fresh"
    assert (lay.root / "a.txt").read_bytes() == b"A"


def test_missing_parents_are_created_inside_the_root_on_request(lay):
    with lay.ws() as ws:
        assert refusal(write, ws, "x/y/z.txt", b"1") == ("tool_error", "not_found")
        write(ws, "x/y/z.txt", b"1", make_parents=True)
    assert (lay.root / "x" / "y" / "z.txt").read_bytes() == b"1"


def test_a_missing_file_is_not_found_for_reading(lay):
    with lay.ws() as ws:
        assert refusal(ws.open_for_read, "nope.txt") == ("tool_error", "not_found")
        assert ws.check_path("nope/deeper.txt").resolved == str(lay.root / "nope/deeper.txt")


def test_a_file_used_as_a_directory_is_not_a_directory(lay):
    with lay.ws() as ws:
        assert refusal(ws.open_for_read, "a.txt/x") == ("tool_error", "not_a_directory")


# --- escapes -------------------------------------------------------------------------


def test_dotdot_out_of_the_root_is_refused(lay):
    with lay.ws() as ws:
        assert all_refuse(ws, "../outside/secret.txt") == {("outside_root", "dotdot")}
        assert all_refuse(ws, "sub/../../outside/secret.txt") == {("outside_root", "dotdot")}
    assert lay.outside_unchanged()


def test_an_absolute_path_outside_the_root_is_refused(lay):
    with lay.ws() as ws:
        path = str(lay.outside / "secret.txt")
        assert all_refuse(ws, path) == {("outside_root", "absolute_outside")}
        assert all_refuse(ws, "/etc/passwd") == {("outside_root", "absolute_outside")}
    assert lay.outside_unchanged()


def test_an_absolute_path_that_climbs_out_of_the_root_is_refused(lay):
    with lay.ws() as ws:
        path = f"{lay.root}/../outside/secret.txt"
        assert all_refuse(ws, path) == {("outside_root", "dotdot")}
    assert lay.outside_unchanged()


def test_a_symlink_to_an_outside_file_is_refused(lay):
    (lay.root / "leak").symlink_to(lay.outside / "secret.txt")
    (lay.root / "rel-leak").symlink_to("../outside/secret.txt")
    with lay.ws() as ws:
        assert all_refuse(ws, "leak") == {("outside_root", "symlink_escape")}
        assert all_refuse(ws, "rel-leak") == {("outside_root", "symlink_escape")}
    assert lay.outside_unchanged()


def test_a_symlink_to_an_outside_directory_in_the_middle_of_a_path_is_refused(lay):
    (lay.root / "sub" / "deep").mkdir()
    (lay.root / "sub" / "deep" / "door").symlink_to("../../../outside")
    with lay.ws() as ws:
        path = "sub/deep/door/secret.txt"
        assert all_refuse(ws, path) == {("outside_root", "symlink_escape")}
        assert refusal(write, ws, "sub/deep/door/new.txt", b"x") == (
            "outside_root",
            "symlink_escape",
        )
    assert lay.outside_unchanged()


def test_a_chain_of_symlinks_that_ends_outside_is_refused(lay):
    (lay.root / "one").symlink_to("two")
    (lay.root / "two").symlink_to("sub/three")
    (lay.root / "sub" / "three").symlink_to("../../outside/secret.txt")
    with lay.ws() as ws:
        assert all_refuse(ws, "one") == {("outside_root", "symlink_escape")}
    assert lay.outside_unchanged()


def test_a_symlink_into_the_root_then_dotdot_out_is_refused(lay):
    (lay.root / "sub" / "up").symlink_to("..")
    with lay.ws() as ws:
        assert read(ws, "sub/up/a.txt") == b"alpha\n"
        assert all_refuse(ws, "sub/up/../outside/secret.txt") == {("outside_root", "dotdot")}
    assert lay.outside_unchanged()


def test_a_dangling_symlink_is_refused_and_nothing_is_created(lay):
    (lay.root / "dangling").symlink_to("sub/missing.txt")
    with lay.ws() as ws:
        assert all_refuse(ws, "dangling") == {("not_a_regular_file", "dangling_symlink")}
    assert not (lay.root / "sub" / "missing.txt").exists()


def test_a_dangling_symlink_pointing_outside_creates_nothing_outside(lay):
    (lay.root / "plant").symlink_to(lay.outside / "planted.txt")
    with lay.ws() as ws:
        assert all_refuse(ws, "plant") == {("outside_root", "symlink_escape")}
    assert lay.outside_unchanged()


def test_a_symlink_loop_is_refused(lay):
    (lay.root / "loop1").symlink_to("loop2")
    (lay.root / "loop2").symlink_to("loop1")
    (lay.root / "self").symlink_to("self/x")
    with lay.ws() as ws:
        assert all_refuse(ws, "loop1") == {("not_a_regular_file", "symlink_loop")}
        assert all_refuse(ws, "self") == {("not_a_regular_file", "symlink_loop")}


def test_a_write_through_a_hard_link_to_an_outside_file_is_refused(lay):
    os.link(lay.outside / "secret.txt", lay.root / "hard.txt")
    with lay.ws() as ws:
        assert refusal(write, ws, "hard.txt", b"overwritten") == ("outside_root", "hard_link")
        assert refusal(ws.check_path, "hard.txt", write=True) == ("outside_root", "hard_link")
    assert (lay.outside / "secret.txt").read_bytes() == b"outside secret\n"
    assert lay.outside_unchanged()


def test_an_edit_without_create_through_a_hard_link_is_refused(lay):
    os.link(lay.outside / "secret.txt", lay.root / "hard.txt")
    with lay.ws() as ws:
        got = refusal(ws.open_for_write, "hard.txt", create=False, truncate=False)
    assert got == ("outside_root", "hard_link")
    assert lay.outside_unchanged()


# --- special files -----------------------------------------------------------------------


def test_a_fifo_is_refused_for_reading_and_writing_without_blocking(lay):
    os.mkfifo(lay.root / "pipe")
    with lay.ws() as ws:
        assert refusal(ws.open_for_read, "pipe") == ("not_a_regular_file", "fifo")
        assert refusal(write, ws, "pipe", b"x") == ("not_a_regular_file", "fifo")
        assert refusal(ws.check_path, "pipe") == ("not_a_regular_file", "fifo")


def test_a_socket_is_refused(lay):
    sock = socket.socket(socket.AF_UNIX)
    try:
        sock.bind(str(lay.root / "sock"))
        with lay.ws() as ws:
            assert refusal(ws.open_for_read, "sock") == ("not_a_regular_file", "socket")
    finally:
        sock.close()


def test_a_symlink_to_a_device_outside_is_refused(lay):
    (lay.root / "null").symlink_to("/dev/null")
    with lay.ws() as ws:
        assert all_refuse(ws, "null") == {("outside_root", "symlink_escape")}


def test_a_device_node_inside_the_root_is_refused(lay):
    try:
        os.mknod(lay.root / "zero", 0o600 | stat.S_IFCHR, os.makedev(1, 5))
    except PermissionError:
        pytest.skip("creating device nodes needs CAP_MKNOD")
    with lay.ws() as ws:
        assert all_refuse(ws, "zero") == {("not_a_regular_file", "character_device")}


def test_a_directory_is_not_a_regular_file(lay):
    with lay.ws() as ws:
        assert refusal(ws.open_for_read, "sub") == ("not_a_regular_file", "directory")
        assert ws.check_path("sub").inside_root


# --- malformed text ------------------------------------------------------------------------


def test_a_nul_byte_is_refused_before_any_lookup(lay):
    with lay.ws() as ws:
        assert all_refuse(ws, "a.txt\x00../../x") == {("invalid_tool_args", "nul_byte")}


def test_over_long_names_are_refused(lay):
    with lay.ws() as ws:
        assert all_refuse(ws, "n" * 256) == {("invalid_tool_args", "name_too_long")}
        long_path = "/".join(["d" * 250] * 17)
        assert all_refuse(ws, long_path) == {("invalid_tool_args", "name_too_long")}


# --- sensitive and protected ---------------------------------------------------------------


@pytest.mark.parametrize("name", [".env", ".ENV", ".env.production", "ID_RSA", "srv.Key"])
def test_sensitive_names_are_refused_in_any_case(lay, name):
    (lay.root / "sub" / name).write_text("secret")
    with lay.ws() as ws:
        got = all_refuse(ws, f"sub/{name}")
    assert got == {("sensitive_path_denied", "sensitive_path")}
    assert (lay.root / "sub" / name).read_text() == "secret"


def test_composed_and_decomposed_names_are_both_refused(lay):
    options = {"sensitive_path_denylist": ["café.txt"]}
    nfc, nfd = (unicodedata.normalize(f, "café.txt") for f in ("NFC", "NFD"))
    (lay.root / nfc).write_text("1")
    (lay.root / "sub" / nfd).write_text("2")
    with lay.ws(options) as ws:
        assert all_refuse(ws, nfc) == {("sensitive_path_denied", "sensitive_path")}
        assert all_refuse(ws, f"sub/{nfd}") == {("sensitive_path_denied", "sensitive_path")}


def test_a_symlink_with_an_innocent_name_to_a_sensitive_file_is_refused(lay):
    (lay.root / ".env").write_text("TOKEN=2")
    (lay.root / "notes.txt").symlink_to(".env")
    with lay.ws() as ws:
        with pytest.raises(ToolError) as exc:
            ws.open_for_read("notes.txt")
        assert exc.value.details["pattern"] == ".env"


def test_a_sensitive_directory_component_is_refused(lay):
    (lay.root / "deploy.key").mkdir()
    (lay.root / "deploy.key" / "readme").write_text("x")
    with lay.ws() as ws:
        got = all_refuse(ws, "deploy.key/readme")
    assert got == {("sensitive_path_denied", "sensitive_path")}


def test_the_sensitive_allowlist_makes_an_explicit_exception(lay):
    (lay.root / ".env.example").write_text("TOKEN=")
    (lay.root / ".env.local").write_text("TOKEN=3")
    with lay.ws({"sensitive_path_allowlist": [".env.example"]}) as ws:
        assert read(ws, ".env.example") == b"TOKEN="
        assert refusal(ws.open_for_read, ".env.local") == (
            "sensitive_path_denied",
            "sensitive_path",
        )


@pytest.mark.parametrize(
    ("path", "place"),
    [
        (".git/hooks/pre-commit", ".git/hooks/"),
        (".git/config", ".git/config"),
        (".roost/skills/x.md", ".roost/"),
    ],
)
def test_protected_files_are_readable_but_never_writable(lay, path, place):
    (lay.root / path).parent.mkdir(parents=True, exist_ok=True)
    (lay.root / path).write_text("original")
    with lay.ws() as ws:
        assert read(ws, path) == b"original"
        with pytest.raises(ToolError) as exc:
            write(ws, path, b"#!/bin/sh\nevil\n")
        assert (exc.value.code, exc.value.details) == (
            "sensitive_path_denied",
            {"path": path, "pattern": place, "reason": "protected_path"},
        )
        assert refusal(ws.check_path, path, write=True) == (
            "sensitive_path_denied",
            "protected_path",
        )
    assert (lay.root / path).read_text() == "original"


def test_a_new_hook_is_not_created(lay):
    (lay.root / ".git" / "hooks").mkdir(parents=True)
    with lay.ws() as ws:
        got = refusal(write, ws, ".git/hooks/post-checkout", b"evil", make_parents=True)
    assert got == ("sensitive_path_denied", "protected_path")
    assert list((lay.root / ".git" / "hooks").iterdir()) == []


def test_a_hook_reached_through_a_symlinked_directory_is_protected(lay):
    (lay.root / ".git" / "hooks").mkdir(parents=True)
    (lay.root / "hooks").symlink_to(".git/hooks")
    with lay.ws() as ws:
        got = refusal(write, ws, "hooks/pre-commit", b"evil")
    assert got == ("sensitive_path_denied", "protected_path")
    assert not (lay.root / ".git" / "hooks" / "pre-commit").exists()


def test_protected_places_are_matched_case_insensitively(lay):
    with lay.ws() as ws:
        got = refusal(write, ws, ".GIT/Hooks/pre-commit", b"x", make_parents=True)
    assert got == ("sensitive_path_denied", "protected_path")
    assert not (lay.root / ".GIT").exists()


def test_a_gitfile_cannot_be_planted(lay):
    with lay.ws() as ws:
        got = refusal(write, ws, "sub/.git", b"gitdir: /tmp/evil\n")
    assert got == ("sensitive_path_denied", "protected_path")


GIT_WRITES = [
    ".git/commondir",
    ".git/worktrees/wt/gitdir",
    ".git/modules/lib/commondir",
    ".git/config.lock",
    ".git/info/attributes",
    ".GIT/commondir",
    ".git/./commondir",
    "sub/../.git/commondir",
    "lnk/commondir",
    "lnk/worktrees/wt/gitdir",
    "sub/nested/.git/commondir",
]
"""Writes that would change what git runs or where it reads config, hooks, attributes from."""


def git_repo(root: Path) -> dict[str, bytes]:
    """A ``.git`` with the files git redirects through, a symlink to it, a nested repo."""
    files = {
        ".git/commondir": b"../.git-common\n",
        ".git/worktrees/wt/gitdir": b"/srv/wt/.git\n",
        ".git/modules/lib/commondir": b"../..\n",
        ".git/config.lock": b"",
        ".git/info/attributes": b"",
        "sub/nested/.git/commondir": b"..\n",
    }
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    (root / "lnk").symlink_to(".git")
    return files


@pytest.mark.parametrize("path", GIT_WRITES)
def test_nothing_inside_a_git_directory_is_writable(lay, path):
    files = git_repo(lay.root)
    with lay.ws() as ws:
        with pytest.raises(ToolError) as exc:
            write(ws, path, b"/tmp/attacker\n", make_parents=True)
        assert (exc.value.code, exc.value.details) == (
            "sensitive_path_denied",
            {"path": path, "pattern": ".git/", "reason": "protected_path"},
        )
        assert refusal(ws.check_path, path, write=True) == (
            "sensitive_path_denied",
            "protected_path",
        )
    assert {rel: (lay.root / rel).read_bytes() for rel in files} == files
    assert not (lay.root / ".GIT").exists()


@pytest.mark.parametrize("path", [".git/commondir", "lnk/commondir", ".git/worktrees/wt/gitdir"])
def test_files_inside_a_git_directory_stay_readable(lay, path):
    files = git_repo(lay.root)
    with lay.ws() as ws:
        assert read(ws, path) == files[path.replace("lnk/", ".git/")]


def test_a_head_file_that_would_make_a_bare_repository_is_not_written(lay):
    (lay.root / "sub" / "HEAD").write_text("ref: refs/heads/main\n")
    with lay.ws() as ws:
        assert read(ws, "sub/HEAD") == b"ref: refs/heads/main\n"
        for path in ("sub/HEAD", "other/HEAD"):
            with pytest.raises(ToolError) as exc:
                write(ws, path, b"ref: refs/heads/evil\n", make_parents=True)
            assert (exc.value.code, exc.value.details) == (
                "sensitive_path_denied",
                {"path": path, "pattern": "HEAD", "reason": "protected_path"},
            )
    assert (lay.root / "sub" / "HEAD").read_text() == "ref: refs/heads/main\n"
    assert not (lay.root / "other" / "HEAD").exists()


@pytest.fixture
def user_home(tmp_path, monkeypatch) -> Path:
    """A user's home directory with git's global config files, as this process's HOME."""
    home = tmp_path / "user"
    (home / ".config" / "git").mkdir(parents=True)
    (home / ".config" / "other").mkdir()
    (home / ".gitconfig").write_text("[user]\n\tname = me\n")
    monkeypatch.setenv("HOME", str(home))
    for key in ("XDG_CONFIG_HOME", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM"):
        monkeypatch.delenv(key, raising=False)
    return home


@pytest.mark.parametrize(
    ("path", "place"),
    [
        (".gitconfig", "~/.gitconfig"),
        (".GITCONFIG", "~/.gitconfig"),
        (".config/git/config", "$XDG_CONFIG_HOME/git/"),
        (".config/git/attributes", "$XDG_CONFIG_HOME/git/"),
        (".config/./git/../git/ignore", "$XDG_CONFIG_HOME/git/"),
        ("alias/.gitconfig", "~/.gitconfig"),
    ],
)
@pytest.mark.parametrize("mode", list(MODES))
def test_a_project_on_the_user_home_never_writes_gits_global_config(user_home, mode, path, place):
    (user_home / "alias").symlink_to(user_home)
    with Workspace(str(user_home), {}, **MODES[mode]) as ws:
        with pytest.raises(ToolError) as exc:
            write(ws, path, b"[core]\n\tfsmonitor = /tmp/evil\n", make_parents=True)
        assert (exc.value.code, exc.value.details) == (
            "sensitive_path_denied",
            {"path": path, "pattern": place, "reason": "protected_path"},
        )
        assert read(ws, ".gitconfig") == b"[user]\n\tname = me\n"
        write(ws, ".config/other/settings", b"ok")
    assert (user_home / ".gitconfig").read_text() == "[user]\n\tname = me\n"
    assert sorted(p.name for p in (user_home / ".config" / "git").iterdir()) == []


def test_gits_config_places_follow_the_environment(user_home, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "global.cfg"))
    other = tmp_path / "other-root"
    other.mkdir()
    entry = {"path": str(tmp_path), "reason_code": "everything_here"}
    with Workspace(str(other), {"outside_root_allowlist": [entry]}) as ws:
        for path, place in (
            (tmp_path / "xdg" / "git" / "config", "$XDG_CONFIG_HOME/git/"),
            (tmp_path / "global.cfg", "$GIT_CONFIG_GLOBAL"),
            (user_home / ".gitconfig", "~/.gitconfig"),
        ):
            with pytest.raises(ToolError) as exc:
                ws.check_path(str(path), write=True)
            assert (exc.value.details["reason"], exc.value.details["pattern"]) == (
                "protected_path",
                place,
            )
        assert ws.check_path(str(tmp_path / "global.cfg")).exception_reason_code == (
            "everything_here"
        )


def test_a_directory_swapped_for_a_symlink_to_git_after_the_check_is_refused(lay):
    git_repo(lay.root)
    (lay.root / "notes").mkdir()
    (lay.root / "notes" / "commondir").write_text("harmless\n")
    with lay.ws() as ws:
        assert ws.check_path("notes/commondir", write=True).inside_root
        (lay.root / "notes").rename(lay.root / "notes.old")
        (lay.root / "notes").symlink_to(".git")
        got = refusal(write, ws, "notes/commondir", b"/tmp/attacker\n")
    assert got == ("sensitive_path_denied", "protected_path")
    assert (lay.root / ".git" / "commondir").read_bytes() == b"../.git-common\n"


# --- outside_root_allowlist ----------------------------------------------------------------


def test_an_allowlisted_directory_lets_its_files_through_with_the_reason_code(lay):
    entry = {"path": str(lay.outside), "reason_code": "shared_fixtures"}
    with lay.ws({"outside_root_allowlist": [entry]}) as ws:
        decision = ws.check_path(str(lay.outside / "secret.txt"))
        assert decision == PathDecision(
            resolved=str(lay.outside / "secret.txt"),
            inside_root=False,
            exception_reason_code="shared_fixtures",
        )
        assert read(ws, "../outside/secret.txt") == b"outside secret\n"


def test_an_allowlisted_file_covers_only_that_file(lay):
    (lay.outside / "other.txt").write_text("other")
    entry = {"path": str(lay.outside / "secret.txt"), "reason_code": "one_file"}
    with lay.ws({"outside_root_allowlist": [entry]}) as ws:
        assert ws.check_path(str(lay.outside / "secret.txt")).exception_reason_code == "one_file"
        assert refusal(ws.open_for_read, str(lay.outside / "other.txt")) == (
            "outside_root",
            "absolute_outside",
        )


def test_an_allowlisted_pattern_matches_the_resolved_path(lay):
    (lay.root / "door").symlink_to(lay.outside)
    entry = {"pattern": "*/outside/*.txt", "reason_code": "txt_only"}
    with lay.ws({"outside_root_allowlist": [entry]}) as ws:
        decision = ws.check_path("door/secret.txt")
        assert (decision.inside_root, decision.exception_reason_code) == (False, "txt_only")
        assert read(ws, "door/secret.txt") == b"outside secret\n"


def test_an_allowlisted_outside_file_can_be_written(lay):
    entry = {"path": str(lay.outside), "reason_code": "scratch"}
    with lay.ws({"outside_root_allowlist": [entry]}) as ws:
        write(ws, str(lay.outside / "out.txt"), b"result")
    assert (lay.outside / "out.txt").read_bytes() == b"result"


def test_the_allowlist_never_bypasses_the_sensitive_denylist(lay):
    entry = {"path": str(lay.outside), "reason_code": "shared"}
    with lay.ws({"outside_root_allowlist": [entry]}) as ws:
        got = all_refuse(ws, str(lay.outside / ".env"))
    assert got == {("sensitive_path_denied", "sensitive_path")}
    assert lay.outside_unchanged()


def test_a_sibling_with_a_common_prefix_is_not_covered(lay):
    sibling = lay.root.parent / "outside-other"
    sibling.mkdir()
    (sibling / "x.txt").write_text("x")
    entry = {"path": str(lay.outside), "reason_code": "shared"}
    with lay.ws({"outside_root_allowlist": [entry]}) as ws:
        assert refusal(ws.open_for_read, str(sibling / "x.txt")) == (
            "outside_root",
            "absolute_outside",
        )


def test_an_allowlisted_outside_fifo_is_still_not_a_regular_file(lay):
    os.mkfifo(lay.outside / "pipe")
    entry = {"path": str(lay.outside), "reason_code": "shared"}
    with lay.ws({"outside_root_allowlist": [entry]}) as ws:
        assert refusal(ws.open_for_read, str(lay.outside / "pipe")) == (
            "not_a_regular_file",
            "fifo",
        )


# --- ROOST_HOME -------------------------------------------------------------------------------


@pytest.fixture
def home(tmp_path) -> Iterator[Path]:
    """A ROOST_HOME next to the layout, protected in this process while the test runs."""
    path = tmp_path / "state" / "roost"
    (path / "mailbox").mkdir(parents=True)
    (path / "journal.sqlite").write_bytes(b"SQLite format 3\x00")
    (path / "roost.pid").write_text("4242\n")
    protect_state_home(str(path))
    yield path
    protect_state_home(None)


EVERYTHING = [{"path": "/", "reason_code": "everything"}]


@pytest.mark.parametrize(
    "options",
    [
        {"outside_root_allowlist": EVERYTHING},
        {"outside_root_allowlist": [{"pattern": "*", "reason_code": "everything"}]},
        {"outside_root_allowlist": [{"path": "..", "reason_code": "parent"}]},
    ],
    ids=["path_slash", "pattern_star", "path_parent"],
)
def test_no_allowlist_entry_reaches_roost_home(lay, home, options):
    before = tree_state(home)
    with lay.ws(options) as ws:
        for path in (
            str(home / "journal.sqlite"),
            str(home / "roost.pid"),
            str(home / "mailbox" / "m-1"),
            str(home),
            "../state/roost/journal.sqlite",
            "../state/./roost//roost.pid",
        ):
            with pytest.raises(ToolError) as exc:
                ws.check_path(path)
            assert (exc.value.code, exc.value.details) == (
                "sensitive_path_denied",
                {"path": path, "pattern": "ROOST_HOME", "reason": "protected_path"},
            )
        assert refusal(ws.open_for_read, str(home / "journal.sqlite")) == (
            "sensitive_path_denied",
            "protected_path",
        )
        assert refusal(write, ws, str(home / "roost.pid"), b"1\n") == (
            "sensitive_path_denied",
            "protected_path",
        )
        assert refusal(write, ws, str(home / "mailbox" / "m-1"), b"x") == (
            "sensitive_path_denied",
            "protected_path",
        )
        assert refusal(ws.open_dir, str(home / "mailbox")) == (
            "sensitive_path_denied",
            "protected_path",
        )
        # the same entry still lets everything else through
        assert read(ws, str(lay.outside / "secret.txt")) == b"outside secret\n"
    assert tree_state(home) == before


def test_roost_home_through_a_symlink_in_the_root_is_refused(lay, home):
    (lay.root / "door").symlink_to(home.parent)
    with lay.ws({"outside_root_allowlist": EVERYTHING}) as ws:
        assert all_refuse(ws, "door/roost/journal.sqlite") == {
            ("sensitive_path_denied", "protected_path")
        }
    assert (home / "journal.sqlite").read_bytes() == b"SQLite format 3\x00"


def test_a_root_inside_roost_home_reaches_nothing(tmp_path, home):
    (home / "inner").mkdir()
    (home / "inner" / "x.txt").write_text("x")
    with Workspace(str(home / "inner"), {}) as ws:
        assert all_refuse(ws, "x.txt") == {("sensitive_path_denied", "protected_path")}


def test_without_a_configured_home_the_environment_names_it(tmp_path, monkeypatch):
    protect_state_home(None)
    monkeypatch.setenv("ROOST_HOME", str(tmp_path / "h" / "..") + "/h/")
    (tmp_path / "h").mkdir()
    assert state_home() == str(tmp_path / "h")
    monkeypatch.delenv("ROOST_HOME")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert state_home() == str(tmp_path / ".local" / "state" / "roost")


@pytest.mark.parametrize(
    ("root", "home", "conflict"),
    [
        ("base", "base/state/roost", "contains_roost_home"),
        ("base", "base", "contains_roost_home"),
        ("base/", "base/./state/../state/roost/", "contains_roost_home"),
        ("base/state/roost/projects/p", "base/state/roost", "inside_roost_home"),
        ("base/state/roost/../roost/x", "base/state/roost", "inside_roost_home"),
        ("link-to-base", "base/state/roost", "contains_roost_home"),
        ("base/repo", "link-to-base/state/roost", None),
        ("base/repo", "base/state/roost", None),
        ("base/state/roost2", "base/state/roost", None),
        ("base/state/ro", "base/state/roost", None),
    ],
)
def test_a_root_that_contains_or_lies_inside_the_home_is_named(tmp_path, root, home, conflict):
    for rel in ("base/state/roost/projects/p", "base/state/roost/x", "base/repo"):
        (tmp_path / rel).mkdir(parents=True, exist_ok=True)
    (tmp_path / "base/state/roost2").mkdir()
    (tmp_path / "base/state/ro").mkdir()
    (tmp_path / "link-to-base").symlink_to(tmp_path / "base")
    assert root_home_conflict(f"{tmp_path}/{root}", f"{tmp_path}/{home}") == conflict


def test_the_root_of_the_filesystem_contains_every_home(tmp_path):
    assert root_home_conflict("/", str(tmp_path)) == "contains_roost_home"


@pytest.mark.parametrize(
    ("root", "home", "conflict"),
    [
        ("a", "b/state", "contains_roost_home"),  # the root is b by another path
        ("b/repo", "a", "inside_roost_home"),  # the home is b by another path
        ("a", "b", "contains_roost_home"),  # the same directory twice: the root wins
        ("a/repo", "c/state", None),
    ],
)
def test_the_same_directory_by_another_path_is_recognised_by_device_and_inode(
    tmp_path, monkeypatch, root, home, conflict
):
    for rel in ("a/repo", "b/state", "b/repo", "c/state"):
        (tmp_path / rel).mkdir(parents=True, exist_ok=True)
    real_dir_id = workspace_module._dir_id
    b = real_dir_id(str(tmp_path / "b"))

    def dir_id(path: str) -> tuple[int, int] | None:  # a is a bind mount of b
        return b if path == str(tmp_path / "a") else real_dir_id(path)

    monkeypatch.setattr(workspace_module, "_dir_id", dir_id)
    assert root_home_conflict(f"{tmp_path}/{root}", f"{tmp_path}/{home}") == conflict


# --- races: the open is the enforcement point -----------------------------------------------


def test_a_directory_swapped_for_an_outside_symlink_after_the_check_is_refused(lay):
    with lay.ws() as ws:
        assert ws.check_path("sub/b.txt").inside_root
        assert ws.check_path("sub/secret.txt", write=True).inside_root
        (lay.root / "sub").rename(lay.root / "sub.old")
        (lay.root / "sub").symlink_to(lay.outside)
        assert refusal(ws.open_for_read, "sub/secret.txt") == ("outside_root", "symlink_escape")
        assert refusal(write, ws, "sub/secret.txt", b"pwned") == (
            "outside_root",
            "symlink_escape",
        )
    assert lay.outside_unchanged()


def test_a_file_swapped_for_a_symlink_to_a_secret_after_the_check_is_refused(lay):
    (lay.root / ".env").write_text("TOKEN=4")
    with lay.ws() as ws:
        assert ws.check_path("a.txt").inside_root
        (lay.root / "a.txt").unlink()
        (lay.root / "a.txt").symlink_to(".env")
        assert refusal(ws.open_for_read, "a.txt") == ("sensitive_path_denied", "sensitive_path")


def test_a_file_swapped_for_a_fifo_after_the_check_does_not_block(lay):
    with lay.ws() as ws:
        assert ws.check_path("a.txt").inside_root
        (lay.root / "a.txt").unlink()
        os.mkfifo(lay.root / "a.txt")
        assert refusal(ws.open_for_read, "a.txt") == ("not_a_regular_file", "fifo")
        assert refusal(write, ws, "a.txt", b"x") == ("not_a_regular_file", "fifo")


# --- extraction, signals -------------------------------------------------------------------


def test_check_all_paths_refuses_a_path_hidden_in_key_value_text(lay):
    args = {"command": "run", "opts": ['{"cfg": "mode=x path=../outside/secret.txt"}']}
    with lay.ws() as ws:
        assert refusal(check_all_paths, ws, args, write=False) == ("outside_root", "dotdot")


def test_check_all_paths_returns_a_decision_per_path(lay):
    args = {"cwd": "sub", "files": ["a.txt", "sub/b.txt"]}
    with lay.ws() as ws:
        decisions = check_all_paths(ws, args, write=False)
    assert [d.resolved for d in decisions] == [
        str(lay.root / "sub"),
        str(lay.root / "a.txt"),
        str(lay.root / "sub" / "b.txt"),
    ]


def test_refusals_map_to_their_security_signals():
    violation = ToolError("outside_root", "m", path="../x", reason="dotdot")
    sensitive = ToolError("sensitive_path_denied", "m", path=".env", reason="sensitive_path")
    assert signal_for(violation, "fs.read", "c1") == SecuritySandboxViolation(
        tool="fs.read", path="../x", reason="dotdot", call_id="c1"
    )
    assert signal_for(sensitive, "fs.write", "c2") == SecuritySensitivePathDenied(
        tool="fs.write", path=".env", reason="sensitive_path", call_id="c2"
    )
    assert signal_for(ToolError("tool_error", "m", reason="not_found"), "fs.read", "c3") is None


def test_an_exception_decision_maps_to_sandbox_exception_used():
    decision = PathDecision(resolved="/srv/x", inside_root=False, exception_reason_code="ci")
    assert exception_signal(decision, "fs.read", "c1") == SecuritySandboxExceptionUsed(
        reason_code="ci", path="/srv/x", tool="fs.read", call_id="c1"
    )
    inside = PathDecision(resolved="/r/x", inside_root=True)
    assert exception_signal(inside, "fs.read", "c1") is None


# --- a property: the decision agrees with the kernel's own resolution ------------------------

_PARTS = st.sampled_from(["a.txt", "sub", "b.txt", "..", ".", "up", "out", "in", "new"])


@pytest.mark.parametrize("mode", list(MODES))
@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parts=st.lists(_PARTS, min_size=1, max_size=6))
def test_an_accepted_path_is_where_realpath_puts_it_and_an_escaping_one_is_refused(
    tmp_path, mode, parts
):
    if mode == "openat2" and not openat2.available():
        pytest.skip("openat2 is not available on this kernel")
    root = tmp_path / "root"
    if not root.exists():
        Layout(tmp_path, {})
        (root / "sub" / "up").symlink_to("..")
        (root / "sub" / "out").symlink_to("../../outside")
        (root / "in").symlink_to("sub")
    path = "/".join(parts)
    real = os.path.realpath(root / path)
    inside = real == str(root) or real.startswith(f"{root}/")
    with Workspace(str(root), {}, **MODES[mode]) as ws:
        try:
            decision = ws.check_path(path)
        except ToolError as err:
            assert err.code in ("outside_root", "tool_error", "not_a_regular_file")
            if not inside:  # realpath is lexical where the kernel says "a.txt/..": ENOTDIR
                assert err.code == "outside_root" or err.details["reason"] == "not_a_directory"
            return
    assert inside
    assert decision.resolved == real


def test_git_config_places_are_resolved_only_when_a_write_is_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a workspace is made per tool call and per policy decision, most of them reads
    home = tmp_path / "user"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    root = tmp_path / "project"
    root.mkdir()
    (root / "a.txt").write_text("x")
    resolved: list[int] = []
    places = workspace_module.git_config_places
    monkeypatch.setattr(
        workspace_module, "git_config_places", lambda: resolved.append(1) or places()
    )
    outside = {"outside_root_allowlist": [{"path": str(home), "reason_code": "user_home"}]}
    with workspace_module.Workspace(str(root), outside) as ws:
        ws.check_path("a.txt")
        assert resolved == []

        with pytest.raises(ToolError) as caught:
            ws.check_path(str(home / ".gitconfig"), write=True)
        ws.check_path("a.txt", write=True)

    assert caught.value.details["pattern"] == "~/.gitconfig"
    assert resolved == [1]  # once per workspace
