"""What a tool process leaves in the project root, reviewed through a real daemon.

Every ``.git`` is read-only to commands (git cannot be redirected during the run); what
mounts cannot prevent — a new nested repository, a bare-repository shape, set-id files,
FIFOs and sockets — is quarantined after the run, by ``command.run``, an asset command and
a workflow step alike, and recorded with what the command changed (``tool.changes``). A run
cut by ``kill -9`` of the whole daemon, or ended by ``roost daemon stop``, leaves its root
as safe: the next start (or the stop itself) reviews it and the event is journaled.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from runtime.client import Client
from runtime.daemon import start_daemon, stop_daemon
from runtime.journal.store import Journal
from tests.integration.adversarial_helpers import (
    Call,
    needs_bwrap,
    recorded,
    run_daemon,
    wait_until,
)
from tests.integration.conftest import daemon_env, make_root
from tests.integration.test_adversarial_paths import git_on_a_terminal
from tests.integration.test_daemon_crash import kill_everything
from tests.integration.test_fault_injection import command_options
from tests.integration.test_trust_boundary import git

pytestmark = [
    needs_bwrap,
    pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed here"),
]

C = "c"

PLANT = """---
description: Clone a vendored library (plants a nested repository)
argv: ["git", "init", "-q", "vendor/lib"]
---
"""


def bind(path: str) -> str:
    """A shell command leaving a Unix socket file at ``path`` (the seccomp filter allows it)."""
    return f"python3 -c \"import socket; socket.socket(socket.AF_UNIX).bind('{path}')\""


_STEPS = [
    {"tool": "command.run", "args": {"command": "echo one > flow.txt"}},
    {"tool": "command.run", "args": {"command": f"{bind('flow.sock')} && echo two >> flow.txt"}},
]
FLOW = f"""---
description: Two steps, the second leaves a socket file
steps: {json.dumps(_STEPS)}
---
"""


def monitor(base: Path, name: str) -> tuple[Path, Path]:
    """A program a planted ``core.fsmonitor`` would run, and the marker it creates."""
    marker = base / f"{name}-ran"
    program = base / f"{name}.sh"
    program.write_text(f"#!/bin/sh\ntouch '{marker}'\n")
    program.chmod(0o755)
    return program, marker


def make_repo(path: Path) -> Path:
    """A project root that is a git repository with one commit and a ``sub/`` directory."""
    make_root(path)
    (path / "sub").mkdir()
    (path / "sub" / "keep.txt").write_text("keep\n")
    (path / ".roost" / "commands").mkdir()
    (path / ".roost" / "commands" / "plant.md").write_text(PLANT)
    (path / ".roost" / "workflows").mkdir()
    (path / ".roost" / "workflows" / "flow.md").write_text(FLOW)
    git(path, "init", "-q")
    git(path, "add", "-A")
    git(path, "commit", "-qm", "one")
    return path


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("leftovers")


@contextmanager
def repo_daemon(base: Path) -> Iterator[Client]:
    """A daemon on ``base/home`` with project ``repo`` (a git repository) and conversation C."""
    with run_daemon(base / "home") as daemon, daemon.client(timeout_s=60) as c:
        c.start_project(str(make_repo(base / "repo")), project_id="repo", options=command_options())
        c.start_conversation("repo", conversation_id=C)
        yield c


@pytest.fixture(scope="module")
def client(base: Path) -> Iterator[Client]:
    """A daemon with project ``repo`` (a git repository)."""
    with repo_daemon(base) as c:
        yield c


def run(client: Client, command: str, name: str = "command.run") -> tuple[Call, dict[str, Any]]:
    args = {"command": command, "timeout_ms": 30000} if name == "command.run" else {}
    call = Call("repo", C, name, args)
    return call, call.run(client)


def of_type(entries: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e["data"] for e in entries if e["type"] == kind]


def quarantined(entries: list[dict[str, Any]]) -> dict[str, str]:
    return {q["path"]: q["reason"] for q in of_type(entries, "security.leftover_quarantined")}


def root_of(client: Client) -> Path:
    return Path(client.diagnostics("repo")["root"])


# --- finding 2: a bare repository at the root ---------------------------------------------


def test_a_bare_repository_planted_at_the_root_never_runs_its_pager(
    client: Client, base: Path
) -> None:
    control = make_repo(base / "control")
    program, marker = monitor(base, "bare-control")
    (control / ".git" / "HEAD").write_text("garbage\n")
    (control / "HEAD").write_text("ref: refs/heads/main\n")
    (control / "objects").mkdir()
    (control / "refs").mkdir()
    (control / "config").write_text(f"[core]\n\tpager = {program}\n")
    git_on_a_terminal(control, "branch", home=base)
    assert marker.exists(), "this git does not fall through to a bare root; proves nothing"

    repo = root_of(client)
    program, marker = monitor(base, "bare")
    script = (
        "echo garbage > .git/HEAD; echo rc=$?; echo 'ref: refs/heads/main' > HEAD && "
        f"mkdir -p objects refs/heads && printf '[core]\\n\\tpager = {program}\\n' > config"
    )
    call, result = run(client, script)
    assert result["status"] == "ok", result
    assert result["result"]["stdout"] == "rc=2\n"
    assert ".git/HEAD: Read-only file system" in result["result"]["stderr"]
    assert (repo / ".git" / "HEAD").read_text().startswith("ref: ")
    for name in ("HEAD", "objects", "refs", "config"):
        assert not (repo / name).exists(), name
    assert git_on_a_terminal(repo, "branch", home=base) == 0
    assert not marker.exists()
    entries = recorded(client, call)
    assert quarantined(entries) == {
        "HEAD": "bare_repository",
        "config": "bare_repository",
        "objects": "bare_repository",
        "refs": "bare_repository",
    }
    moved = {
        q["path"]: q.get("moved_to") for q in of_type(entries, "tool.changes")[0]["quarantined"]
    }
    assert Path(moved["config"]).read_text() == f"[core]\n\tpager = {program}\n"


# --- finding 3: control files are never live, nested repositories are quarantined ---------


def test_a_git_control_file_is_never_live_during_the_run(client: Client) -> None:
    script = (
        "echo ../evil > .git/commondir; mkdir .git/worktrees; "
        "test -e .git/commondir && echo live || echo absent"
    )
    _call, result = run(client, script)
    assert result["result"]["stdout"] == "absent\n", result
    assert result["result"]["stderr"].count("Read-only file system") == 2
    assert not (root_of(client) / ".git" / "commondir").exists()


def test_a_nested_repository_a_command_creates_is_quarantined(client: Client, base: Path) -> None:
    repo = root_of(client)
    program, marker = monitor(base, "nested")
    script = f"git init -q sub && git -C sub config core.fsmonitor {program} && echo made"
    call, result = run(client, script)
    assert result["result"]["stdout"] == "made\n", result
    assert not (repo / "sub" / ".git").exists()
    assert (repo / "sub" / "keep.txt").read_text() == "keep\n"
    git(repo / "sub", "status")
    assert not marker.exists()
    entries = recorded(client, call)
    assert quarantined(entries) == {"sub/.git": "git_dir_created"}
    moved = of_type(entries, "security.leftover_quarantined")[0]["moved_to"]
    assert program.name in (Path(moved) / "config").read_text()


def test_git_reads_work_in_a_command_and_git_writes_fail(client: Client) -> None:
    """As in Codex CLI: status, log and diff work; a commit cannot write ``.git``."""
    repo = root_of(client)
    head = git(repo, "rev-parse", "HEAD").stdout
    script = (
        "echo more >> notes.txt; git status --porcelain; git log --format=%s; "
        "git -c user.name=a -c user.email=a@example.com commit -qam two; echo rc=$?"
    )
    _call, result = run(client, script)
    out = result["result"]["stdout"]
    assert out.splitlines()[:2] == [" M notes.txt", "one"], result
    assert out.endswith("rc=128\n")
    assert "Read-only file system" in result["result"]["stderr"]
    assert git(repo, "rev-parse", "HEAD").stdout == head
    git(repo, "checkout", "notes.txt")


# --- set-id and special files ---------------------------------------------------------------


def test_socket_files_and_fifos_left_in_the_root_are_removed(client: Client) -> None:
    """A socket file is removed; a FIFO is refused by the seccomp filter, or else removed."""
    repo = root_of(client)
    call, result = run(client, f"mkfifo pipe; {bind('s.sock')} && echo made")
    assert result["result"]["stdout"] == "made\n", result
    assert not os.path.lexists(repo / "pipe") and not os.path.lexists(repo / "s.sock")
    entries = of_type(recorded(client, call), "security.leftover_quarantined")
    found = sorted((q["path"], q["kind"], q["moved_to"]) for q in entries)
    assert found in (
        [("pipe", "fifo", None), ("s.sock", "socket", None)],
        [("s.sock", "socket", None)],
    )


@pytest.mark.skipif(os.geteuid() != 0, reason="a set-uid root executable needs a root daemon")
def test_a_set_uid_executable_left_in_the_root_is_quarantined_without_its_bit(
    client: Client,
) -> None:
    """Finding 6. Whichever layer stops it (a seccomp filter, or this review), none stays."""
    repo = root_of(client)
    call, result = run(client, "cp /bin/sh helper && chmod 4755 helper; echo rc=$?")
    assert result["status"] == "ok", result
    if os.path.lexists(repo / "helper"):
        assert not os.lstat(repo / "helper").st_mode & (stat.S_ISUID | stat.S_ISGID)
        (repo / "helper").unlink()
    entries = recorded(client, call)
    if result["result"]["stdout"] == "rc=0\n":  # the chmod worked: the review caught it
        found = of_type(entries, "security.leftover_quarantined")
        assert [(q["path"], q["reason"]) for q in found] == [("helper", "setid_file")]
        mode = os.lstat(found[0]["moved_to"]).st_mode
        assert not mode & (stat.S_ISUID | stat.S_ISGID)


# --- what a command changed -------------------------------------------------------------------


def test_the_changes_of_a_command_are_recorded_and_in_the_incident_report(
    client: Client,
) -> None:
    repo = root_of(client)
    (repo / "gone.txt").write_text("bye\n")
    call, result = run(client, "echo hello > made.txt; echo more >> README.md; rm gone.txt")
    assert result["result"]["exit_code"] == 0, result
    changes = of_type(recorded(client, call), "tool.changes")
    assert len(changes) == 1
    change = changes[0]
    readme = (repo / "README.md").read_bytes()
    assert (change["tool"], change["method"], change["recovered"]) == (
        "command.run",
        "inotify",
        False,
    )
    assert change["created"] == [
        {
            "path": "made.txt",
            "kind": "file",
            "size": 6,
            "sha256": hashlib.sha256(b"hello\n").hexdigest(),
        }
    ]
    assert change["modified"] == [
        {
            "path": "README.md",
            "kind": "file",
            "size": len(readme),
            "sha256": hashlib.sha256(readme).hexdigest(),
        }
    ]
    assert change["deleted"] == [{"path": "gone.txt", "kind": "gone"}]
    assert (change["created_count"], change["modified_count"], change["deleted_count"]) == (1, 1, 1)
    report = client.incident_report("repo", C, correlation_id=call.correlation)
    assert [c["call_id"] for c in report["changes"]] == [change["call_id"]]
    markdown = client.incident_report("repo", C, correlation_id=call.correlation, format="md")
    section = markdown.split("## What did the agent change?", 1)[1]
    digest = hashlib.sha256(b"hello\n").hexdigest()
    assert f"| created | made.txt | file | 6 | {digest} |" in section
    assert "| deleted | gone.txt | gone |" in section
    page = client.incident_report("repo", C, correlation_id=call.correlation, format="html")
    assert '<section id="changes"><h2>What did the agent change?</h2>' in page
    assert "made.txt" in page.split('id="changes"', 1)[1]
    git(repo, "checkout", "README.md")
    (repo / "made.txt").unlink()


def test_an_asset_command_is_reviewed_like_command_run(client: Client) -> None:
    repo = root_of(client)
    call, result = run(client, "", name="command.run.plant")
    assert result["status"] == "ok", result["reason"]
    assert not (repo / "vendor" / "lib" / ".git").exists()
    entries = recorded(client, call)
    assert quarantined(entries) == {"vendor/lib/.git": "git_dir_created"}
    assert of_type(entries, "tool.changes")[0]["tool"] == "command.run.plant"
    shutil.rmtree(repo / "vendor")


def test_a_workflow_steps_changes_are_recorded_and_its_socket_file_removed(client: Client) -> None:
    repo = root_of(client)
    call, result = run(client, "", name="workflow.run.flow")
    assert result["status"] == "ok", result
    assert (repo / "flow.txt").read_text() == "one\ntwo\n"
    assert not os.path.lexists(repo / "flow.sock")
    entries = recorded(client, call)
    steps = {c["call_id"].rsplit(".", 1)[1]: c for c in of_type(entries, "tool.changes")}
    assert [c["path"] for c in steps["step-0"]["created"]] == ["flow.txt"]
    assert [c["path"] for c in steps["step-1"]["modified"]] == ["flow.txt"]
    assert [(q["path"], q["reason"]) for q in steps["step-1"]["quarantined"]] == [
        ("flow.sock", "special_file")
    ]
    (repo / "flow.txt").unlink()


# --- a run cut by kill -9 or ended by a stop --------------------------------------------------

CUT = (
    f"mkdir -p cut && git init -q cut/nested && {bind('cut/pipe')} && echo half > cut/half.txt"
    " && touch cut/ready && sleep 60"
)


def _start_cut_run(home: str, root: Path) -> None:
    with Client.connect(home, timeout_s=30) as c:
        c.start_project(str(root), project_id="p", options=command_options())
        c.start_conversation("p", conversation_id=C)
        tool = {"name": "command.run", "args": {"command": CUT}, "run_mode": "async"}
        c.send_message("p", C, "go", correlation_id="corr-cut", llm={"tool_calls": [tool]})
    wait_until((root / "cut" / "ready").exists, timeout_s=60, what="the run to plant")
    assert (root / "cut" / "nested" / ".git").is_dir()


def _recovered(home: str) -> list[dict[str, Any]]:
    with Journal.open(home, "sqlite") as journal:
        return [
            e.data
            for e in journal.read_project("p")
            if e.type == "tool.changes" and e.data.get("recovered")
        ]


def _assert_safe(root: Path) -> None:
    assert not (root / "cut" / "nested" / ".git").exists()
    assert not os.path.lexists(root / "cut" / "pipe")
    assert (root / "cut" / "half.txt").read_text() == "half\n"


@pytest.fixture
def home(daemon_home: str) -> str:
    """A ROOST_HOME whose daemons are all gone afterwards (``daemon_home``)."""
    return daemon_home


def test_a_run_cut_by_kill_9_of_the_daemon_is_reviewed_at_the_next_start(
    home: str, tmp_path: Path
) -> None:
    root = Path(make_root(tmp_path / "root"))
    start_daemon(home, env=daemon_env(), timeout_s=60)
    _start_cut_run(home, root)
    kill_everything(home)
    assert (root / "cut" / "nested" / ".git").is_dir()  # nothing reviewed it yet
    assert os.listdir(os.path.join(home, "runs"))  # but its record survived

    start_daemon(home, env=daemon_env(), timeout_s=60)
    _assert_safe(root)
    found = wait_until(lambda: _recovered(home), timeout_s=60, what="the recovered event")
    assert found[0]["method"] == "walk"
    assert {(q["path"], q["reason"]) for q in found[0]["quarantined"]} == {
        ("cut/nested/.git", "git_dir_created"),
        ("cut/pipe", "special_file"),
    }
    moved = {q["path"]: q.get("moved_to") for q in found[0]["quarantined"]}
    assert Path(moved["cut/nested/.git"], "HEAD").is_file() and moved["cut/pipe"] is None
    wait_until(lambda: not os.listdir(os.path.join(home, "runs")), what="the record to go")
    with Client.connect(home, timeout_s=30) as c:
        report = c.incident_report("p", C)
    assert any(run["recovered"] for run in report["changes"])


def test_roost_daemon_stop_reviews_the_runs_it_ends(home: str, tmp_path: Path) -> None:
    root = Path(make_root(tmp_path / "root"))
    start_daemon(home, env=daemon_env(), timeout_s=60)
    _start_cut_run(home, root)
    assert stop_daemon(home, timeout_s=30)
    _assert_safe(root)  # before any new start

    start_daemon(home, env=daemon_env(), timeout_s=60)
    found = wait_until(lambda: _recovered(home), timeout_s=60, what="the recovered event")
    assert ("cut/nested/.git", "git_dir_created") in {
        (q["path"], q["reason"]) for q in found[0]["quarantined"]
    }


def test_a_project_stop_reviews_the_runs_it_ends(home: str, tmp_path: Path) -> None:
    root = Path(make_root(tmp_path / "root"))
    start_daemon(home, env=daemon_env(), timeout_s=60)
    _start_cut_run(home, root)
    with Client.connect(home, timeout_s=60) as c:
        c.stop_project("p")
        _assert_safe(root)  # before the stop returned
        c.start_project(str(root), project_id="p", options=command_options())
    found = wait_until(lambda: _recovered(home), timeout_s=60, what="the recovered event")
    assert ("cut/pipe", "special_file") in {
        (q["path"], q["reason"]) for q in found[0]["quarantined"]
    }
