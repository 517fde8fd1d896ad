"""Running test code as uid 65534, wherever the checkout and its virtualenv live.

A clone in a private directory (a CI runner's ``mktemp -d``, root's home) cannot be read by
another uid, so a test that runs Roost as uid 65534 gets :func:`pythonpath`: the checkout's
packages and the interpreter's site-packages themselves when that uid can read them, else a
copy of them (hard links where the filesystem allows, so it costs no space) in a directory
every user can read, made once per test session and removed at its end.
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

__all__ = [
    "NOBODY",
    "SYSTEM_PYTHON",
    "as_nobody",
    "needs_nobody",
    "pythonpath",
    "run_daemon_script",
]

NOBODY = 65534
"""The unprivileged uid (and gid) the tests switch to."""

SYSTEM_PYTHON = "/usr/bin/python3"
"""An interpreter every user can run (the virtualenv's may live under ``/root``)."""

needs_nobody = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None or not os.path.exists(SYSTEM_PYTHON),
    reason="needs root to start a process as another user (setpriv) and a system python3",
)
"""Marks a test that runs Roost as uid 65534."""

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("runtime", "events", "actors", "soak", "tests")
"""The checkout's top-level packages a uid-65534 process imports."""


def as_nobody() -> list[str]:
    """The ``setpriv`` prefix that runs a command as uid and gid 65534 with no groups."""
    return ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]


def _site_packages() -> list[str]:
    return [p for p in sys.path if p.endswith("site-packages") and os.path.isdir(p)]


def _reachable(paths: list[str]) -> bool:
    probe = (
        "import os, sys; sys.exit(any(not os.access(p, os.R_OK | os.X_OK) for p in sys.argv[1:]))"
    )
    done = subprocess.run(
        [*as_nobody(), SYSTEM_PYTHON, "-c", probe, *paths],
        capture_output=True,
        check=False,
    )
    return done.returncode == 0


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _copy(src: str, dst: str) -> None:
    shutil.copytree(
        src,
        dst,
        symlinks=True,
        copy_function=_link_or_copy,
        ignore=shutil.ignore_patterns("__pycache__"),
    )


@functools.cache
def pythonpath() -> str:
    """A ``PYTHONPATH`` under which uid 65534 imports this checkout and its dependencies."""
    wanted = [str(REPO / name) for name in PACKAGES]
    sites = _site_packages()
    if _reachable([*wanted, *sites]):
        return os.pathsep.join([str(REPO), *sites])
    base = Path(tempfile.mkdtemp(prefix="roost-nobody-tree-", dir="/var/tmp"))
    atexit.register(shutil.rmtree, base, True)
    base.chmod(0o755)
    (base / "repo").mkdir()
    for name in PACKAGES:
        _copy(str(REPO / name), str(base / "repo" / name))
    copies = []
    for index, site in enumerate(sites):
        _copy(site, str(base / f"site{index}"))
        copies.append(str(base / f"site{index}"))
    for path in base.rglob("*"):  # the copied directories are new: make them traversable
        if path.is_dir() and not path.is_symlink():
            path.chmod(path.stat().st_mode | 0o555)
    return os.pathsep.join([str(base / "repo"), *copies])


def run_daemon_script(module: str) -> dict[str, Any]:
    """Run ``python -m module BASE`` as uid 65534 (its daemon, commands and client too).

    BASE is a fresh directory that uid owns, removed afterwards; the script prints one JSON
    object as its last line, which is returned.
    """
    base = Path(tempfile.mkdtemp(prefix="roost-nonroot-", dir="/var/tmp"))
    try:
        base.chmod(0o755)
        os.chown(base, NOBODY, NOBODY)
        env = {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": str(base),
            "PYTHONPATH": pythonpath(),
            "ROOST_BACKEND": "runtime.daemon.backend:create_backend",
        }
        done = subprocess.run(
            [*as_nobody(), SYSTEM_PYTHON, "-m", module, str(base)],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        out: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return out
