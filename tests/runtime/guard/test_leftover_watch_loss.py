"""A watch that loses inotify (refused at the start, or later for a new directory) walks.

The review then walks the whole root by ctime, says why in its ``detail``, and a kept watch
(a long-lived process) goes on walking, each review from the end of the last one.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime.guard.home import roost_home
from runtime.guard.paths.rules import SensitiveRules
from runtime.guard.review import inotify
from runtime.guard.review.leftovers import RootWatch, begin
from runtime.guard.review.rootscan import scan_paths

NO_SPACE = "inotify unavailable (No space left on device): the whole root was walked"


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
    (place / "src").mkdir(parents=True)
    (place / "notes.txt").write_text("notes\n")
    return place


def _watch(root: Path) -> RootWatch:
    return begin(str(root), scan_paths([str(root)], SensitiveRules(())))


def _no_space(self: inotify.Inotify, directory: str) -> None:
    raise OSError(28, "No space left on device", directory)


def test_a_watch_refused_at_the_start_walks_and_says_why(
    root: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(inotify.Inotify, "watch", _no_space)
    w = _watch(root)
    os.mkfifo(root / "src" / "pipe")
    report = w.review()
    assert (report.method, report.detail) == ("walk", NO_SPACE)
    assert [(q.path, q.reason) for q in report.quarantined] == [("src/pipe", "special_file")]


def test_a_kept_watch_without_inotify_walks_each_call_from_the_last_review(
    root: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(inotify.Inotify, "watch", _no_space)
    time.sleep(0.1)  # past the walk's ctime slack: the root's files are older than the run
    w = _watch(root)
    w.held_open([str(root / "notes.txt")])
    (root / "first.txt").write_text("1\n")
    first = w.review(keep=True)
    assert (first.method, [c.path for c in first.created]) == ("walk", ["first.txt"])
    time.sleep(0.1)  # past the walk's ctime slack: the first call's file is older
    w.rebase()
    (root / "second.txt").write_text("2\n")
    second = w.review(keep=True)
    assert (second.method, [c.path for c in second.created]) == ("walk", ["second.txt"])
    assert w.review().method == "walk"


def test_a_directory_a_call_made_that_cannot_be_watched_makes_later_reviews_walk(
    root: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    w = _watch(root)
    (root / "made").mkdir()
    monkeypatch.setattr(inotify.Inotify, "watch", _no_space)
    first = w.review(keep=True)
    assert (first.method, first.detail, [c.path for c in first.created]) == (
        "inotify",
        "",
        ["made"],
    )
    os.mkfifo(root / "made" / "pipe")
    second = w.review(keep=True)
    assert (second.method, second.detail) == ("walk", NO_SPACE)
    assert [(q.path, q.reason) for q in second.quarantined] == [("made/pipe", "special_file")]
