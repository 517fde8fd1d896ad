"""Taking an entry out of a project root: moved to the run's quarantine directory, or removed.

Never through a link a tool process made, even one made after the review checked the path.
What is quarantined, and why: ``docs/security-commands.md``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import uuid
from collections.abc import Callable

from runtime.guard.home import roost_home

__all__ = ["quarantine_dir", "take_out"]


def quarantine_dir(project_id: str, run_id: str) -> str:
    """Where a run's quarantined entries go, in ``ROOST_HOME``."""
    return os.path.join(roost_home.home(), "quarantine", _safe(project_id), _safe(run_id))


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name).lstrip(".") or "_"


def take_out(root: str, rel: str, kind: str, *, project_id: str, run_id: str) -> str | None:
    """Remove ``root/rel`` if a special file, else move it to the run's quarantine directory.

    Returns where it is now (None: removed). Raises :class:`OSError` when it could not be
    taken out, untouched (a directory on the way is no longer a real one, say).
    """
    parent = _open_dir(root, os.path.dirname(rel))
    try:
        name = os.path.basename(rel)
        if kind in ("fifo", "socket", "device"):
            os.unlink(name, dir_fd=parent)
            return None
        return _move(parent, name, os.path.join(quarantine_dir(project_id, run_id), rel))
    finally:
        os.close(parent)


def _open_dir(root: str, rel_dir: str) -> int:
    """A descriptor of ``root/rel_dir``, opened one component at a time, never through a link.

    The review checked the path, but without a freezer a process may swap a directory on
    the way for a symbolic link since: ``ELOOP``/``ENOTDIR`` then, and nothing is touched.
    """
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in [p for p in rel_dir.split("/") if p]:
            flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
            child = os.open(part, flags, dir_fd=fd)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def _move(parent: int, name: str, dest: str) -> str:
    """Move ``name`` of the directory ``parent`` to ``dest`` (another filesystem too).

    Set-id bits of what arrived are stripped and its special files removed; returns where
    it is now.
    """
    os.makedirs(os.path.dirname(dest), mode=0o700, exist_ok=True)
    if os.path.lexists(dest):
        dest = f"{dest}.{uuid.uuid4().hex[:8]}"
    try:
        os.rename(name, dest, src_dir_fd=parent)
    except OSError as e:
        if e.errno != 18:  # EXDEV: copy, then remove
            raise
        source = f"/proc/self/fd/{parent}/{name}"  # the directory opened, not a path again
        st = os.lstat(name, dir_fd=parent)
        if stat.S_ISDIR(st.st_mode):
            shutil.copytree(source, dest, symlinks=True, ignore_dangling_symlinks=True)
            shutil.rmtree(name, dir_fd=parent)
        else:
            shutil.copy2(source, dest, follow_symlinks=False)
            os.unlink(name, dir_fd=parent)
    _defuse(dest)
    return dest


def _defuse(path: str) -> None:
    """Strip set-id bits and remove special files under ``path`` (never following links)."""
    todo = [path]
    while todo:
        current = todo.pop()
        try:
            st = os.lstat(current)
        except OSError:
            continue
        defuse = _DEFUSERS.get(stat.S_IFMT(st.st_mode), _remove)
        with contextlib.suppress(OSError):
            defuse(current, st.st_mode, todo)


def _descend(path: str, mode: int, todo: list[str]) -> None:
    """A directory: what it holds is defused in turn."""
    todo.extend(os.path.join(path, n) for n in os.listdir(path))


def _strip_setid(path: str, mode: int, todo: list[str]) -> None:
    """A regular file: it keeps its other mode bits."""
    if mode & (stat.S_ISUID | stat.S_ISGID):
        os.chmod(path, stat.S_IMODE(mode) & ~(stat.S_ISUID | stat.S_ISGID))


def _leave(path: str, mode: int, todo: list[str]) -> None:
    """A symbolic link: it cannot carry set-id bits, and is never followed."""


def _remove(path: str, mode: int, todo: list[str]) -> None:
    """A FIFO, socket or device: removed."""
    os.unlink(path)


_DEFUSERS: dict[int, Callable[[str, int, list[str]], None]] = {
    stat.S_IFDIR: _descend,
    stat.S_IFREG: _strip_setid,
    stat.S_IFLNK: _leave,
}
"""What is done to an entry of each file type; every other type is removed."""
