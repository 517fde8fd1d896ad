"""The daemon never trusts a file a tool process can write, through a real daemon.

Each test lets a command (the model chooses every call) leave something in the project
root, then has the daemon read or ask about it: a sparse file of hundreds of MiB read by
``fs.read`` (the ToolRunner's peak memory must not follow it), and a spoiled ``.git``
with the root planted as a bare repository whose config includes ``/dev/zero`` (the
daemon's git must not be redirected to it, so the hooks directory stays read-only). And a
root daemon on a checkout owned by another user still protects the hooks directory its
git names (git's ``safe.directory`` made the daemon's old probe skip that config).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from runtime.client import Client
from runtime.daemon.control import stop_daemon
from tests import nobody
from tests.integration.adversarial_helpers import Call, needs_bwrap, run_daemon, wait_until
from tests.integration.conftest import Daemon, daemon_env, make_root
from tests.integration.nonroot_reads import spoil
from tests.integration.test_trust_boundary import git

pytestmark = [
    needs_bwrap,
    pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed here"),
]

C = "c"
MiB = 1024 * 1024
SPARSE_MIB = 400


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[Daemon]:
    with run_daemon(tmp_path / "home") as running:
        yield running


def _run(c: Client, project: str, command: str) -> dict[str, Any]:
    call = Call(project, C, "command.run", {"command": command, "timeout_ms": 30000})
    return call.run(c)


def _peaks(daemon: Daemon) -> dict[int, int]:
    """Peak resident memory (``VmHWM``, bytes) of every daemon process, by pid."""
    out: dict[int, int] = {}
    for proc in daemon.processes():
        try:
            with open(f"/proc/{proc.pid}/status", encoding="ascii") as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        out[proc.pid] = int(line.split()[1]) * 1024
        except (OSError, psutil.Error):
            continue
    return out


def test_fs_read_of_a_huge_one_line_file_a_command_made_never_holds_it_in_memory(
    daemon: Daemon, tmp_path: Path
) -> None:
    root = Path(make_root(tmp_path / "repo"))
    with daemon.client(timeout_s=120) as c:
        c.start_project(str(root), project_id="p")
        c.start_conversation("p", conversation_id=C)
        made = _run(c, "p", f"truncate -s {SPARSE_MIB}M big.bin && echo made")
        assert made["status"] == "ok" and made["result"]["stdout"] == "made\n", made
        assert (root / "big.bin").stat().st_size == SPARSE_MIB * MiB
        assert Call("p", C, "fs.read", {"path": "notes.txt"}).run(c)["status"] == "ok"
        before = _peaks(daemon)
        read = Call("p", C, "fs.read", {"path": "big.bin"}).run(c)
        after = _peaks(daemon)
    assert read["status"] == "ok", read
    assert read["result"]["truncated"] is True
    assert read["result"]["content"] == ""
    grown = {pid: after[pid] - before.get(pid, 0) for pid in after}
    assert max(grown.values()) < 100 * MiB, {p: g // MiB for p, g in grown.items()}


def _husky_repo(repo: Path) -> None:
    repo.mkdir()
    assert git(repo, "init", "-q").returncode == 0
    assert git(repo, "config", "core.hooksPath", ".husky").returncode == 0
    (repo / ".husky").mkdir()
    (repo / ".husky" / "pre-commit").write_text("#!/bin/sh\nexit 0\n")


PLANT_HOOK = "printf '#!/bin/sh\\nid\\n' > .husky/pre-commit; echo rc=$?"


def _refused(planted: dict[str, Any]) -> None:
    """The command could not write the hooks directory: it was bound read-only."""
    assert planted["status"] == "ok", planted
    assert planted["result"]["stdout"] == "rc=2\n", planted
    assert "Read-only file system" in planted["result"]["stderr"]


def test_a_spoiled_git_dir_does_not_redirect_or_block_the_daemons_git(
    daemon: Daemon, tmp_path: Path
) -> None:
    repo = tmp_path / "repo"
    _husky_repo(repo)
    with daemon.client(timeout_s=120) as c:
        c.start_project(str(repo), project_id="p")
        c.start_conversation("p", conversation_id=C)
        # a command cannot spoil the repository: every .git is read-only in its view
        refused = _run(c, "p", "echo garbage > .git/HEAD && echo spoiled")
        assert refused["status"] == "ok" and refused["result"]["stdout"] == "", refused
        assert "Read-only file system" in refused["result"]["stderr"], refused
        # spoiled from outside (a broken checkout): the daemon's git is still not redirected
        spoil(repo)
        _refused(_run(c, "p", PLANT_HOOK))
    assert (repo / ".husky" / "pre-commit").read_text() == "#!/bin/sh\nexit 0\n"


@pytest.mark.skipif(os.geteuid() != 0, reason="a root daemon on another user's checkout")
def test_a_root_daemon_protects_the_hooks_path_of_a_checkout_another_user_owns(
    daemon: Daemon, tmp_path: Path
) -> None:
    repo = tmp_path / "repo"
    _husky_repo(repo)
    os.chmod(repo / ".husky", 0o777)  # writable whatever the command's capabilities
    os.chmod(repo / ".husky" / "pre-commit", 0o666)
    for place in [repo, *repo.rglob("*")]:
        os.lchown(place, 65534, 65534)
    tmp_path.chmod(0o755)
    with daemon.client(timeout_s=120) as c:
        c.start_project(str(repo), project_id="p")
        c.start_conversation("p", conversation_id=C)
        _refused(_run(c, "p", PLANT_HOOK))
        write = Call("p", C, "fs.write", {"path": ".husky/pre-commit", "content": "id\n"}).run(c)
        assert write["status"] == "error", write
        assert write["reason"]["pattern"] == "core.hooksPath", write
    assert (repo / ".husky" / "pre-commit").read_text() == "#!/bin/sh\nexit 0\n"


@nobody.needs_nobody
def test_a_daemon_that_is_not_root_holds_the_same_reads_safe() -> None:
    """``nonroot_reads.py`` runs as uid 65534: its daemon, its commands, its client.

    The interpreter is the system's (the test's may live where that user cannot read) with
    the test's packages on ``PYTHONPATH``.
    """
    out = nobody.run_daemon_script("tests.integration.nonroot_reads")
    assert out["spoil"]["result"]["stdout"] == "done\n", out["spoil"]
    assert out["fs_read"]["result"]["truncated"] is True, out["fs_read"]
    assert out["peak_growth"] < 100 * MiB, out["peak_growth"]
    _refused(out["planted"])
    assert out["hook"] == "#!/bin/sh\nexit 0\n"
    assert out["view_root"]["result"]["stdout"] == "root=2\n", out["view_root"]


PLANTED = """import pathlib
pathlib.Path({outside!r}).write_text("imported by a daemon-side process")
"""


def test_a_package_a_command_plants_in_the_daemons_working_directory_is_never_imported(
    tmp_path: Path,
) -> None:
    """``roost daemon start --foreground`` run in the project root: the root is its cwd.

    A command plants ``runtime/tools/mcp_client/listing.py`` there; the Project actor then lists
    another project's MCP servers in a child ``python -m runtime.tools.mcp_client.listing``, which
    must import Roost's module, not the planted one (``-P``, cwd ``/``).
    """
    root = Path(make_root(tmp_path / "repo"))
    other = Path(make_root(tmp_path / "other"))
    outside = tmp_path / "outside"
    outside.mkdir()
    escaped = outside / "escaped"
    home = tmp_path / "home"
    argv = [sys.executable, "-m", "runtime.cli", "daemon", "start", "--foreground"]
    proc = subprocess.Popen(
        [*argv, "--home", str(home)],
        cwd=root,
        env={**os.environ, **daemon_env()},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        c = wait_until(lambda: _connect(home), timeout_s=60, what="the foreground daemon")
        with c:
            c.start_project(str(root), project_id="p")
            c.start_conversation("p", conversation_id=C)
            code = PLANTED.format(outside=str(escaped))
            plant = (
                "mkdir -p runtime/tools/mcp_client && touch runtime/__init__.py"
                " runtime/tools/__init__.py runtime/tools/mcp_client/__init__.py"
                f" && cat > runtime/tools/mcp_client/listing.py <<'EOF'\n{code}EOF\necho planted"
            )
            planted = _run(c, "p", plant)
            assert planted["result"]["stdout"] == "planted\n", planted
            server = {"name": "fx", "command": [sys.executable, "-c", "pass"]}
            c.start_project(str(other), project_id="q", options={"mcp_servers": [server]})
    finally:
        stop_daemon(str(home), timeout_s=30)
        proc.wait(timeout=30)
    assert not escaped.exists(), escaped.read_text()


PLANT_HELPER = (
    "mkdir -p .venv/bin && for name in bwrap setpriv prlimit unshare; do "
    "printf '#!/bin/sh\\necho escaped > {outside}\\nexit 1\\n' > .venv/bin/$name; "
    "chmod +x .venv/bin/$name; done && echo planted"
)


def test_a_helper_program_planted_in_a_project_dir_on_the_daemons_path_is_never_run(
    tmp_path: Path,
) -> None:
    """The operator started the daemon with the project's venv active: ``ROOT/.venv/bin``
    leads its ``PATH``. A command plants ``bwrap`` (and the other helpers) there; the next
    daemon's sandbox must still be the system's ``bwrap``, not the planted one run outside
    every sandbox."""
    root = Path(make_root(tmp_path / "repo"))
    outside = tmp_path / "outside"
    outside.mkdir()
    escaped = outside / "escaped"
    path = f"{root}/.venv/bin:/usr/local/bin:/usr/bin:/bin"
    for turn in ("plant", "run"):
        with run_daemon(tmp_path / "home", PATH=path) as daemon, daemon.client(60) as c:
            if turn == "plant":
                c.start_project(str(root), project_id="p")
                c.start_conversation("p", conversation_id=C)
                planted = _run(c, "p", PLANT_HELPER.format(outside=escaped))
                assert planted["result"]["stdout"] == "planted\n", planted
            else:
                after = _run(c, "p", "echo still confined")
                assert not escaped.exists(), "the planted program ran outside the sandbox"
                assert after["status"] == "ok", after
                assert after["result"]["stdout"] == "still confined\n", after
    assert (root / ".venv" / "bin" / "bwrap").exists()
    assert not escaped.exists()


def _connect(home: Path) -> Client | None:
    try:
        c = Client.connect(str(home), timeout_s=120)
        c.ping()
    except Exception:
        return None
    return c
