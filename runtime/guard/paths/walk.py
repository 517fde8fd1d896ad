"""Resolving a path beneath the project root to ``O_PATH`` file descriptors.

Two resolvers give the same :class:`Resolved` result; :mod:`runtime.guard.workspace` picks
one.

- :func:`resolve_openat2` asks the kernel: one ``openat2(RESOLVE_BENEATH |
  RESOLVE_NO_MAGICLINKS)`` call resolves the whole path, symlinks included, and fails with
  ``EXDEV`` if any step leaves the root. Where it fails (a missing file, an escape, a loop,
  an absolute symlink that points back inside the root) the walk takes over to name the
  reason precisely or to create missing parents; the walk is itself race-free, so mixing
  them keeps the guarantee.
- :func:`walk` opens one component at a time from an fd of the root with ``O_PATH |
  O_NOFOLLOW``, so a component swapped for a symlink is seen as a symlink, never followed by
  the kernel. Symlinks are expanded here, with a hop limit, and ``..`` pops the stack of
  directory fds; popping past the root is an escape.

Every fd returned is an ``O_PATH`` fd: it names an inode without opening it for I/O, so
resolving never blocks on a FIFO or triggers a device.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from runtime.errors import ToolError
from runtime.guard.home.statedir import project_mode
from runtime.guard.paths import openat2 as sys_openat2

__all__ = [
    "MAX_SYMLINK_HOPS",
    "Resolved",
    "escape_error",
    "not_found",
    "os_error",
    "proc_beneath",
    "require_regular",
    "require_single_link",
    "resolve_openat2",
    "walk",
]

MAX_SYMLINK_HOPS = 40
"""Symlinks followed in one resolution before it counts as a loop (the kernel's limit)."""

_PATH_FLAGS = os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC
_RESOLVE = sys_openat2.RESOLVE_BENEATH | sys_openat2.RESOLVE_NO_MAGICLINKS
_MAX_RETRIES = 100


@dataclass
class Resolved:
    """Where a path landed: its real components and ``O_PATH`` fds (owned; call close)."""

    comps: tuple[str, ...]
    """Real components relative to the root, the final one included; ``()`` is the root."""
    fd: int = -1
    """``O_PATH`` fd of the target, or -1 when it does not exist."""
    parent_fd: int = -1
    """``O_PATH`` fd of the target's directory, or -1 when unknown or missing."""
    st: os.stat_result | None = None
    """``fstat`` of ``fd`` (never a symlink: final symlinks are followed)."""

    @property
    def name(self) -> str:
        """The final component ("" for the root itself)."""
        return self.comps[-1] if self.comps else ""

    def close(self) -> None:
        """Close the fds this result owns."""
        for fd in (self.fd, self.parent_fd):
            if fd >= 0:
                os.close(fd)
        self.fd = self.parent_fd = -1

    def __enter__(self) -> Resolved:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def escape_error(path: str, reason: str) -> ToolError:
    """Return the ``outside_root`` error for ``path`` with ``reason`` (``dotdot``, ...)."""
    hints = {
        "dotdot": "'..' climbs above the project root",
        "symlink_escape": "a symlink on the way points outside the project root",
        "absolute_outside": "the absolute path is not under the project root",
        "hard_link": "the file has other hard links, which may live outside the root",
        "moved_outside": "a directory on the way was moved outside the root while opening",
    }
    why = hints.get(reason, reason)
    return ToolError(
        "outside_root",
        f"path {path!r} is refused: {why}; use a path inside the project root or add an "
        "outside_root_allowlist entry",
        path=path,
        reason=reason,
    )


def _symlink_error(path: str, reason: str) -> ToolError:
    """The ``not_a_regular_file`` error of a path whose symlinks do not lead to a file."""
    why = {
        "symlink_loop": f"goes through more than {MAX_SYMLINK_HOPS} symlinks (a symlink loop)",
        "dangling_symlink": "goes through a symlink whose target does not exist",
    }[reason]
    return ToolError("not_a_regular_file", f"path {path!r} {why}", path=path, reason=reason)


def _name_too_long(path: str) -> ToolError:
    return ToolError(
        "invalid_tool_args",
        f"path {path!r} is too long for the filesystem",
        kind="invalid_type",
        reason="name_too_long",
        path=path,
    )


_OWN_ERRORS: dict[int, Callable[[str], ToolError]] = {
    errno.ELOOP: lambda path: _symlink_error(path, "symlink_loop"),
    errno.ENAMETOOLONG: _name_too_long,
}
"""Errors that are not a ``tool_error``: the refusal each errno makes."""

_REASONS = {
    errno.ENOENT: "not_found",
    errno.ENOTDIR: "not_a_directory",
    errno.EISDIR: "is_a_directory",
    errno.EACCES: "permission_denied",
    errno.EPERM: "permission_denied",
    errno.EROFS: "read_only_filesystem",
    errno.ENOSPC: "no_space",
}
"""The ``reason`` of a ``tool_error`` per errno (others: the errno's lower-case name)."""


def os_error(err: OSError, path: str) -> ToolError:
    """Map an ``OSError`` met while resolving or opening ``path`` to a ``ToolError``."""
    code = err.errno
    own = _OWN_ERRORS.get(code or 0)
    if own is not None:
        return own(path)
    reason = _REASONS.get(code or 0, errno.errorcode.get(code or 0, "os_error").lower())
    return ToolError("tool_error", f"path {path!r}: {err.strerror}", path=path, reason=reason)


def not_found(text: str) -> ToolError:
    """Return the ``tool_error`` (``not_found``) for a missing ``text``."""
    return ToolError("tool_error", f"path {text!r} does not exist", path=text, reason="not_found")


def require_regular(st: os.stat_result, text: str) -> None:
    """Raise ``not_a_regular_file`` (reason: the file's kind) unless ``st`` is a regular file."""
    if stat.S_ISREG(st.st_mode):
        return
    kinds = {
        stat.S_IFDIR: "directory",
        stat.S_IFIFO: "fifo",
        stat.S_IFSOCK: "socket",
        stat.S_IFCHR: "character_device",
        stat.S_IFBLK: "block_device",
        stat.S_IFLNK: "symlink",
    }
    kind = kinds.get(stat.S_IFMT(st.st_mode), "special")
    raise ToolError(
        "not_a_regular_file",
        f"path {text!r} is a {kind.replace('_', ' ')}, not a regular file",
        path=text,
        reason=kind,
    )


def _user_modes(name: str, dir_fd: int) -> None:
    """Give a directory just made the user's modes (the daemon runs with umask 077)."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    with contextlib.suppress(OSError):
        fd = os.open(name, flags, dir_fd=dir_fd)
        try:
            project_mode(fd, directory=True)
        finally:
            os.close(fd)


def require_single_link(st: os.stat_result, text: str) -> None:
    """Raise ``outside_root`` (``hard_link``) if the file has more than one hard link."""
    if st.st_nlink > 1:
        raise escape_error(text, "hard_link")


def proc_beneath(root: str, fd: int) -> tuple[str, ...] | None:
    """Where ``fd`` really is, as components under ``root``, from ``/proc/self/fd``.

    None when it is not under ``root`` (moved out, or on another mount).
    """
    real = os.readlink(f"/proc/self/fd/{fd}")
    if real == root:
        return ()
    prefix = root.rstrip("/") + "/"
    if not real.startswith(prefix):
        return None
    return tuple(real[len(prefix) :].split("/"))


def _beneath(root: str, target: str) -> list[str] | None:
    """Components of absolute ``target`` under ``root``, or None if it is not under it."""
    root_parts = [p for p in root.split("/") if p]
    parts = [p for p in target.split("/") if p not in ("", ".")]
    if parts[: len(root_parts)] != root_parts:
        return None
    return parts[len(root_parts) :]


def walk(
    root_fd: int, root: str, parts: list[str], *, display: str, make_parents: bool = False
) -> Resolved:
    """Resolve ``parts`` under ``root_fd`` one ``O_NOFOLLOW`` component at a time.

    Symlinks are followed by reading them and pushing their target (absolute targets must
    lie under ``root``); ``..`` above the root raises ``outside_root`` (``dotdot``, or
    ``symlink_escape`` when a symlink's target climbs out). A symlink to nothing raises
    ``not_a_regular_file`` (``dangling_symlink``); more than 40 hops, ``symlink_loop``.
    Missing components are kept as text (the result has ``fd == -1``); with
    ``make_parents`` missing directories are created with ``mkdirat``.
    """
    todo: deque[tuple[str, bool]] = deque((p, False) for p in parts)
    fds: list[int] = []
    names: list[str] = []
    virtual: list[str] = []
    hops = retries = 0
    final_fd = -1
    final_st: os.stat_result | None = None
    try:
        while todo:
            part, from_link = todo.popleft()
            cur = fds[-1] if fds else root_fd
            if part in ("", "."):
                continue
            if part == "..":
                if virtual:
                    virtual.pop()
                elif names:
                    names.pop()
                    os.close(fds.pop())
                else:
                    raise escape_error(display, "symlink_escape" if from_link else "dotdot")
                continue
            if virtual:
                virtual.append(part)
                continue
            try:
                fd = os.open(part, _PATH_FLAGS, dir_fd=cur)
            except FileNotFoundError:
                if from_link:
                    raise _symlink_error(display, "dangling_symlink") from None
                if make_parents and todo and retries < _MAX_RETRIES:
                    retries += 1
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(part, 0o777, dir_fd=cur)
                        _user_modes(part, cur)
                    todo.appendleft((part, from_link))
                else:
                    virtual.append(part)
                continue
            except OSError as e:
                raise os_error(e, display) from e
            st = os.fstat(fd)
            if stat.S_ISLNK(st.st_mode):
                try:
                    target = os.readlink("", dir_fd=fd)
                finally:
                    os.close(fd)
                hops += 1
                if hops > MAX_SYMLINK_HOPS:
                    raise _symlink_error(display, "symlink_loop")
                if target.startswith("/"):
                    rest = _beneath(root, target)
                    if rest is None:
                        raise escape_error(display, "symlink_escape")
                    while fds:
                        os.close(fds.pop())
                    names.clear()
                    target_parts = rest
                else:
                    target_parts = target.split("/")
                todo.extendleft(reversed([(p, True) for p in target_parts]))
                continue
            if not todo:
                final_fd, final_st = fd, st
                names.append(part)
                break
            if not stat.S_ISDIR(st.st_mode):
                os.close(fd)
                raise os_error(OSError(errno.ENOTDIR, os.strerror(errno.ENOTDIR)), display)
            fds.append(fd)
            names.append(part)
        return _result(root_fd, fds, names, virtual, final_fd=final_fd, final_st=final_st)
    except BaseException:
        if final_fd >= 0:
            os.close(final_fd)
        raise
    finally:
        for fd in fds:
            os.close(fd)


def _result(
    root_fd: int,
    fds: list[int],
    names: list[str],
    virtual: list[str],
    *,
    final_fd: int,
    final_st: os.stat_result | None,
) -> Resolved:
    """Package the walk's state; fds handed to the result are removed from ``fds``."""
    if virtual:
        parent = -1
        if len(virtual) == 1:
            parent = fds.pop() if fds else os.dup(root_fd)
        return Resolved(tuple(names + virtual), parent_fd=parent)
    if final_fd >= 0:
        parent = fds.pop() if fds else os.dup(root_fd)
        return Resolved(tuple(names), fd=final_fd, parent_fd=parent, st=final_st)
    # The path ended on a directory reached by "." or "..", or it is the root itself.
    target = fds.pop() if fds else os.dup(root_fd)
    parent = -1
    if names:
        parent = fds.pop() if fds else os.dup(root_fd)
    return Resolved(tuple(names), fd=target, parent_fd=parent, st=os.fstat(target))


def resolve_openat2(
    root_fd: int, root: str, parts: list[str], *, display: str, make_parents: bool = False
) -> Resolved:
    """Resolve ``parts`` with one kernel-confined ``openat2`` call (see the module doc).

    Hands over to :func:`walk` for anything but a plain success or a missing final
    component in an existing directory.
    """
    rel = "/".join(parts) or "."
    try:
        fd = sys_openat2.openat2(root_fd, rel, os.O_PATH, resolve=_RESOLVE)
    except OSError as e:
        if e.errno == errno.ENOENT and parts and parts[-1] not in ("", ".", ".."):
            found = _missing_in_parent(root_fd, root, parts)
            if found is not None:
                return found
        if e.errno in (errno.ENOENT, errno.EXDEV, errno.ELOOP, errno.ENOTDIR, errno.EAGAIN):
            return walk(root_fd, root, parts, display=display, make_parents=make_parents)
        raise os_error(e, display) from e
    try:
        comps = proc_beneath(root, fd)
        if comps is None:
            raise escape_error(display, "moved_outside")
        return Resolved(comps, fd=fd, st=os.fstat(fd))
    except BaseException:
        os.close(fd)
        raise


def _missing_in_parent(root_fd: int, root: str, parts: list[str]) -> Resolved | None:
    """Return the result for a final component plainly absent from an existing parent."""
    try:
        parent = sys_openat2.openat2(
            root_fd, "/".join(parts[:-1]) or ".", os.O_PATH | os.O_DIRECTORY, resolve=_RESOLVE
        )
    except OSError:
        return None
    try:
        comps = proc_beneath(root, parent)
        if comps is not None:
            os.lstat(parts[-1], dir_fd=parent)
    except FileNotFoundError:
        assert comps is not None
        return Resolved((*comps, parts[-1]), parent_fd=parent)
    except BaseException:
        os.close(parent)
        raise
    # It exists after all (a dangling symlink, or it just appeared): let the walk decide.
    os.close(parent)
    return None
