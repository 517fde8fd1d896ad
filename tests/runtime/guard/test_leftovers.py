"""The review after a run (``leftovers``), its walk (``rootscan``), its records (``run_ledger``).

Plain code, no sandbox: the test process plays the command (it changes the root between
``begin`` and ``review``), which is what inotify sees through a bind mount too.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime.guard.home import roost_home
from runtime.guard.paths.rules import SensitiveRules
from runtime.guard.review import inotify, leftovers, run_ledger
from runtime.guard.review.leftovers import RootWatch, begin, recover_runs
from runtime.guard.review.rootscan import scan_paths
from runtime.guard.review.run_ledger import RunLabel, dead_runs
from tests import nobody


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    place = tmp_path / "home"
    place.mkdir()
    roost_home.protect(str(place))
    yield place
    roost_home.protect(None)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    place = tmp_path / "root"
    (place / ".git" / "objects").mkdir(parents=True)
    (place / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (place / "src" / "deep").mkdir(parents=True)
    (place / "src" / "a.py").write_text("a\n")
    (place / "notes.txt").write_text("notes\n")
    return place


def watch(root: Path, **kwargs: object) -> RootWatch:
    scan = scan_paths([str(root)], SensitiveRules([".env"]))
    protected = [str(root / ".roost")]
    return begin(str(root), scan, protected=protected, rules=SensitiveRules([".env"]), **kwargs)  # type: ignore[arg-type]


def reasons(report: leftovers.ChangeReport) -> dict[str, str]:
    return {q.path: q.reason for q in report.quarantined}


def test_the_walk_finds_directories_gits_bare_shapes_and_sensitive_entries(root: Path) -> None:
    (root / "vendor" / "lib" / ".git").mkdir(parents=True)
    bare = root / "fixtures" / "bare.git"
    (bare / "objects").mkdir(parents=True)
    (bare / "refs").mkdir()
    (bare / "HEAD").write_text("ref: refs/heads/main\n")
    (root / "src" / ".env").write_text("K=v\n")
    scan = scan_paths([str(root)], SensitiveRules([".env"]))
    assert scan.git == (str(root / ".git"), str(root / "vendor" / "lib" / ".git"))
    assert scan.bare == (str(bare),)
    assert scan.sensitive == (str(root / "src" / ".env"),)
    assert str(root / ".git") not in scan.directories
    assert {str(root), str(root / "src" / "deep"), str(bare / "objects")} <= set(scan.directories)


def test_created_modified_and_deleted_entries_are_reported_with_sizes_and_hashes(
    root: Path, home: Path
) -> None:
    w = watch(root)
    (root / "src" / "a.py").write_text("changed\n")
    (root / "notes.txt").unlink()
    (root / "new").mkdir()
    (root / "new" / "b.txt").write_text("bee\n")
    (root / "src" / ".env").write_text("SECRET=1\n")
    (root / "tmp.txt").write_text("x")
    (root / "tmp.txt").unlink()
    report = w.review()
    assert report.method == "inotify"
    assert [(c.path, c.kind, c.size) for c in report.created] == [
        ("new", "dir", None),
        ("new/b.txt", "file", 4),
        ("src/.env", "file", 9),
    ]
    assert report.created[1].sha256 == hashlib.sha256(b"bee\n").hexdigest()
    assert report.created[2].sha256 is None  # a sensitive file's hash is not recorded
    assert [(c.path, c.size) for c in report.modified] == [("src/a.py", 8)]
    assert [c.path for c in report.deleted] == ["notes.txt"]
    assert report.quarantined == []


def test_a_new_repository_a_bare_shape_a_new_roost_and_special_files_are_quarantined(
    root: Path, home: Path
) -> None:
    w = watch(root, label=RunLabel(project_id="p", call_id="call-1", run_id="run1"))
    (root / "src" / ".git").mkdir()
    (root / "src" / ".git" / "config").write_text("[core]\n\tfsmonitor = x\n")
    (root / "HEAD").write_text("ref: refs/heads/main\n")
    (root / "objects").mkdir()
    (root / "refs").mkdir()
    (root / "config").write_text("[core]\n\tpager = x\n")
    (root / ".roost" / "commands").mkdir(parents=True)
    os.mkfifo(root / "src" / "pipe")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(root / "s.sock"))
    sock.close()
    report = w.review()
    assert reasons(report) == {
        "src/.git": "git_dir_created",
        "HEAD": "bare_repository",
        "objects": "bare_repository",
        "refs": "bare_repository",
        "config": "bare_repository",
        ".roost": "assets_created",
        "src/pipe": "special_file",
        "s.sock": "special_file",
    }
    target = home / "quarantine" / "p" / "run1"
    assert (target / "src" / ".git" / "config").read_text() == "[core]\n\tfsmonitor = x\n"
    assert sorted(os.listdir(root)) == [".git", "notes.txt", "src"]
    assert (root / ".git" / "HEAD").is_file()  # the repository that was there stays
    assert not os.listdir(run_ledger.runs_dir())  # the record went with the review


def test_a_set_id_file_is_moved_out_without_its_bits(root: Path, home: Path) -> None:
    w = watch(root)
    helper = root / "src" / "helper"
    helper.write_bytes(b"#!/bin/sh\n")
    (root / "group").write_bytes(b"#!/bin/sh\n")
    helper.chmod(0o4755)
    (root / "group").chmod(0o2755)
    (root / "notes.txt").chmod(0o2644)  # set-gid without group execute: not an executable
    report = w.review()
    assert reasons(report) == {"src/helper": "setid_file", "group": "setid_file"}
    for q in report.quarantined:
        assert q.moved_to is not None
        assert not os.lstat(q.moved_to).st_mode & (stat.S_ISUID | stat.S_ISGID)
    assert not helper.exists()


def test_a_path_under_a_symlink_the_run_left_is_never_followed(
    root: Path, home: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "pipe-target").write_text("keep\n")
    w = watch(root)
    (root / "src" / "deep" / "x").write_text("x\n")
    os.rename(root / "src", root / "moved")
    (root / "src").symlink_to(outside)
    report = w.review()
    assert (outside / "pipe-target").read_text() == "keep\n"
    modified = {c.path: c for c in report.modified}
    assert modified["src"].kind == "symlink" and modified["src"].outside_root
    assert "moved/deep/x" in {c.path for c in report.created}


def test_without_inotify_or_after_an_overflow_the_whole_root_is_walked(
    root: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(self: inotify.Inotify) -> None:
        raise OSError(24, "Too many open files")

    monkeypatch.setattr(inotify.Inotify, "__init__", refuse)
    w = watch(root)
    time.sleep(0.01)
    os.mkfifo(root / "pipe")
    (root / "sub" / ".git").mkdir(parents=True)
    report = w.review()
    assert report.method == "walk"
    assert report.detail.startswith("inotify unavailable (Too many open files)")
    assert reasons(report) == {"pipe": "special_file", "sub/.git": "git_dir_created"}
    assert (root / ".git" / "HEAD").is_file()


def test_a_dead_runs_record_is_reviewed_once_and_kept_until_recorded(
    root: Path, home: Path
) -> None:
    child = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    w = watch(root, label=RunLabel(project_id="p", call_id="call-7", run_id="dead1"))
    assert w.record is not None
    w.record.pid = int(child.stdout)  # the process that ran it is gone
    run_ledger.save_run(w.record)
    w.close()
    os.mkfifo(root / "pipe")
    assert [r.label.run_id for r in dead_runs("p")] == ["dead1"]
    assert dead_runs("other") == []

    ((record, report),) = recover_runs("p")
    assert (record.label.call_id, report.method) == ("call-7", "walk")
    assert reasons(report) == {"pipe": "special_file"}
    again = recover_runs("p")  # not walked twice: the stored report comes back
    assert [r.quarantined for _, r in again] == [report.quarantined]
    run_ledger.close_run(record)
    assert recover_runs("p") == []


def test_a_live_runs_record_is_left_alone(root: Path, home: Path) -> None:
    w = watch(root, label=RunLabel(project_id="p", call_id="call-8"))
    assert dead_runs() == [] and len(run_ledger.live_runs()) == 1
    w.review()
    assert run_ledger.live_runs() == []


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to switch to an unprivileged uid")
def test_the_review_works_for_an_unprivileged_daemon() -> None:
    """The review is plain Python: a daemon's uid 65534 quarantines its own leftovers."""
    place = Path(tempfile.mkdtemp(prefix="roost-nobody-", dir="/var/tmp"))
    os.chown(place, nobody.NOBODY, nobody.NOBODY)
    script = (
        "import os, sys\n"
        "from runtime.guard.home import roost_home\n"
        "from runtime.guard.review.leftovers import begin\n"
        "from runtime.guard.review.rootscan import scan_paths\n"
        "from runtime.guard.paths.rules import SensitiveRules\n"
        "base = sys.argv[1]; root = os.path.join(base, 'root'); os.mkdir(root)\n"
        "roost_home.protect(os.path.join(base, 'home'))\n"
        "w = begin(root, scan_paths([root], SensitiveRules(())))\n"
        "open(os.path.join(root, 'h'), 'w').close(); os.chmod(os.path.join(root, 'h'), 0o4755)\n"
        "os.mkfifo(os.path.join(root, 'p'))\n"
        "r = w.review()\n"
        "print(os.getuid(), r.method, sorted((q.path, q.reason) for q in r.quarantined))\n"
    )
    try:
        done = subprocess.run(
            [
                *nobody.as_nobody(),
                nobody.SYSTEM_PYTHON,
                "-c",
                script,
                str(place),
            ],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": nobody.pythonpath()},
            check=False,
        )
    finally:
        shutil.rmtree(place, ignore_errors=True)
    assert done.stdout == ("65534 inotify [('h', 'setid_file'), ('p', 'special_file')]\n"), (
        done.stderr
    )


def test_a_kept_watch_reports_each_call_apart_and_watches_the_directories_it_made(
    root: Path, home: Path
) -> None:
    """A long-lived process (an MCP stdio server) is reviewed after each of its calls."""
    w = watch(root, label=RunLabel(project_id="p", call_id="server"))
    (root / "made" / "inner").mkdir(parents=True)
    first = w.review(keep=True)
    assert [c.path for c in first.created] == ["made", "made/inner"]
    os.mkfifo(root / "made" / "inner" / "pipe")  # in a directory the first call made
    (root / "made" / "inner" / "f.txt").write_text("f\n")
    second = w.review(keep=True)
    assert [c.path for c in second.created] == ["made/inner/f.txt"]
    assert reasons(second) == {"made/inner/pipe": "special_file"}
    assert len(run_ledger.live_runs()) == 1  # the record stays while the process lives
    assert w.review().empty
    assert run_ledger.live_runs() == []


def test_an_overflowed_queue_makes_the_review_walk_the_root(
    root: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    w = watch(root)
    (root / "sub" / ".git").mkdir(parents=True)
    monkeypatch.setattr(inotify.Inotify, "drain", lambda self: ([], True))
    report = w.review()
    assert (report.method, report.detail) == (
        "walk",
        "the inotify queue overflowed: the whole root was walked",
    )
    assert reasons(report) == {"sub/.git": "git_dir_created"}


@pytest.mark.skipif(os.geteuid() != 0, reason="making a device node needs CAP_MKNOD")
def test_a_device_node_is_removed(root: Path, home: Path) -> None:
    w = watch(root)
    os.mknod(root / "src" / "null", 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    report = w.review()
    assert [(q.path, q.reason, q.kind, q.moved_to) for q in report.quarantined] == [
        ("src/null", "special_file", "device", None)
    ]
    assert not os.path.lexists(root / "src" / "null")


def test_an_entry_that_cannot_be_moved_out_is_reported_as_still_there(
    root: Path, home: Path
) -> None:
    w = watch(root, label=RunLabel(project_id="p", call_id="c", run_id="blocked"))
    (home / "quarantine" / "p").mkdir(parents=True)
    (home / "quarantine" / "p" / "blocked").write_text("not a directory\n")
    (root / "sub" / ".git").mkdir(parents=True)
    report = w.review()
    [entry] = report.quarantined
    assert (entry.path, entry.moved_to) == ("sub/.git", None)
    assert entry.error is not None and entry.error.startswith("NotADirectoryError")
    assert (root / "sub" / ".git").is_dir()


def test_a_directory_made_where_a_symlinked_roost_was_is_quarantined(
    root: Path, home: Path
) -> None:
    (root / "config").mkdir()
    (root / ".roost").symlink_to("config")
    w = watch(root)
    (root / ".roost").unlink()
    (root / ".roost" / "commands").mkdir(parents=True)
    (root / ".roost" / "commands" / "x.md").write_text('---\nargv: ["id"]\n---\n')
    report = w.review()
    assert reasons(report) == {".roost": "assets_created"}
    assert not os.path.lexists(root / ".roost")
