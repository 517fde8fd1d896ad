"""Walking and matching for the ``fs.*`` tools: fd-based tree walks, globs, safe regexes.

The tree walk holds a directory fd at every level and opens each subdirectory relative to
its parent with ``O_NOFOLLOW``, so it never leaves the directory it started in through a
symlink, whatever changes meanwhile. Search patterns and globs come from the model, so
they are matched with RE2 (:mod:`runtime.guard.shapes.untrusted_regex`), in time linear in the text
and with the GIL released; a pattern RE2 cannot run is refused, never handed to ``re``.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable

from runtime.errors import ToolError
from runtime.guard.shapes.untrusted_regex import (
    MAX_PATTERN_CHARS,
    UnsafePatternError,
    UntrustedRegex,
    compile_untrusted,
)

__all__ = [
    "LIST_MAX_SCANNED",
    "SEARCH_MAX_FILE_BYTES",
    "SEARCH_MAX_LINE_TEXT",
    "SEARCH_MAX_PATTERN",
    "Visit",
    "compile_search",
    "entry_kind",
    "glob_regex",
    "search_file",
    "walk_tree",
]

LIST_MAX_SCANNED = 100_000
"""Directory entries a recursive listing or search looks at before it stops."""
SEARCH_MAX_FILE_BYTES = 4 << 20
"""Files larger than this are skipped by ``fs.search``."""
SEARCH_MAX_PATTERN = MAX_PATTERN_CHARS
"""Longest accepted ``fs.search`` pattern, in characters."""
SEARCH_MAX_LINE_TEXT = 400
"""Characters of a matching line kept in the result."""


_GLOB_PIECE = re.compile(r"(?P<wild>\*\*/|\*\*|\*|\?)|\[(?P<set>.[^\]]*)\]|(?P<char>.)", re.DOTALL)
"""One piece of a glob, tried in this order: a wildcard, a ``[...]`` set, any other character."""

_WILDCARDS = {"**/": "(?:.*/)?", "**": ".*", "*": "[^/]*", "?": "[^/]"}
"""Each wildcard's regex: ``**`` spans directories, ``*`` and ``?`` stay in one."""

_PIECES: dict[str, Callable[[str], str]] = {
    "wild": _WILDCARDS.__getitem__,
    "set": lambda body: "[" + ("^" + body[1:] if body.startswith("!") else body) + "]",
    "char": re.escape,
}
"""The regex of each kind of piece, from its text (a set's without its brackets)."""


def _translated(piece: re.Match[str]) -> str:
    kind = str(piece.lastgroup)
    return _PIECES[kind](piece.group(kind))


def glob_regex(glob: str) -> UntrustedRegex:
    """Compile a path glob for ``fullmatch``: ``**`` spans directories, ``*`` and ``?`` one.

    A glob is the model's text, so it is compiled like a search pattern (with RE2: a glob
    such as ``*a*a*a*a*a*a*a*a*b`` would backtrack for minutes on a long name with ``re``).
    """
    out = _GLOB_PIECE.sub(_translated, glob)
    try:
        return compile_untrusted("(?s)" + out, what="the glob's pattern")
    except UnsafePatternError as e:
        raise ToolError(
            "invalid_tool_args",
            f"argument 'glob' must be a valid glob, got {glob!r}: {e}",
            kind="invalid_type",
            arg="glob",
            reason=e.reason,
        ) from e


Visit = Callable[[tuple[str, ...], os.DirEntry[str], int], bool]
"""``visit(parts, entry, dir_fd) -> keep_going`` for :func:`walk_tree`."""


def walk_tree(
    top_fd: int,
    visit: Visit,
    max_depth: int | None,
    hidden: frozenset[tuple[int, int]] = frozenset(),
) -> bool:
    """Visit every entry under ``top_fd`` without following symlinks; False if cut short.

    ``visit(parts, entry, dir_fd)`` returns False to stop. Directories whose
    ``(st_dev, st_ino)`` is in ``hidden`` (``ROOST_HOME``) are neither visited nor entered,
    however they are reached. Owns and closes ``top_fd``.
    """
    stack: list[tuple[tuple[str, ...], int]] = [((), top_fd)]
    scanned = 0
    complete = True
    try:
        while stack:
            parts, dir_fd = stack.pop()
            try:
                with os.scandir(dir_fd) as it:
                    entries = sorted(it, key=lambda e: e.name)
                for entry in entries:
                    scanned += 1
                    here = (*parts, entry.name)
                    if hidden and _dir_id(entry) in hidden:
                        continue
                    if scanned > LIST_MAX_SCANNED or not visit(here, entry, dir_fd):
                        return False
                    deeper = max_depth is None or len(here) < max_depth
                    if deeper and entry.name != ".git" and entry.is_dir(follow_symlinks=False):
                        flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
                        try:
                            stack.append((here, os.open(entry.name, flags, dir_fd=dir_fd)))
                        except OSError:
                            complete = False
            except OSError:
                complete = False
            finally:
                os.close(dir_fd)
    finally:
        for _, fd in stack:
            os.close(fd)
    return complete


def _dir_id(entry: os.DirEntry[str]) -> tuple[int, int] | None:
    """``(st_dev, st_ino)`` of a directory entry that is a directory (None otherwise)."""
    try:
        if not entry.is_dir(follow_symlinks=False):
            return None
        st = entry.stat(follow_symlinks=False)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def entry_kind(entry: os.DirEntry[str]) -> str:
    """Return ``symlink``, ``dir``, ``file`` or ``other`` for a directory entry (no following)."""
    if entry.is_symlink():
        return "symlink"
    if entry.is_dir(follow_symlinks=False):
        return "dir"
    return "file" if entry.is_file(follow_symlinks=False) else "other"


def compile_search(pattern: str, regex: bool) -> Callable[[str], bool]:
    """Return a line predicate for ``pattern``: plain substring, or an RE2 regex.

    Refuses (``invalid_tool_args``, ``kind: invalid_type``) patterns over 1000 characters
    (``pattern_too_long``) and, with ``regex``, the :mod:`runtime.guard.shapes.untrusted_regex`
    reasons ``invalid_regex``, ``unsupported_regex`` and ``regex_too_complex``.
    """
    if len(pattern) > SEARCH_MAX_PATTERN:
        raise ToolError(
            "invalid_tool_args",
            f"the pattern is {len(pattern)} characters; the limit is {SEARCH_MAX_PATTERN}",
            kind="invalid_type",
            reason="pattern_too_long",
        )
    if not regex:
        return lambda line: pattern in line
    try:
        return compile_untrusted(pattern).search
    except UnsafePatternError as e:
        raise ToolError("invalid_tool_args", str(e), kind="invalid_type", reason=e.reason) from e


def search_file(
    fd: int, matches: Callable[[str], bool], stop: Callable[[], bool]
) -> tuple[list[tuple[int, str]], bool] | None:
    """Return ``(hits, whole)`` for an open file; None if binary or too big.

    ``hits`` are the matching ``(line, text)`` pairs, ``whole`` says whether every line was
    looked at. ``stop()`` is asked before each line: a timed-out or cancelled search (whose result
    nobody waits for any more) gives the CPU back at the next line, not the next file.
    """
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_size > SEARCH_MAX_FILE_BYTES:
            return None
        data = f.read(SEARCH_MAX_FILE_BYTES + 1)
    if len(data) > SEARCH_MAX_FILE_BYTES or b"\0" in data[:8192]:
        return None
    hits: list[tuple[int, str]] = []
    for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), start=1):
        if stop():
            return hits, False
        if matches(line):
            hits.append((number, line[:SEARCH_MAX_LINE_TEXT]))
    return hits, True
