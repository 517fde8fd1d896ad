"""A project's own description: the first paragraph of its ``README.md``, read confined.

``describe_project`` (``roost a2a serve``'s agent card) answers with it. The README is a
file tools may write, so it is read as ``fs.read`` reads (``runtime.guard.workspace``:
inside the root, through no symlink out, a regular file, no sensitive path) and at most
:data:`README_READ_BYTES` of it; :func:`first_paragraph` is the plain part.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, TypedDict

from runtime.errors import RoostError
from runtime.guard.workspace import Workspace

__all__ = [
    "DESCRIPTION_CHARS",
    "README",
    "README_READ_BYTES",
    "Description",
    "describe",
    "first_paragraph",
]

README = "README.md"
"""The file read, relative to the project root."""
README_READ_BYTES = 65536
"""The most of it read."""
DESCRIPTION_CHARS = 1000
"""The longest description given (longer ones end with ``…``)."""


class Description(TypedDict):
    """A project's description, as ``describe_project`` gives it."""

    description: str | None
    """The README's first paragraph (None: no README, or no prose in it)."""
    source: str | None
    """Where it came from (``README.md``), None without a description."""


def first_paragraph(text: str) -> str | None:
    """The first paragraph of Markdown ``text`` that is prose, as one line; None if none.

    Headings, HTML lines, badges and images (lines starting ``#``, ``<``, ``[![``, ``![``),
    fences and front matter are skipped; the paragraph's lines are joined with spaces.
    """
    lines: list[str] = []
    fenced = False
    rows = text.splitlines()
    if rows and rows[0].strip() == "---":  # front matter, up to the next ---
        end = next((i for i, row in enumerate(rows[1:], 1) if row.strip() == "---"), 0)
        rows = rows[end + 1 :]
    for raw in rows:
        line = raw.strip()
        fence = line.startswith(("```", "~~~"))
        fenced ^= fence
        if fence or not line:  # a paragraph ends here (no paragraph starts inside a fence)
            if lines:
                break
            continue
        if fenced or (not lines and line.startswith(("#", "<", "[![", "![", "---", "==="))):
            continue
        lines.append(line)
    if not lines:
        return None
    joined = " ".join(lines)
    if len(joined) > DESCRIPTION_CHARS:
        joined = joined[: DESCRIPTION_CHARS - 1].rstrip() + "…"
    return joined


def describe(root: str, options: Mapping[str, Any]) -> Description:
    """``{description, source}``: the README's first paragraph, or nulls when there is none."""
    try:
        with Workspace(root, options) as ws:
            fd = ws.open_for_read(README)
            try:
                data = os.read(fd, README_READ_BYTES)
            finally:
                os.close(fd)
    except (RoostError, OSError):
        return {"description": None, "source": None}
    description = first_paragraph(data.decode("utf-8", errors="replace"))
    return {"description": description, "source": README if description else None}
