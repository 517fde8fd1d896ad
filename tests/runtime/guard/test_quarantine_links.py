"""The quarantine never follows a link a tool process made, even one made mid-review.

Without a freezer (a daemon with no cgroup delegation) an MCP server runs while its
review runs: between the review's check of a path and its move or removal the server can
replace a directory on the way by a symbolic link. The move and the removal then act on
the directory they checked, or on nothing, never on the link's target.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime.guard.home import roost_home
from runtime.guard.paths.rules import SensitiveRules
from runtime.guard.review.rootreview import RootReview


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    place = tmp_path / "home"
    place.mkdir()
    roost_home.protect(str(place))
    yield place
    roost_home.protect(None)


def _review(root: Path) -> RootReview:
    return RootReview(
        str(root),
        project_id="p",
        run_id="r",
        rules=SensitiveRules(()),
        gits=frozenset(),
        missing=(),
    )


@pytest.mark.parametrize("planted", ["fifo", "gitdir"])
def test_a_directory_swapped_for_a_link_mid_review_is_not_followed(
    home: Path, tmp_path: Path, planted: str
) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "a").mkdir(parents=True)
    outside.mkdir()
    name = "passwd" if planted == "fifo" else ".git"
    if planted == "fifo":
        os.mkfifo(root / "a" / name)
        (outside / name).write_text("the operator's\n")
    else:
        (root / "a" / name).mkdir()
        (outside / name).mkdir()
        (outside / name / "HEAD").write_text("the operator's\n")
    review = _review(root)
    rel = f"a/{name}"
    st = review._lstat(rel)  # the check
    assert st is not None
    os.rename(root / "a", root / "a-real")  # the swap, between the check and the act
    os.symlink(outside, root / "a")
    review._quarantine(rel, st, "special_file" if planted == "fifo" else "git_dir_created")

    assert (outside / name).exists(), "the quarantine followed the link"
    assert os.path.islink(root / "a")
    [entry] = review.quarantined
    assert entry.error is not None and entry.moved_to is None
