"""What the tests of ``roost mcp serve`` and ``roost a2a serve`` share: their stderr, and
a client that is another user of the machine."""

from __future__ import annotations

import os
import re
import select
import shutil
import subprocess
import time

import pytest

SYSTEM_PYTHON = shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin")
"""A python3 outside the virtualenv (another user can run it)."""
OTHER_UID = 65534  # nobody

needs_another_user = pytest.mark.skipif(
    os.getuid() != 0 or SYSTEM_PYTHON is None,
    reason="needs root (to connect as another user) and a system python3",
)
"""For a test whose client is another user of the machine (:func:`as_other_user`)."""


def wait_for_line(
    proc: subprocess.Popen[str],
    pattern: str,
    seen: list[str] | None = None,
    timeout_s: float = 60.0,
) -> str:
    """The first line of ``proc``'s stderr matching ``pattern`` (each line read goes to
    ``seen``)."""
    assert proc.stderr is not None
    seen = [] if seen is None else seen
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stderr], [], [], 0.5)
        if ready:
            line = proc.stderr.readline()
            if not line and proc.poll() is not None:
                break
            seen.append(line)
            if re.search(pattern, line):
                return line
    raise AssertionError(f"no line matching {pattern!r}; stderr: {''.join(seen)}")


def as_other_user(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``python3 -c script args...`` as uid :data:`OTHER_UID` (the caller is root)."""
    assert SYSTEM_PYTHON is not None
    return subprocess.run(
        [SYSTEM_PYTHON, "-c", script, *args],
        preexec_fn=lambda: os.setuid(OTHER_UID),
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
        cwd="/",
        env={"PATH": "/usr/bin:/bin"},
    )
