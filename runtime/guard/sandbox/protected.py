"""The places bound read-only again inside the writable paths (the view's step 4).

Every ``.git`` (and the git directory a gitfile names, when it is inside a bound path),
``.roost``, and a work-tree directory that ``core.hooksPath`` names: a command reads git but
cannot write it, nor plant assets or hooks (``docs/security-commands.md``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence

from runtime.errors import ToolError
from runtime.guard.paths.rules import under
from runtime.guard.paths.safe_read import read_regular
from runtime.guard.review.git_probe import GitProbeError, hooks_paths

__all__ = [
    "GITFILE_MAX_BYTES",
    "PROTECTED_IN_WRITABLE",
    "git_places",
    "hooks_dirs",
    "inside",
    "protected_mounts",
    "under_any",
]

PROTECTED_IN_WRITABLE: tuple[str, ...] = (".roost",)
"""Places at the top of a writable path that are bound read-only again (besides ``.git``)."""

GITFILE_MAX_BYTES = 4096
"""Most of a gitfile (``gitdir: PATH``) read to find the git directory it names."""


def inside(path: str, parent: str) -> bool:
    """Whether ``path`` is ``parent`` or beneath it (both real, absolute paths).

    Exactly ``os.path.commonpath([path, parent]) == parent``, which a view's build asks
    ~200 times (each listening socket against each visible place): on plain paths (absolute,
    no empty or ``.`` component, no trailing slash) a comparison of the strings gives the
    same answer 10x faster; any other path gets ``commonpath`` itself.
    """
    if _plain(path) and _plain(parent):
        return under(path, parent)
    return os.path.commonpath([path, parent]) == parent


def _plain(path: str) -> bool:
    """Whether ``commonpath``'s components of ``path`` are its ``/``-separated parts as written."""
    if path == "/":
        return True
    return (
        path.startswith("/")
        and not path.endswith(("/", "/."))
        and "//" not in path
        and "/./" not in path
    )


def under_any(path: str, parents: Iterable[str]) -> bool:
    """Whether ``path`` is one of ``parents`` or beneath one."""
    return any(inside(path, p) for p in parents)


def _first_line(path: str) -> str:
    """The first line of a small regular file a tool could have written ("" if unreadable)."""
    try:
        head = read_regular(path, GITFILE_MAX_BYTES, truncate=True)
    except OSError:
        return ""
    lines = head.decode("utf-8", "replace").splitlines()
    return lines[0].strip() if lines else ""


def _gitfile_target(gitfile: str) -> str | None:
    """The git directory a gitfile (``gitdir: PATH``) names, resolved; None when unreadable."""
    line = _first_line(gitfile)
    if not line.startswith("gitdir:"):
        return None
    return os.path.realpath(os.path.join(os.path.dirname(gitfile), line[7:].strip()))


def git_places(writable: Sequence[str], gits: Sequence[str]) -> list[str]:
    """What to bind read-only for the ``.git`` entries ``gits`` found in ``writable``.

    Each ``.git`` itself (directory or gitfile, never a symlink), and for a gitfile the git
    directory it names and that directory's ``commondir`` when they are inside ``writable``
    (a linked worktree or a submodule whose git directory lives in the root).
    """
    found: list[str] = []
    for git in gits:
        if os.path.islink(git) or not os.path.lexists(git):
            continue
        found.append(git)
        if os.path.isdir(git):
            continue
        place = git
        for follow in (_gitfile_target, _gitfile_target_common):  # its git dir, then commondir
            named = follow(place)
            if named is None or not under_any(named, writable) or not os.path.isdir(named):
                break
            place = named
            found.append(place)
    return sorted(set(found))


def _gitfile_target_common(gitdir: str) -> str | None:
    """The ``commondir`` a linked worktree's git directory names, resolved."""
    line = _first_line(os.path.join(gitdir, "commondir"))
    return os.path.realpath(os.path.join(gitdir, line)) if line else None


def hooks_dirs(writable: Sequence[str]) -> list[str]:
    """Directories inside ``writable`` that git's ``core.hooksPath`` names (e.g. ``.husky``).

    Asked of git as the user's git reads it (system, global and the repository's own
    config), hermetically (:func:`runtime.guard.review.git_probe.hooks_paths`); a hooks directory
    in the work tree would otherwise let a command plant a hook that the user's next
    commit runs. When git cannot answer, raises ``ToolError("isolation_unavailable",
    layer="git_config")``: a hooks directory that is not known cannot be protected.
    """
    found: list[str] = []
    for path in writable:
        try:
            values = hooks_paths(path)
        except GitProbeError as e:
            raise ToolError(
                "isolation_unavailable",
                f"{e}; the hooks directory it names cannot be protected, so nothing that "
                "could write there runs",
                layer="git_config",
            ) from e
        for line in values:
            place = os.path.realpath(os.path.join(path, os.path.expanduser(line.strip())))
            if line.strip() and inside(place, path) and place != path:
                found.append(place)
    return sorted(set(found))


def protected_mounts(
    writable: Sequence[str], hooks: Sequence[str] = (), gits: Sequence[str] | None = None
) -> list[str]:
    """The existing, real (not symlinked) protected places inside ``writable`` paths.

    ``hooks`` are the ``core.hooksPath`` directories (:func:`hooks_dirs`); ``gits`` the
    ``.git`` entries the walk found (default: those at the top of ``writable``).
    """
    found: list[str] = [h for h in hooks if os.path.isdir(h) and not os.path.islink(h)]
    if gits is None:
        gits = [os.path.join(path, ".git") for path in writable]
    found += git_places(writable, gits)
    for path in writable:
        for rel in PROTECTED_IN_WRITABLE:
            place = os.path.join(path, rel)
            if os.path.lexists(place) and not os.path.islink(place):
                found.append(place)
    return sorted(set(found))
