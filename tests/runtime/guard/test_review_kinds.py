"""Each kind of entry a run leaves: how the review names and describes it, how a quarantine
defuses what it moved out (set-id bits stripped, special files removed, links left)."""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path

from runtime.guard.home import roost_home
from runtime.guard.paths.rules import SensitiveRules
from runtime.guard.review import quarantine
from runtime.guard.review.rootreview import Change, RootReview


def _review(root: Path) -> RootReview:
    return RootReview(
        str(root),
        project_id="p",
        run_id="r",
        rules=SensitiveRules((".env",)),
        gits=frozenset(),
        missing=(),
    )


def test_each_kind_of_entry_is_described_by_its_kind(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_bytes(b"abc")
    (tmp_path / ".env").write_bytes(b"SECRET=1")
    (tmp_path / "d").mkdir()
    (tmp_path / "in").symlink_to("a.txt")
    (tmp_path / "out").symlink_to("/etc/passwd")
    review = _review(tmp_path)
    described = {
        name: review._describe(name, os.lstat(tmp_path / name))
        for name in ("a.txt", ".env", "d", "in", "out")
    }
    assert described == {
        "a.txt": Change(
            path="a.txt",
            kind="file",
            size=3,
            sha256="ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
        ),
        ".env": Change(path=".env", kind="file", size=8),
        "d": Change(path="d", kind="dir"),
        "in": Change(path="in", kind="symlink", target="a.txt"),
        "out": Change(path="out", kind="symlink", target="/etc/passwd", outside_root=True),
    }


def test_fifos_sockets_and_devices_are_named_by_their_kind(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(tmp_path / "s.sock"))
        review = _review(tmp_path)
        kinds = {
            name: review._describe(name, os.lstat(tmp_path / name)).kind
            for name in ("pipe", "s.sock")
        }
    null = os.stat("/dev/null")
    assert kinds == {"pipe": "fifo", "s.sock": "socket"}
    assert review._describe("null", null) == Change(path="null", kind="device")


def test_a_moved_out_tree_keeps_its_files_and_links_and_loses_set_id_bits_and_fifos(
    tmp_path: Path,
) -> None:
    tree = tmp_path / "tree"
    (tree / "sub").mkdir(parents=True)
    (tree / "plain").write_text("x")
    (tree / "sub" / "suid").write_text("x")
    os.chmod(tree / "sub" / "suid", 0o4755)
    (tree / "sgid").write_text("x")
    os.chmod(tree / "sgid", 0o2750)
    os.mkfifo(tree / "sub" / "pipe")
    (tree / "link").symlink_to("/nonexistent")
    quarantine._defuse(str(tree))
    assert sorted(str(p.relative_to(tree)) for p in tree.rglob("*")) == [
        "link",
        "plain",
        "sgid",
        "sub",
        "sub/suid",
    ]
    assert stat.S_IMODE((tree / "sub" / "suid").stat().st_mode) == 0o755
    assert stat.S_IMODE((tree / "sgid").stat().st_mode) == 0o750
    assert os.readlink(tree / "link") == "/nonexistent"


def test_each_entry_is_quarantined_for_the_first_rule_it_breaks(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    roost_home.protect(str(home))
    root = tmp_path / "root"
    (root / "bare" / "objects").mkdir(parents=True)
    (root / "bare" / "refs").mkdir()
    (root / "bare" / "HEAD").write_text("ref: refs/heads/main\n")
    (root / "notes.txt").write_text("n\n")
    os.link(root / "notes.txt", root / ".env")  # a hard link under a sensitive name
    os.chmod(root / "notes.txt", 0o4755)  # the same inode: set-uid too
    (root / "plain.sh").write_text("x")
    os.chmod(root / "plain.sh", 0o2755)
    (root / "only_sgid").write_text("x")
    os.chmod(root / "only_sgid", 0o2644)  # set-gid without group execution: not set-id
    os.mkfifo(root / "pipe")
    review = RootReview(
        str(root),
        project_id="p",
        run_id="r",
        rules=SensitiveRules((".env",)),
        gits=frozenset(),
        missing=(),
    )
    try:
        review.walk(0.0)
    finally:
        roost_home.protect(None)
    assert sorted((q.path, q.reason) for q in review.quarantined) == [
        (".env", "sensitive_alias"),
        ("bare/HEAD", "bare_repository"),
        ("bare/objects", "bare_repository"),
        ("bare/refs", "bare_repository"),
        ("notes.txt", "setid_file"),
        ("pipe", "special_file"),
        ("plain.sh", "setid_file"),
    ]
