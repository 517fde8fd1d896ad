"""The daemon's one way to ask git about a project: hermetic, bounded, failing closed.

A project's ``.git`` (and, after a ``.git`` is spoiled, the root itself read as a bare
repository) is a place a tool process can write. The daemon asks git one thing about it,
the ``core.hooksPath`` the user's git would use (:func:`hooks_paths`), and asks it so that
nothing planted there can steer the daemon's git:

- no discovery: ``.git`` is looked at here first (``lstat``: a directory, or a regular
  gitfile read with :func:`runtime.guard.paths.safe_read.read_regular`; a symlink, FIFO or
  device is no repository) and git is given that directory with ``--git-dir``, so a
  spoiled ``.git`` never makes git fall through to the root as a bare repository or walk
  up to a parent's; and an explicit git directory is also read when it belongs to another
  user (a root daemon on a user's checkout), where discovery would silently skip the
  repository's config (``safe.directory``) and the hooks directory would go unprotected;
- no program from the repository: ``git config`` runs no hook, fsmonitor, pager or
  credential helper, and ``-c core.fsmonitor=false``, ``--no-optional-locks`` and a
  closed stdin say so again; the environment is the daemon's minus every ``GIT_*``
  variable other than where the user's own configuration lives, and ``PATH`` keeps only
  absolute directories outside the project;
- bounded: stdout is read up to :data:`MAX_OUTPUT_BYTES` and git is killed after
  :data:`TIMEOUT_S` (an ``include.path`` naming a FIFO blocks git, not the daemon).

A git that cannot answer (timeout, too much output, a configuration git refuses) raises
:class:`GitProbeError`: the caller refuses what it was deciding, since an unknown hooks
directory cannot be protected.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import subprocess
from collections.abc import Callable

from runtime.guard.paths.safe_read import UnsafeFileError, read_pipe, read_regular

__all__ = ["MAX_OUTPUT_BYTES", "TIMEOUT_S", "GitProbeError", "git_dir", "hooks_paths"]

TIMEOUT_S = 5.0
"""Seconds one ``git config`` may take."""

MAX_OUTPUT_BYTES = 64 * 1024
"""Most bytes of ``git config`` output read."""

_GITFILE_MAX = 4096
_KEEP_ENV: tuple[str, ...] = ("HOME", "XDG_CONFIG_HOME", "LANG", "LC_ALL", "TZ")
_KEEP_ENV += ("GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM", "GIT_CONFIG_NOSYSTEM")


class GitProbeError(Exception):
    """Git could not say what it was asked about a project."""

    def __init__(self, root: str, detail: str) -> None:
        super().__init__(f"git cannot read the configuration of {root}: {detail}")
        self.root = root
        """The project root."""
        self.detail = detail
        """What went wrong."""


def git_dir(root: str) -> str | None:
    """The git directory of the work tree ``root``, or None when ``root/.git`` is none.

    ``.git`` must be a real directory, or a regular file (at most 4 KiB) saying
    ``gitdir: PATH`` of a real directory; a symlink, FIFO, device or anything else is
    not a repository.
    """
    dot_git = os.path.join(root, ".git")
    try:
        st = os.lstat(dot_git)
    except OSError:
        return None
    return _GIT_DIRS.get(stat.S_IFMT(st.st_mode), _no_repository)(root, dot_git)


def _itself(root: str, dot_git: str) -> str | None:
    """A ``.git`` directory is the git directory."""
    return dot_git


def _no_repository(root: str, dot_git: str) -> str | None:
    """A symbolic link, FIFO, socket or device at ``.git``: no repository."""
    return None


def _named_by(root: str, dot_git: str) -> str | None:
    """The real directory a gitfile (``gitdir: PATH``, at most 4 KiB) names, or None."""
    try:
        text = read_regular(dot_git, _GITFILE_MAX).decode("utf-8", "replace")
    except (UnsafeFileError, OSError):
        return None
    first = text.split("\n", 1)[0].strip()
    if not first.startswith("gitdir:"):
        return None
    target = os.path.join(root, first.removeprefix("gitdir:").strip())
    return os.path.realpath(target) if os.path.isdir(target) else None


_GIT_DIRS: dict[int, Callable[[str, str], str | None]] = {
    stat.S_IFDIR: _itself,
    stat.S_IFREG: _named_by,
}
"""How the git directory is found from a ``.git`` of each file type (other types: none)."""


def _program(root: str) -> tuple[str | None, str]:
    real_root = os.path.realpath(root)
    kept = []
    for entry in os.environ.get("PATH", os.defpath).split(os.pathsep):
        real = os.path.realpath(entry) if os.path.isabs(entry) else ""
        if real and real != real_root and not real.startswith(real_root.rstrip("/") + "/"):
            kept.append(entry)
    path = os.pathsep.join(kept)
    return shutil.which("git", path=path), path


def _env(path: str) -> dict[str, str]:
    env = {k: os.environ[k] for k in _KEEP_ENV if k in os.environ}
    env.update(PATH=path, GIT_OPTIONAL_LOCKS="0", GIT_TERMINAL_PROMPT="0")
    return env


def _bounded_run(argv: list[str], env: dict[str, str], root: str) -> tuple[int, bytes]:
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd="/",
        env=env,
        close_fds=True,
    )
    assert proc.stdout is not None
    data, why = read_pipe(proc.stdout.fileno(), MAX_OUTPUT_BYTES, TIMEOUT_S)
    if why is not None:
        proc.kill()
        _reap(proc)
        raise GitProbeError(root, _PROBLEMS[why])
    return _reap(proc), data


_PROBLEMS = {
    "timeout": f"git gave no answer within {TIMEOUT_S:g} s",
    "too_large": f"git printed more than {MAX_OUTPUT_BYTES} bytes",
}
"""What ``read_pipe``'s problems mean for a caller of git."""


def _reap(proc: subprocess.Popen[bytes]) -> int:
    """Close git's stdout and wait for its exit status."""
    assert proc.stdout is not None
    proc.stdout.close()
    try:
        return proc.wait(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:  # pragma: no cover - killed above; a stuck kernel
        proc.kill()
        return proc.wait()


def _values(code: int, out: bytes, root: str) -> list[str]:
    if code == 1:  # the key is not set
        return []
    if code != 0:
        raise GitProbeError(root, f"git config exited with status {code}; run `git status` there")
    return [v for v in out.decode("utf-8", "surrogateescape").split("\0") if v.strip()]


def hooks_paths(root: str) -> list[str]:
    """The ``core.hooksPath`` values git may use for the work tree ``root`` (raw).

    For a repository git accepts, the values its ``git config`` reads (system, global,
    the repository's, includes followed). For a ``.git`` git does not accept (a spoiled
    ``HEAD``: the user's git would then look elsewhere, the daemon's never does), the
    union of every scope's values, the repository's own files read without includes: more
    places protected, none missed. Empty when ``root`` is no repository (:func:`git_dir`)
    or git is not installed. Raises :class:`GitProbeError` when git cannot answer.
    """
    directory = git_dir(root)
    if directory is None:
        return []
    program, path = _program(root)
    if program is None:
        return []
    env = _env(path)
    base = [program, "--no-optional-locks", "-c", "core.fsmonitor=false"]
    get = ["--null", "--get-all", "core.hooksPath"]
    try:
        valid, _ = _bounded_run(
            [*base, f"--git-dir={directory}", "rev-parse", "--git-dir"], env, root
        )
        if valid == 0:
            return _values(
                *_bounded_run([*base, f"--git-dir={directory}", "config", *get], env, root), root
            )
        found: list[str] = []
        scopes = [["--system"], ["--global"]]
        for name in ("config", "config.worktree"):
            local = os.path.join(directory, name)
            with contextlib.suppress(OSError):
                if stat.S_ISREG(os.lstat(local).st_mode):
                    scopes.append(["--no-includes", "--file", local])
        for scope in scopes:
            found += _values(*_bounded_run([*base, "config", *scope, *get], env, root), root)
        return found
    except OSError as e:
        raise GitProbeError(root, f"git could not be started: {e.strerror or e}") from e
