"""Workspace confinement: every path a tool touches resolves inside the project root.

:class:`Workspace` is the one door to the filesystem for tools. ``check_path`` is the
policy check (where does this path really go, is it sensitive, may it be written), and
``open_for_read`` / ``open_for_write`` / ``open_dir`` are the enforcement points: they
resolve the path again with fds (:mod:`runtime.guard.paths.walk`: kernel ``openat2`` with
``RESOLVE_BENEATH`` or an ``O_NOFOLLOW`` component walk), re-check the names of where the
fd really landed, and only then open it for I/O. A path swapped between the check and the
open is therefore judged by what is opened, not by what was checked.

Refusals (``ToolError`` codes and ``reason``):

- ``outside_root``: ``dotdot``, ``absolute_outside``, ``symlink_escape``, ``hard_link``
  (a write to a file with ``st_nlink > 1``), ``moved_outside`` (a rename race);
- ``sensitive_path_denied``: ``sensitive_path`` (denylist, with ``pattern``) or
  ``protected_path`` (a write inside a ``.git`` directory, to a file named ``.git`` or
  ``HEAD``, under ``.roost/`` or to git's global configuration; and any access under
  ``ROOST_HOME``, whatever the allowlist says);
- ``not_a_regular_file``: directories, FIFOs, sockets, devices, ``dangling_symlink``,
  ``symlink_loop``;
- ``invalid_tool_args`` (``kind: invalid_type``): ``nul_byte``, ``name_too_long``, ...

``outside_root_allowlist`` entries let an outside path through with their reason code
(never past the sensitive denylist); :func:`exception_signal` and :func:`signal_for` turn
decisions and refusals into the security signals a tool appends to ``ctx.signals``.
"""

from __future__ import annotations

import contextlib
import functools
import os
import stat
import weakref
from collections.abc import Iterator, Mapping, Sequence
from pathlib import PurePosixPath
from typing import Any

import msgspec

from events.catalog import (
    Event,
    SecuritySandboxExceptionUsed,
    SecuritySandboxViolation,
    SecuritySensitivePathDenied,
)
from runtime.errors import InvalidRootPathError, ToolError
from runtime.guard.home import roost_home
from runtime.guard.home.statedir import project_mode
from runtime.guard.paths import openat2 as sys_openat2
from runtime.guard.paths.arguments import extract_paths
from runtime.guard.paths.rules import (
    OutsideRootEntry,
    SensitiveRules,
    fold,
    parse_outside_allowlist,
    protected_match,
    under,
    validate_path_text,
)
from runtime.guard.paths.walk import (
    Resolved,
    escape_error,
    not_found,
    os_error,
    proc_beneath,
    require_regular,
    require_single_link,
    resolve_openat2,
    walk,
)
from runtime.guard.sandbox.layers import disabled_layers
from runtime.guard.sandbox.protected import hooks_dirs
from runtime.option_table import DEFAULTS

__all__ = [
    "OutsideRootEntry",
    "PathDecision",
    "Workspace",
    "check_all_paths",
    "exception_signal",
    "extract_paths",
    "git_config_places",
    "root_home_conflict",
    "signal_for",
]

_IO_FLAGS = os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_CLIMBED_OUT = ("dotdot", "symlink_escape")  # escapes an outside_root_allowlist entry may lift


def git_config_places() -> tuple[tuple[str, str], ...]:
    """Git's own configuration outside any repository, as ``(resolved path, label)``.

    ``~/.gitconfig``, ``$XDG_CONFIG_HOME/git/`` (default ``~/.config/git/``: config,
    attributes, ignore), ``$GIT_CONFIG_GLOBAL``, ``/etc/gitconfig`` and
    ``$GIT_CONFIG_SYSTEM``, from this process's environment (the daemon's, the user's).
    A tool that could write one would choose what every git command runs.
    """
    home = os.path.expanduser("~")
    xdg = os.environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
    places = [
        (os.path.join(home, ".gitconfig"), "~/.gitconfig"),
        (os.path.join(xdg, "git"), "$XDG_CONFIG_HOME/git/"),
        ("/etc/gitconfig", "/etc/gitconfig"),
    ]
    for key in ("GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM"):
        if os.environ.get(key):
            places.append((os.path.expanduser(os.environ[key]), f"${key}"))
    return tuple((os.path.realpath(path), label) for path, label in places)


def _dir_id(path: str) -> tuple[int, int] | None:
    with contextlib.suppress(OSError):
        st = os.stat(path)
        return st.st_dev, st.st_ino
    return None


def root_home_conflict(root: str, home: str) -> str | None:
    """Why a project on ``root`` would reach ``home`` (``ROOST_HOME``), or None.

    ``contains_roost_home`` when the home is the root or lies under it,
    ``inside_roost_home`` when the root lies under the home. Both are resolved first
    (symlinks, ``..``, trailing slashes); the same directory reached by another path (a
    bind mount, another case on a case-insensitive filesystem) is recognised by its
    device and inode.
    """
    real_root, real_home = os.path.realpath(root), os.path.realpath(home)
    for reason, lies_under, below, above in (  # by path first, then by device and inode
        ("contains_roost_home", under, real_home, real_root),
        ("inside_roost_home", under, real_root, real_home),
        ("contains_roost_home", _same_dir_above, real_home, real_root),
        ("inside_roost_home", _same_dir_above, real_root, real_home),
    ):
        if lies_under(below, above):
            return reason
    return None


def _same_dir_above(path: str, top: str) -> bool:
    """Whether ``top`` (by device and inode) is ``path`` or a directory above it, up to ``/``."""
    top_id = _dir_id(top)
    lineage = (path, *map(str, PurePosixPath(path).parents))
    return top_id is not None and top_id in map(_dir_id, lineage)


class PathDecision(msgspec.Struct, frozen=True, kw_only=True):
    """Where a checked path really goes and on what grounds it is allowed."""

    resolved: str
    """Absolute path after resolving symlinks (missing components kept as written)."""
    inside_root: bool
    """Whether it resolves inside the project root."""
    exception_reason_code: str | None = None
    """For an outside path, the reason code of the ``outside_root_allowlist`` entry used."""


@functools.cache
def _proc_fd_available() -> bool:
    """Whether ``/proc/self/fd`` tells where an fd points (it is mounted and readable)."""
    fd = os.open("/", os.O_PATH | os.O_CLOEXEC)
    try:
        return sys_openat2.names_root(fd)
    finally:
        os.close(fd)


def _split(path: str) -> list[str]:
    return [p for p in path.split("/") if p not in ("", ".")]


class Workspace:
    """The project root as tools may see it; close it (or use ``with``) to free its fd.

    ``options`` are the normalized runtime options (``sensitive_path_denylist``,
    ``sensitive_path_allowlist``, ``outside_root_allowlist``; SPEC defaults when absent).
    ``force_fallback=True`` (or ``ROOST_FORCE_NO_OPENAT2=1``) uses the component walk even
    where ``openat2`` works; ``use_proc=False`` also stops reading ``/proc/self/fd``, as on a
    system without ``/proc``. Both exist so tests cover every path.
    ``ROOST_SANDBOX_DISABLE=openat2`` forces the walk too
    (``runtime.guard.sandbox.layers.disabled_layers``).
    """

    def __init__(
        self,
        root: str,
        options: Mapping[str, Any] | None = None,
        *,
        force_fallback: bool | None = None,
        use_proc: bool | None = None,
    ) -> None:
        options = options or {}
        self.root = os.path.realpath(root)
        """The project root, absolute and resolved."""
        self._root_spellings = {tuple(_split(self.root)), tuple(_split(os.path.abspath(root)))}
        deny = options.get("sensitive_path_denylist", DEFAULTS["sensitive_path_denylist"])
        self.sensitive = SensitiveRules(deny or (), options.get("sensitive_path_allowlist") or ())
        """The sensitive-path rules."""
        self.outside_allowlist = parse_outside_allowlist(
            options.get("outside_root_allowlist"), root
        )
        """The normalized ``outside_root_allowlist``."""
        self.state_home = roost_home.home()
        """``ROOST_HOME``, resolved: nothing under it is read or written, whatever the lists say."""
        self.hidden_dirs = frozenset(filter(None, [_dir_id(self.state_home)]))
        """``(st_dev, st_ino)`` of the directories tree walks skip (``ROOST_HOME``)."""
        if force_fallback is None:
            force_fallback = "openat2" in disabled_layers()
        self.use_proc = _proc_fd_available() if use_proc is None else use_proc
        """Whether fds are re-checked through ``/proc/self/fd``."""
        kernel = self.use_proc and not force_fallback and sys_openat2.available()
        self.mode = "openat2" if kernel else "walk"
        """``openat2`` (kernel-confined resolution) or ``walk`` (the ``O_NOFOLLOW`` walk)."""
        try:
            self._root_fd = os.open(self.root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as e:
            raise InvalidRootPathError(
                f"project root {root!r} is not an accessible directory: {e.strerror}",
                root=root,
            ) from e
        self._finalizer = weakref.finalize(self, os.close, self._root_fd)

    @functools.cached_property
    def git_config(self) -> tuple[tuple[str, str], ...]:
        """Git's global and system configuration (never writable), resolved at a first write."""
        return git_config_places()  # not per read: ~30 µs, and a workspace is made per call

    def close(self) -> None:
        """Close the root fd."""
        self._finalizer()

    def __enter__(self) -> Workspace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- the check -----------------------------------------------------------------

    def relative_parts(self, path: str) -> list[str] | None:
        """Return ``path``'s components under the root (None: absolute and outside it).

        An absolute path may spell the root resolved or as it was given (through a symlink).
        """
        if not path.startswith("/"):
            return _split(path)
        parts = _split(path)
        for root_parts in self._root_spellings:
            if tuple(parts[: len(root_parts)]) == root_parts:
                return parts[len(root_parts) :]
        return None

    def check_path(self, path: str, *, write: bool = False) -> PathDecision:
        """Decide ``path``: where it resolves and whether tools may read (or write) it.

        Raises ``ToolError`` (see the module doc): directories pass, other non-regular files
        do not, and with ``write`` neither does a file with several hard links. A missing
        target is not an error here; ``resolved`` then keeps the missing parts as written.
        """
        text = validate_path_text(path)
        parts = self.relative_parts(text)
        if parts is None:
            return self._outside(text, text, escape_error(text, "absolute_outside"), write)
        try:
            with self._resolve(parts, text) as res:
                comps = self._landed(res, text)
                st = res.st
        except ToolError as err:
            if err.code == "outside_root" and err.details.get("reason") in _CLIMBED_OUT:
                return self._outside(text, os.path.join(self.root, *parts), err, write)
            raise
        self._check_names(text, parts, comps, write, os.path.join(self.root, *comps))
        if st is not None and not stat.S_ISDIR(st.st_mode):
            require_regular(st, text)
            if write:
                require_single_link(st, text)
        return PathDecision(resolved=os.path.join(self.root, *comps), inside_root=True)

    def sensitive_pattern(self, parts: Sequence[str]) -> str | None:
        """Return the denylist pattern ``parts`` (components) hits, or None."""
        return self.sensitive.match(parts)

    def _outside(self, text: str, candidate: str, err: ToolError, write: bool) -> PathDecision:
        resolved = os.path.realpath(candidate)
        entry = next((e for e in self.outside_allowlist if e.covers(resolved)), None)
        if entry is None:
            raise err
        self._check_names(text, _split(text), _split(resolved), write, resolved)
        return PathDecision(
            resolved=resolved, inside_root=False, exception_reason_code=entry.reason_code
        )

    def in_state_home(self, absolute: str) -> bool:
        """Whether ``absolute`` (resolved) is ``ROOST_HOME`` or under it (compared folded)."""
        return under(fold(absolute), fold(self.state_home))

    def _check_names(
        self, text: str, asked: Sequence[str], real: Sequence[str], write: bool, absolute: str
    ) -> None:
        if self.in_state_home(absolute):
            raise ToolError(
                "sensitive_path_denied",
                f"path {text!r} is inside Roost's state directory (ROOST_HOME), which tools "
                "may never read or write",
                path=text,
                pattern="ROOST_HOME",
                reason="protected_path",
            )
        pattern = self.sensitive.match(real) or self.sensitive.match(asked)
        if pattern is not None:
            raise ToolError(
                "sensitive_path_denied",
                f"path {text!r} matches the sensitive-path pattern {pattern!r}; add it to "
                "sensitive_path_allowlist if tools must see it",
                path=text,
                pattern=pattern,
                reason="sensitive_path",
            )
        if write:
            place = protected_match(real) or protected_match(asked)
            folded = fold(absolute)
            place = place or next(
                (label for path, label in self.git_config if under(folded, fold(path))), None
            )
            if place is None and any(under(folded, fold(h)) for h in hooks_dirs([self.root])):
                place = "core.hooksPath"
            if place is not None:
                raise ToolError(
                    "sensitive_path_denied",
                    f"path {text!r} is under {place!r}, which tools may read but never write",
                    path=text,
                    pattern=place,
                    reason="protected_path",
                )

    # --- resolution ------------------------------------------------------------------

    def _resolve(self, parts: list[str], text: str, make_parents: bool = False) -> Resolved:
        resolver = resolve_openat2 if self.mode == "openat2" else walk
        return resolver(self._root_fd, self.root, parts, display=text, make_parents=make_parents)

    def _landed(self, res: Resolved, text: str) -> tuple[str, ...]:
        """Where ``res`` really is now, read back from its fd when ``/proc`` allows."""
        fd = res.fd if res.fd >= 0 else res.parent_fd
        if not self.use_proc or fd < 0:
            return res.comps
        comps = proc_beneath(self.root, fd)
        if comps is None:
            raise escape_error(text, "moved_outside")
        return comps if res.fd >= 0 else (*comps, res.name)

    def _verify(self, res: Resolved, text: str, write: bool) -> None:
        landed = self._landed(res, text)
        self._check_names(text, _split(text), landed, write, os.path.join(self.root, *landed))

    # --- the enforcement points ------------------------------------------------------

    def open_for_read(self, path: str) -> int:
        """Open a regular file for reading, confined; return the fd (the caller closes it)."""
        decision = self.check_path(path)
        if not decision.inside_root:
            return self._open_outside(decision.resolved, path, os.O_RDONLY)
        with self._existing(path) as (res, st):
            require_regular(st, path)
            return self._reopen(res, os.O_RDONLY, path)

    def open_for_write(
        self, path: str, *, create: bool = True, truncate: bool = True, make_parents: bool = False
    ) -> int:
        """Open a regular file for writing, confined; return the fd (the caller closes it).

        Refuses files with more than one hard link, non-regular files and protected
        places. ``create`` makes a missing file (never through a symlink); ``make_parents``
        also makes missing directories, inside the root only.
        """
        decision = self.check_path(path, write=True)
        if not decision.inside_root:
            flags = os.O_WRONLY | (os.O_CREAT if create else 0)
            return self._open_outside(decision.resolved, path, flags, truncate=truncate)
        for _ in range(8):
            with self._resolve(self._parts(path), path, make_parents and create) as res:
                self._verify(res, path, write=True)
                if res.fd >= 0 and res.st is not None:
                    require_regular(res.st, path)
                    require_single_link(res.st, path)
                    fd = self._reopen(res, os.O_WRONLY, path)
                    return _finish_write(fd, path, truncate)
                if not create or res.parent_fd < 0:
                    raise not_found(path)
                try:
                    fd = os.open(
                        res.name,
                        os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | _IO_FLAGS,
                        0o666,
                        dir_fd=res.parent_fd,
                    )
                except FileExistsError:
                    continue  # something appeared at the name; resolve again
                except OSError as e:
                    raise os_error(e, path) from e
                project_mode(fd)
                return fd
        raise ToolError(
            "tool_error",
            f"path {path!r} kept changing while it was being opened; try again",
            path=path,
            reason="concurrent_modification",
        )

    def open_dir(self, path: str) -> int:
        """Open a directory for listing, confined; return an ``O_RDONLY`` directory fd."""
        decision = self.check_path(path)
        flags = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
        try:
            if not decision.inside_root:
                return os.open(decision.resolved, flags | os.O_NOFOLLOW)
            with self._existing(path) as (res, st):
                if not stat.S_ISDIR(st.st_mode):
                    raise os_error(NotADirectoryError(20, "Not a directory"), path)
                return os.open(".", flags, dir_fd=res.fd)
        except OSError as e:
            raise os_error(e, path) from e

    @contextlib.contextmanager
    def _existing(self, path: str) -> Iterator[tuple[Resolved, os.stat_result]]:
        """``path`` (inside the root) resolved again, re-checked for reading, and its stat."""
        with self._resolve(self._parts(path), path) as res:
            if res.fd < 0 or res.st is None:
                raise not_found(path)
            self._verify(res, path, write=False)
            yield res, res.st

    def _parts(self, path: str) -> list[str]:
        parts = self.relative_parts(path)
        if parts is None:  # check_path said inside; the text cannot have changed
            raise escape_error(path, "absolute_outside")
        return parts

    def _reopen(self, res: Resolved, flags: int, text: str) -> int:
        """Turn ``res``'s ``O_PATH`` fd into an I/O fd on the very same inode."""
        assert res.st is not None
        try:
            if self.use_proc:
                fd = os.open(f"/proc/self/fd/{res.fd}", flags | _IO_FLAGS)
            else:
                fd = os.open(res.name, flags | os.O_NOFOLLOW | _IO_FLAGS, dir_fd=res.parent_fd)
        except OSError as e:
            raise os_error(e, text) from e
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) != (res.st.st_dev, res.st.st_ino):
            os.close(fd)
            raise ToolError(
                "tool_error",
                f"path {text!r} was replaced while it was being opened; try again",
                path=text,
                reason="concurrent_modification",
            )
        os.set_blocking(fd, True)
        return fd

    def _open_outside(self, resolved: str, text: str, flags: int, *, truncate: bool = False) -> int:
        """Open an allowlisted outside path (already resolved), never following a symlink."""
        try:
            st = os.lstat(resolved)
        except FileNotFoundError:
            if not flags & os.O_CREAT:
                raise not_found(text) from None
        except OSError as e:
            raise os_error(e, text) from e
        else:
            require_regular(st, text)
        creating = bool(flags & os.O_CREAT)
        try:
            try:  # O_EXCL tells whether this call made the file (it then gets the user's modes)
                fd = os.open(resolved, flags | os.O_EXCL | os.O_NOFOLLOW | _IO_FLAGS, 0o666)
            except FileExistsError:
                if not creating:
                    raise
                creating = False
                fd = os.open(resolved, flags | os.O_NOFOLLOW | _IO_FLAGS, 0o666)
        except OSError as e:
            raise os_error(e, text) from e
        try:
            require_regular(os.fstat(fd), text)
        except ToolError:
            os.close(fd)
            raise
        if creating:
            project_mode(fd)
        if flags & (os.O_WRONLY | os.O_RDWR):
            return _finish_write(fd, text, truncate)
        os.set_blocking(fd, True)
        return fd


def _finish_write(fd: int, text: str, truncate: bool) -> int:
    """Re-check the opened file (a link may have been added meanwhile), then truncate."""
    try:
        st = os.fstat(fd)
        require_regular(st, text)
        require_single_link(st, text)
        if truncate:
            os.ftruncate(fd, 0)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def check_all_paths(ws: Workspace, args: Any, *, write: bool) -> list[PathDecision]:
    """Check every path :func:`extract_paths` finds in ``args``; raise on the first bad one."""
    return [ws.check_path(p, write=write) for p in extract_paths(args)]


def signal_for(error: ToolError, tool: str, call_id: str | None) -> Event | None:
    """Return the security signal a refusal records (None if it records none)."""
    path = error.details.get("path")
    reason = error.details.get("reason")
    if error.code == "outside_root":
        return SecuritySandboxViolation(tool=tool, path=path, reason=reason, call_id=call_id)
    if error.code == "sensitive_path_denied":
        return SecuritySensitivePathDenied(tool=tool, path=path, reason=reason, call_id=call_id)
    return None


def exception_signal(decision: PathDecision, tool: str, call_id: str | None) -> Event | None:
    """``security.sandbox_exception_used`` for a decision that used an allowlist entry."""
    if decision.exception_reason_code is None:
        return None
    return SecuritySandboxExceptionUsed(
        reason_code=decision.exception_reason_code,
        path=decision.resolved,
        tool=tool,
        call_id=call_id,
    )
