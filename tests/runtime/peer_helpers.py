"""Processes that connect to Roost's sockets from places a sandboxed command would be.

:data:`PROBE` is a standalone script (``socket_probe.py``); :func:`probe` runs it behind a
prefix: a new PID namespace (:func:`pid_namespace_prefixes`: ``unshare --pid --fork``,
or bubblewrap with ``ROOST_HOME`` bound explicitly), a shell named like the sandbox's
init (:func:`sandbox_init_prefix`), or nothing (the user's own process).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from runtime.guard.sandbox.proctree import MARKER_ENV
from runtime.guard.sandbox.run import INIT_NAME

PROBE = str(Path(__file__).with_name("socket_probe.py"))
"""The probe script (standard library only)."""


def _works(prefix: list[str]) -> bool:
    try:
        done = subprocess.run([*prefix, "/bin/true"], capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def pid_namespace_prefixes(home: str) -> dict[str, list[str]]:
    """Prefixes that run a command in a new PID namespace with ``home`` reachable, by name.

    Only those that work on this machine: ``unshare`` (through a user namespace when not
    root) and ``bwrap`` (the whole filesystem, ``home`` bound explicitly).
    """
    found: dict[str, list[str]] = {}
    unshare = shutil.which("unshare")
    if unshare:
        user = [] if os.geteuid() == 0 else ["--user", "--map-root-user"]
        prefix = [unshare, *user, "--pid", "--fork", "--kill-child"]
        if _works(prefix):
            found["unshare"] = prefix
    bwrap = shutil.which("bwrap")
    if bwrap:
        prefix = [bwrap, "--dev-bind", "/", "/", "--bind", home, home]
        prefix += ["--unshare-pid", "--die-with-parent", "--"]
        if _works(prefix):
            found["bwrap"] = prefix
    return found


def sandbox_init_prefix() -> list[str]:
    """Run a command under a shell whose ``$0`` is the sandbox's init name (no namespace)."""
    return ["/bin/sh", "-c", '"$@"; exit $?', INIT_NAME]


def marked_parent_prefix(marker: str) -> list[str]:
    """Run a command under a shell carrying the command marker; the command itself does not."""
    return [
        "env",
        f"{MARKER_ENV}={marker}",
        "/bin/sh",
        "-c",
        f'env -u {MARKER_ENV} "$@"; exit $?',
        "sh",
    ]


def probe(kind: str, path: str, prefix: list[str] | None = None) -> dict[str, Any]:
    """Run the probe (``roost`` or ``journal``) on ``path`` behind ``prefix``; its JSON."""
    done = subprocess.run(
        [*(prefix or []), sys.executable, PROBE, kind, path],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result
