"""A full disk under ``ROOST_HOME``: every request says ``journal_error``, nothing half there.

The home is a 3 MB tmpfs (mounting one needs root; skipped otherwise), filled once the
project runs. A waited turn, a new conversation and a new project each fail at once with
the journal's error, not a timeout; the project and the conversation whose start was not
recorded are not left behind (no ``project_not_found`` later for a listed project); once
space is free again, the same requests work.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime.client import Client
from runtime.errors import RequestError
from tests.integration.adversarial_helpers import run_daemon
from tests.integration.conftest import make_root
from tests.integration.conftest import roost_cli as roost

FULL = "roost: journal_error: append failed: database or disk is full\n"


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=3m,mode=0700", "tmpfs", str(disk)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def fill(path: Path) -> None:
    """Write zeros to ``path`` until the file system has no space left."""
    with open(path, "wb") as f, contextlib.suppress(OSError):
        while True:
            f.write(b"\0" * 65536)
            f.flush()


def test_on_a_full_disk_every_request_reports_the_journals_error(
    small_disk: Path, tmp_path: Path
) -> None:
    root = make_root(tmp_path / "repo")
    with run_daemon(small_disk / "home") as daemon:
        home = daemon.home
        assert roost(home, "project", "start", root, "--id", "p1").returncode == 0
        assert roost(home, "conversation", "start", "p1", "--id", "c1").returncode == 0
        assert roost(home, "send", "p1", "c1", "hello", "--wait").returncode == 0
        filler = small_disk / "filler"
        fill(filler)

        waited = roost(home, "send", "p1", "c1", "again", "--wait", "--wait-timeout", "30")
        assert (waited.returncode, waited.stderr) == (1, FULL)
        started = roost(home, "conversation", "start", "p1", "--id", "c2")
        assert (started.returncode, started.stderr) == (1, FULL)
        project = roost(home, "project", "start", root, "--id", "p2")
        assert (project.returncode, project.stderr) == (1, FULL)
        assert roost(home, "project", "list", "-q").stdout.split() == ["p1"]
        plain = roost(home, "send", "p1", "c1", "once more")
        assert (plain.returncode, plain.stderr) == (1, FULL)
        never = roost(home, "send", "p1", "c2", "hi")
        assert never.stderr.startswith("roost: conversation_not_found: no conversation c2 ")
        with Client.connect(home, timeout_s=60) as c:  # failed appends in a quick row
            codes = []
            for n in range(12):
                try:
                    c.send_message("p1", "c1", f"quick {n}")
                except RequestError as e:
                    codes.append(e.code)
        assert codes == ["journal_error"] * 12
        listed = roost(home, "project", "list", "-q")
        assert listed.stdout.split() == ["p1"], listed.stderr
        last = roost(home, "send", "p1", "c1", "still full")
        assert (last.returncode, last.stderr) == (1, FULL)

        filler.unlink()
        assert roost(home, "send", "p1", "c1", "after", "--wait").returncode == 0
        assert roost(home, "conversation", "start", "p1", "--id", "c2").returncode == 0
        other = make_root(tmp_path / "other")
        assert roost(home, "project", "start", other, "--id", "p2").returncode == 0
