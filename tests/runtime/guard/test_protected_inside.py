"""``protected.inside``: its string comparison answers exactly as ``commonpath`` does."""

from __future__ import annotations

import os

from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.guard.sandbox.protected import inside

# Absolute paths built from the parts that change what commonpath sees: empty and "."
# components, "..", trailing slashes, names that are prefixes of each other.
_PATHS = st.lists(st.sampled_from(["a", "ab", "b", ".", "..", "", "a.b", "é"]), max_size=5).map(
    lambda parts: "/" + "/".join(parts)
)


@settings(max_examples=1000)
@given(_PATHS, _PATHS)
def test_inside_is_commonpath(path: str, parent: str) -> None:
    assert inside(path, parent) == (os.path.commonpath([path, parent]) == parent)


def test_inside_on_the_cases_that_matter() -> None:
    assert inside("/a/b", "/a") and inside("/a", "/a") and inside("/a", "/")
    assert not inside("/ab", "/a")  # a name that starts with another is not beneath it
    assert not inside("/a", "/a/b")
    assert inside("/a/./b", "/a") and inside("/a//b", "/a")  # normalized as commonpath does
    assert not inside("/a/b", "/a/")  # commonpath gives "/a", not the parent as written
