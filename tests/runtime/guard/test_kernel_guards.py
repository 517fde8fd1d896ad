"""The kernel's guards of a tool process: probed, reported, and held by a non-root bwrap.

The daemon-level attacks (root daemon, three routes) are in
``tests/integration/test_kernel_guards.py``; here: the layers ``probe_layers`` reports and
what an unavailable one says, the masks the view adds, and the same refusals for a
bubblewrap started by an unprivileged uid (the non-root daemon's case).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime.guard.sandbox import seccomp
from runtime.guard.sandbox.layers import DISABLE_ENV, View, bwrap_argv, probe_layers
from runtime.guard.sandbox.view import MASKED_PATHS, PROC_READ_ONLY, kernel_masks_argv

GUARDS = ("seccomp", "no_new_privs", "proc_masks", "tmpfs_size")
LIMITS = ("pids_limit", "memory_limit", "cpu_limit")


def test_every_guard_and_limit_is_reported_with_what_its_absence_means(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(DISABLE_ENV, "seccomp,cgroups")
    layers = probe_layers()
    assert layers["seccomp"]["available"] is False
    assert layers["seccomp"]["detail"].startswith(f"disabled by {DISABLE_ENV}; commands run")
    for name in LIMITS:
        assert layers[name]["available"] is False
        assert layers[name]["detail"].startswith(f"disabled by {DISABLE_ENV}; a command")
    monkeypatch.setenv(DISABLE_ENV, "bwrap")
    layers = probe_layers()
    for name in GUARDS:
        assert layers[name]["available"] is False
        assert "they come with bubblewrap" in layers[name]["detail"], layers[name]


def test_the_guards_are_available_where_bubblewrap_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(DISABLE_ENV, raising=False)
    layers = probe_layers()
    if not layers["bwrap"]["available"]:
        pytest.skip(f"bwrap cannot run here: {layers['bwrap']['detail']}")
    for name in ("no_new_privs", "proc_masks"):
        assert layers[name]["available"] is True, layers[name]
    assert layers["seccomp"]["available"] is seccomp.available()[0]


def test_the_masks_name_only_what_this_kernel_has() -> None:
    argv = kernel_masks_argv()
    named = {a for a in argv if a.startswith(("/proc/", "/sys/")) and a != "/dev/null"}
    assert named == {p for p in (*PROC_READ_ONLY, *MASKED_PATHS) if os.path.lexists(p)}
    assert "/proc/sys" in named


# --- a bubblewrap started by an unprivileged uid -------------------------------------------

NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]

ATTACKS = (
    "grep -E '^(CapEff|NoNewPrivs|Seccomp):' /proc/self/status; "
    "touch a; chmod u+s a; echo suid=$?; chmod g+s a; echo sgid=$?; mkfifo p; echo fifo=$?; "
    "unshare -U true 2>/dev/null; echo unshare=$?; keyctl show @s >/dev/null 2>&1; "
    "echo keyctl=$?; echo keys=$(cat /proc/keys 2>/dev/null | wc -c); "
    "dd if=/dev/zero of=/tmp/fill bs=1M count=16 2>/dev/null; echo tmp=$(stat -c %s /tmp/fill)"
)


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory uid 65534 can write (not under root's private temp directory)."""
    path = Path(tempfile.mkdtemp(prefix="roost-nobody-", dir="/var/tmp"))
    path.chmod(0o777)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _interpreter() -> set[str]:
    """The test interpreter's places (a virtualenv in a private checkout, pyenv under /root)."""
    places = (sys.prefix, sys.base_prefix, os.path.dirname(os.path.realpath(sys.executable)))
    return {os.path.realpath(p) for p in places}


def _without_private_places(argv: list[str]) -> list[str]:
    """Drop the read-only binds of places uid 65534 cannot reach (the test's interpreter)."""
    out: list[str] = []
    index = 0
    while index < len(argv):
        if argv[index] == "--ro-bind" and (
            argv[index + 1].startswith("/root") or argv[index + 1] in _interpreter()
        ):
            index += 3
            continue
        out.append(argv[index])
        index += 1
    return out


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can start a process as uid 65534")
def test_a_bubblewrap_started_by_an_unprivileged_uid_holds_the_same_refusals(
    shared_dir: Path,
) -> None:
    layers = probe_layers()
    if not layers["seccomp"]["available"] or shutil.which("setpriv") is None:
        pytest.skip(f"no seccomp filter or setpriv here: {layers['seccomp']['detail']}")
    view = View(writable=(str(shared_dir),), cwd=str(shared_dir), tmpfs_bytes=4 * 1024**2)
    argv = _without_private_places(bwrap_argv(False, view))
    fd = seccomp.program_fd()
    try:
        done = subprocess.run(
            [*NOBODY, argv[0], "--seccomp", str(fd), *argv[1:], "/bin/sh", "-c", ATTACKS],
            pass_fds=(fd,),
            capture_output=True,
            text=True,
            timeout=60,
            cwd="/",
            check=False,
        )
    finally:
        os.close(fd)
    if "setting up uid map" in done.stderr or "No permissions to create" in done.stderr:
        pytest.skip(f"an unprivileged bwrap cannot run here: {done.stderr.strip()}")
    assert done.stdout.split("\n")[:-1] == [
        "CapEff:\t0000000000000000",
        "NoNewPrivs:\t1",
        "Seccomp:\t2",
        "suid=1",
        "sgid=1",
        "fifo=1",
        "unshare=1",
        "keyctl=1",
        "keys=0",
        f"tmp={4 * 1024**2}",
    ], done.stderr
    assert (shared_dir / "a").stat().st_mode & 0o6000 == 0
    assert not (shared_dir / "p").exists()


SPECIAL_MOUNTS = textwrap.dedent(
    """
    import json, subprocess
    from runtime.guard.sandbox.layers import View, bwrap_argv
    from runtime.guard.sandbox.view import kernel_mounts
    script = "for d in /sys/kernel/debug /sys/kernel/tracing; do ls -A $d | wc -l; done"
    outside = subprocess.run(["sh", "-c", script], capture_output=True, text=True).stdout
    argv = bwrap_argv(False, View(writable=(), cwd="/"))
    inside = subprocess.run([*argv, "sh", "-c", script], capture_output=True, text=True)
    print(json.dumps([outside.split(), inside.stdout.split(), kernel_mounts(), inside.stderr]))
    """
)


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting debugfs and tracefs needs root")
def test_debugfs_and_tracefs_under_sys_read_as_empty_directories() -> None:
    """In a private mount namespace (the host's mounts stay as they are)."""
    if not probe_layers()["bwrap"]["available"] or shutil.which("unshare") is None:
        pytest.skip("bwrap or unshare is not usable here")
    mount = (
        "mount -t debugfs none /sys/kernel/debug 2>/dev/null || true; "
        "mount -t tracefs none /sys/kernel/tracing 2>/dev/null || true; "
        f'exec {sys.executable} -c "$0"'
    )
    done = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", mount, SPECIAL_MOUNTS],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    outside, inside, mounts, _err = json.loads(done.stdout)
    if mounts != ["/sys/kernel/debug", "/sys/kernel/tracing"] or "0" in outside:
        pytest.skip(f"debugfs/tracefs cannot be mounted here: {mounts} {outside}")
    assert inside == ["0", "0"], done.stdout
