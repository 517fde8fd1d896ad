"""One walk of the paths a command may write, before it runs: what the view and the review need.

The view (:mod:`runtime.guard.sandbox.view`) hides the sensitive entries and binds every
``.git`` read-only; the post-run review (:mod:`runtime.guard.review.leftovers`) watches every
directory a command can write in and knows which git shapes were there before the run.
One ``scandir`` walk (no ``stat`` per file: the kernel's directory entry types suffice)
answers all of them. Symbolic links are never followed.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import msgspec

from runtime.guard.paths.rules import SensitiveRules

__all__ = ["BARE_MEMBERS", "MAX_SCAN_ENTRIES", "RootScan", "bare_shape", "scan_paths"]

MAX_SCAN_ENTRIES = 500_000
"""Entries of the bound paths scanned before a run is refused (``OverflowError``)."""

BARE_MEMBERS: tuple[str, ...] = (
    "HEAD",
    "objects",
    "refs",
    "config",
    "config.worktree",
    "commondir",
    "hooks",
    "info",
    "gitdir",
)
"""Entries that make a directory a git directory or decide what git runs there."""


class RootScan(msgspec.Struct, frozen=True, kw_only=True):
    """What one walk found (absolute paths, sorted)."""

    sensitive: tuple[str, ...] = ()
    """Entries whose names the sensitive-path rules match (not descended into)."""
    directories: tuple[str, ...] = ()
    """Real directories a command can write in: all but those inside a ``.git``."""
    git: tuple[str, ...] = ()
    """Every ``.git`` entry (directory or gitfile) at any depth."""
    bare: tuple[str, ...] = ()
    """Directories with git's bare-repository shape (``HEAD``, ``objects/``, ``refs/``)."""
    entries: int = 0
    """Entries seen."""


def bare_shape(names: set[str], is_dir: dict[str, bool]) -> bool:
    """Whether a directory holding ``names`` looks like a git directory to git's discovery."""
    return "HEAD" in names and is_dir.get("objects", False) and is_dir.get("refs", False)


def scan_paths(paths: Sequence[str], rules: SensitiveRules) -> RootScan:
    """Walk ``paths`` once (see the module docstring).

    A ``.git`` directory is descended into only to find sensitive entries (its ``objects``
    is skipped). Raises ``OverflowError`` past :data:`MAX_SCAN_ENTRIES` entries, so a run
    is refused rather than half-hidden.
    """
    sensitive: list[str] = []
    directories: list[str] = []
    gits: list[str] = []
    bare: list[str] = []
    seen = 0
    for base in paths:
        if not os.path.isdir(base):
            continue
        stack: list[tuple[str, tuple[str, ...], bool]] = [(base, (), False)]
        while stack:
            directory, parts, in_git = stack.pop()
            try:
                entries = list(os.scandir(directory))
            except OSError:
                continue
            if not in_git:
                directories.append(directory)
            seen += len(entries)
            if seen > MAX_SCAN_ENTRIES:
                raise OverflowError(f"more than {MAX_SCAN_ENTRIES} entries under {list(paths)}")
            names: set[str] = set()
            kinds: dict[str, bool] = {}
            for entry in entries:
                rel = (*parts, entry.name)
                if entry.is_symlink():
                    continue  # reading it reads its target, which is judged by its own name
                is_dir = entry.is_dir(follow_symlinks=False)
                names.add(entry.name)
                kinds[entry.name] = is_dir
                if entry.name == ".git":
                    gits.append(entry.path)
                if rules.deny and rules.match(rel) is not None:
                    sensitive.append(entry.path)
                elif is_dir and not (in_git and entry.name == "objects"):
                    stack.append((entry.path, rel, in_git or entry.name == ".git"))
            if not in_git and bare_shape(names, kinds):
                bare.append(directory)
    return RootScan(
        sensitive=tuple(sorted(sensitive)),
        directories=tuple(sorted(directories)),
        git=tuple(sorted(gits)),
        bare=tuple(sorted(bare)),
        entries=seen,
    )
