"""The trust boundary, attacked from inside ``command.run`` through a real daemon.

The daemon's ``ROOST_HOME`` is under ``/var/tmp`` (not the private ``/tmp`` of a command),
as a real home under ``~/.local/state`` would be: visible to a command unless the sandbox
hides it. An attacker's script, run by ``command.run`` in projects that deny and that allow
egress, tries every socket and file of Roost, the host's Unix sockets, ``$HOME``, ``/etc``
secrets and a sensitive file of the root, and prints what it reached. It must reach none.
Then git: a command tries to plant ``.git/commondir`` to redirect the repository's config
to a directory with a hostile ``core.fsmonitor`` (``.git`` is read-only to it); a real
``git status`` afterwards must not run it. And a bounded fork bomb stops at
``tool_max_processes`` while the daemon keeps serving.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime.client import Client
from runtime.guard.sandbox.hidden import listening_sockets
from runtime.guard.sandbox.view import SYSTEM_VISIBLE, _interpreter_places
from tests.integration.adversarial_helpers import Call, first, needs_bwrap, recorded, run_daemon
from tests.integration.conftest import make_root

pytestmark = needs_bwrap

C = "c"

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed here")

ATTACK = textwrap.dedent(
    """
    import json, os, socket, sys

    targets = json.loads(sys.argv[1])
    reached = []

    def frame(body):
        data = json.dumps(body).encode()
        return len(data).to_bytes(4, "big") + data

    for path in targets["sockets"]:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(2)
        try:
            s.connect(path)
            reached.append(["connect", path])
            s.sendall(frame({"id": 1, "op": "ping", "args": {}}))
            if s.recv(64):
                reached.append(["answered", path])
        except OSError:
            pass
        finally:
            s.close()
    for path in targets["files"]:
        try:
            with open(path, "rb") as f:
                if f.read(64):
                    reached.append(["read", path])
        except OSError:
            pass
    for path in targets["dirs"]:
        try:
            names = os.listdir(path)
        except OSError:
            continue
        names = [n for n in names if os.path.join(path, n) not in targets["runtime"]]
        if names:
            reached.append(["list", path, sorted(names)[:5]])
    print(json.dumps(reached))
    """
)


@pytest.fixture(scope="module")
def home() -> Iterator[Path]:
    """A ``ROOST_HOME`` outside ``/tmp``, where a command would see it without the view."""
    path = Path(tempfile.mkdtemp(prefix="roost-tb-", dir="/var/tmp"))
    try:
        yield path / "home"
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def client(home: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Client]:
    """A daemon with projects ``deny`` and ``allow`` (egress), ``repo`` (git) and ``bomb``."""
    base = tmp_path_factory.mktemp("trust")
    with run_daemon(home) as daemon, daemon.client(timeout_s=60) as c:
        for project, options in {
            "deny": {"network_egress_policy": "deny"},
            "allow": {"network_egress_policy": "allow"},
            "bomb": {"tool_max_processes": 32},
        }.items():
            root = Path(make_root(base / project))
            (root / "attack.py").write_text(ATTACK)
            (root / ".env").write_text("ROOST_TEST_SECRET=never-read-by-a-command\n")
            c.start_project(str(root), project_id=project, options=options)
            c.start_conversation(project, conversation_id=C)
        repo = base / "repo"
        repo.mkdir()
        if shutil.which("git") is None:
            yield c
            return
        git(repo, "init", "-q")
        (repo / "a.txt").write_text("one\n")
        git(repo, "add", "a.txt")
        git(repo, "commit", "-qm", "one")
        c.start_project(str(repo), project_id="repo")
        c.start_conversation("repo", conversation_id=C)
        yield c


def git(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run the real git in ``repo`` as the user would (identity given, no global config)."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(repo.parent),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
    }
    return subprocess.run(
        ["git", *args], cwd=repo, env=env, capture_output=True, text=True, check=False
    )


def run(client: Client, project: str, command: str) -> tuple[Call, dict[str, Any]]:
    """Run ``command`` with ``command.run`` in ``project``'s conversation."""
    call = Call(project, C, "command.run", {"command": command, "timeout_ms": 20000})
    return call, call.run(client)


def targets(home: Path) -> dict[str, list[str]]:
    """Everything of Roost and of the host an attacker would try."""
    names = sorted(os.listdir(home))
    assert {"roost.sock", "journal.sock", "journal.sqlite"} <= set(names), names
    user_home = os.path.expanduser("~")
    return {
        "sockets": sorted(
            {str(home / "roost.sock"), str(home / "journal.sock"), *listening_sockets()}
        ),
        "files": [
            *(str(home / n) for n in names if not n.endswith(".sock")),
            "/etc/shadow",
            ".env",
            os.path.join(user_home, ".bash_history"),
        ],
        "dirs": [str(home), str(home / "mailbox"), user_home, "/home", "/var/tmp", "/run"],
        "runtime": runtime_places(),
    }


def runtime_places() -> list[str]:
    """The runtime's own interpreter and the directories on the way to it (bound read-only)."""
    places = []
    for found in _interpreter_places(SYSTEM_VISIBLE):
        place = found
        while place not in ("/", ""):
            places.append(place)
            place = os.path.dirname(place)
    return sorted(set(places))


@pytest.mark.parametrize("project", ["deny", "allow"])
def test_a_command_reaches_no_roost_socket_file_or_host_socket(
    client: Client, home: Path, project: str
) -> None:
    wanted = targets(home)
    _call, result = run(client, project, f"python3 attack.py '{json.dumps(wanted)}'")
    assert result["status"] == "ok", result
    assert result["result"]["exit_code"] == 0, result["result"]["stderr"]
    assert json.loads(result["result"]["stdout"]) == []


def test_the_same_script_outside_the_sandbox_reaches_them(client: Client, home: Path) -> None:
    """The control: the attack works when nothing hides Roost, so the test above can fail."""
    wanted = targets(home)
    done = subprocess.run(
        ["python3", "-c", ATTACK, json.dumps(wanted)], capture_output=True, text=True, check=True
    )
    reached = json.loads(done.stdout)
    assert ["answered", str(home / "roost.sock")] in reached
    assert ["read", str(home / "journal.sqlite")] in reached


def test_a_sensitive_file_of_the_root_reads_as_nothing_for_a_command(client: Client) -> None:
    _call, result = run(client, "deny", "cat .env; echo rc=$?")
    assert "never-read-by-a-command" not in json.dumps(result)
    assert result["result"]["stdout"].endswith("rc=1\n")


@needs_git
def test_a_command_cannot_plant_a_commondir_and_git_status_runs_no_fsmonitor(
    client: Client, tmp_path: Path
) -> None:
    repo = Path(client.diagnostics("repo")["root"])
    evil = repo / "evil"
    marker = tmp_path / "fsmonitor-ran"
    script = (
        "mkdir -p evil/hooks evil/objects evil/refs && "
        f"printf '[core]\\n\\tfsmonitor = touch {marker}\\n' > evil/config && "
        "echo ../evil > .git/commondir; mkdir -p .git/worktrees/x; "
        "echo '[core] fsmonitor = x' >> .git/config; echo rc=$?"
    )
    _call, result = run(client, "repo", script)
    assert result["status"] == "ok", result
    assert result["result"]["stderr"].count("Read-only file system") == 3, result
    assert not (repo / ".git" / "commondir").exists()
    assert not (repo / ".git" / "worktrees").exists()
    assert "fsmonitor" not in (repo / ".git" / "config").read_text()
    status = git(repo, "status", "--short")
    assert status.returncode == 0, status.stderr
    assert not marker.exists()
    assert evil.is_dir()
    shutil.rmtree(evil)


@needs_git
def test_git_reads_work_in_a_command_and_its_writes_are_refused(client: Client) -> None:
    """``.git`` is read-only to commands, as in Codex CLI: the user commits, not the agent."""
    repo = Path(client.diagnostics("repo")["root"])
    ident = "-c user.name=agent -c user.email=agent@example.com"
    script = (
        f"echo two >> a.txt && git diff --stat && git log --format=%s && "
        f"git {ident} commit -qam two; echo rc=$?"
    )
    _call, result = run(client, "repo", script)
    assert (result["status"], result["result"]["exit_code"]) == ("ok", 0), result
    assert result["result"]["stdout"].splitlines()[-2:] == ["one", "rc=128"]
    assert "index.lock': Read-only file system" in result["result"]["stderr"]
    assert git(repo, "log", "--format=%s").stdout.split() == ["one"]
    git(repo, "checkout", "a.txt")


@needs_git
def test_the_git_directory_cannot_be_renamed_away_by_a_command(client: Client) -> None:
    repo = Path(client.diagnostics("repo")["root"])
    _call, result = run(client, "repo", "mv .git .git-old; echo rc=$?")
    assert result["result"]["stdout"] == "rc=1\n", result
    assert (repo / ".git" / "HEAD").is_file() and not (repo / ".git-old").exists()


BOMB = (
    'python3 -c "import os,time\nn=0\nfor i in range(2000):\n'
    "    try: pid=os.fork()\n    except OSError: break\n"
    '    if pid==0: time.sleep(60); os._exit(0)\n    n+=1\nprint(n)"'
)


def test_a_bounded_fork_bomb_stops_at_the_process_limit_and_the_daemon_keeps_serving(
    client: Client,
) -> None:
    layers = client.diagnostics("bomb")["sandbox_layers"]
    if not layers["pids_limit"]["available"]:
        pytest.skip(f"no pids cgroup here: {layers['pids_limit']['detail']}")
    call, result = run(client, "bomb", BOMB)
    assert result["status"] == "ok", result
    forked = int(result["result"]["stdout"])
    assert 1 <= forked < 32
    terminated = first(recorded(client, call), "tool.child_processes_terminated")
    assert (terminated["reason"], terminated["count"]) == ("completed", forked)
    call, after = run(client, "bomb", "echo still-serving")
    assert after["result"]["stdout"] == "still-serving\n"


@pytest.mark.skipif(shutil.which("psql") is None, reason="psql is not installed here")
@pytest.mark.parametrize("project", ["deny", "allow"])
def test_psql_cannot_reach_the_hosts_postgresql_socket(client: Client, project: str) -> None:
    """The reported attack: trust auth on the local socket made a command the superuser."""
    sockets = [s for s in listening_sockets() if ".s.PGSQL." in s]
    if not sockets:
        pytest.skip("no PostgreSQL Unix socket listens on this machine")
    directory = os.path.dirname(sockets[0])
    command = f'psql -h {directory} -U postgres -d test -tAc "select current_user"; echo rc=$?'
    _call, result = run(client, project, command)
    assert result["result"]["stdout"] == "rc=2\n", result
    assert "No such file or directory" in result["result"]["stderr"]


@needs_git
def test_a_hooks_path_in_the_work_tree_is_read_only_for_a_command(
    client: Client, tmp_path: Path
) -> None:
    """A repository whose config sets core.hooksPath (husky) keeps its hooks out of reach."""
    repo = Path(client.diagnostics("repo")["root"])
    (repo / ".husky").mkdir()
    (repo / ".husky" / "pre-commit").write_text("#!/bin/sh\nexit 0\n")
    assert git(repo, "config", "core.hooksPath", ".husky").returncode == 0
    marker = tmp_path / "hook-ran"
    try:
        plant = f"printf '#!/bin/sh\\ntouch {marker}\\n' > .husky/pre-commit; echo rc=$?"
        _call, result = run(client, "repo", plant)
        assert result["result"]["stdout"] == "rc=2\n", result
        assert "Read-only file system" in result["result"]["stderr"]
        assert (repo / ".husky" / "pre-commit").read_text() == "#!/bin/sh\nexit 0\n"
    finally:
        git(repo, "config", "--unset", "core.hooksPath")
        shutil.rmtree(repo / ".husky")
    assert not marker.exists()


@needs_git
def test_a_missing_hooks_path_created_by_a_command_is_removed(client: Client) -> None:
    repo = Path(client.diagnostics("repo")["root"])
    assert git(repo, "config", "core.hooksPath", "githooks").returncode == 0
    try:
        call, result = run(client, "repo", "mkdir githooks && echo x > githooks/post-checkout")
        assert (result["status"], result["result"]["exit_code"]) == ("ok", 0), result
        assert not (repo / "githooks").exists()
        quarantined = [
            (e["data"]["path"], e["data"]["reason"])
            for e in recorded(client, call)
            if e["type"] == "security.leftover_quarantined"
        ]
        assert quarantined == [("githooks", "hooks_created")]
    finally:
        git(repo, "config", "--unset", "core.hooksPath")


@needs_git
def test_fs_tools_never_write_into_a_hooks_path_of_the_work_tree(client: Client) -> None:
    repo = Path(client.diagnostics("repo")["root"])
    (repo / ".husky").mkdir()
    assert git(repo, "config", "core.hooksPath", ".husky").returncode == 0
    try:
        call = Call("repo", C, "fs.write", {"path": ".husky/pre-commit", "content": "id\n"})
        result = call.run(client)
        assert result["status"] == "error", result
        assert (result["reason"]["code"], result["reason"]["pattern"]) == (
            "sensitive_path_denied",
            "core.hooksPath",
        )
        assert not (repo / ".husky" / "pre-commit").exists()
    finally:
        git(repo, "config", "--unset", "core.hooksPath")
        shutil.rmtree(repo / ".husky")


def test_assets_a_command_plants_are_removed_and_never_become_tools(client: Client) -> None:
    root = Path(client.diagnostics("allow")["root"])
    shutil.rmtree(root / ".roost")
    asset = "printf -- '---\\ndescription: x\\n---\\nid\\n' > .roost/commands/x.md"
    plant = f"mkdir -p .roost/commands && {asset}"
    call, result = run(client, "allow", plant)
    assert (result["status"], result["result"]["exit_code"]) == ("ok", 0), result
    assert not (root / ".roost").exists()
    quarantined = [
        (e["data"]["path"], e["data"]["reason"])
        for e in recorded(client, call)
        if e["type"] == "security.leftover_quarantined"
    ]
    assert quarantined == [(".roost", "assets_created")]
