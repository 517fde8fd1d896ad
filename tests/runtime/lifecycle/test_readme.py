"""A project's description: its README's first paragraph, read confined and bounded."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from runtime.lifecycle.readme import DESCRIPTION_CHARS, describe, first_paragraph


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("# Title\n\nFirst line\nsecond line.\n\nMore.\n", "First line second line."),
        ("[![badge](x)](y)\n![logo](l.png)\n<p align=center>\n\nProse.\n", "Prose."),
        ("---\ntitle: x\n---\n\n```sh\nmake demo\n```\n\nAfter code.\n", "After code."),
        ("# Only a heading\n", None),
        ("", None),
    ],
)
def test_the_first_paragraph_of_prose_is_the_description(text: str, expected: str | None) -> None:
    assert first_paragraph(text) == expected


def test_a_long_paragraph_is_cut_with_an_ellipsis() -> None:
    got = first_paragraph("word " * 1000)
    assert got is not None
    assert len(got) == DESCRIPTION_CHARS
    assert got.endswith("…")


def test_describe_reads_the_readme_of_the_root(tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text("# P\n\nA project that does things.\n")
    assert describe(str(tmp_path), {}) == {
        "description": "A project that does things.",
        "source": "README.md",
    }


def test_describe_never_follows_a_readme_symlink_out_of_the_root(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (tmp_path / "secret.md").write_text("Outside text.\n")
    os.symlink(tmp_path / "secret.md", root / "README.md")
    assert describe(str(root), {}) == {"description": None, "source": None}


def test_describe_never_waits_on_a_fifo(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "README.md")
    assert describe(str(tmp_path), {}) == {"description": None, "source": None}


def test_a_missing_readme_gives_no_description(tmp_path: Path) -> None:
    assert describe(str(tmp_path), {}) == {"description": None, "source": None}
