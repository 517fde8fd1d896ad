"""Shapes of what a command leaves that git would act on, beyond the plain ones.

`test_leftovers.py` covers the plain shapes (a bare repository of real directories, a
nested ``.git``, special and set-id files). Git follows symbolic links where it checks a
directory's shape (``objects`` and ``refs`` only need to be reachable directories), so a
bare repository made of links is as live as one of directories: the review must judge
the shape as git does.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime.client import Client
from tests import nobody
from tests.integration.adversarial_helpers import Call, needs_bwrap, recorded
from tests.integration.test_adversarial_paths import git_on_a_terminal
from tests.integration.test_leftovers import (
    C,
    monitor,
    quarantined,
    repo_daemon,
)

pytestmark = [
    needs_bwrap,
    pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed here"),
]


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("shapes")


@pytest.fixture(scope="module")
def client(base: Path) -> Iterator[Client]:
    with repo_daemon(base) as c:
        yield c


def run(client: Client, command: str) -> tuple[Call, dict[str, Any]]:
    call = Call("repo", C, "command.run", {"command": command, "timeout_ms": 30000})
    return call, call.run(client)


LINKED_BARE = (
    "mkdir -p {d}/store/heads && ln -s store {d}/objects && ln -s store {d}/refs"
    " && echo 'ref: refs/heads/main' > {d}/HEAD && printf '[core]\\n\\tpager = {p}\\n' > {d}/config"
)


def test_a_bare_repository_whose_objects_and_refs_are_links_is_quarantined(
    client: Client, base: Path
) -> None:
    control = base / "control"
    control.mkdir()
    program, marker = monitor(base, "linked-control")
    (control / "sub").mkdir()
    run_here = LINKED_BARE.format(d="sub", p=program)
    subprocess.run(["sh", "-c", run_here], cwd=control, check=True)
    git_on_a_terminal(control / "sub", "branch", home=base)
    assert marker.exists(), "this git does not take a linked bare shape; proves nothing"

    repo = Path(client.diagnostics("repo")["root"])
    program, marker = monitor(base, "linked")
    call, result = run(client, LINKED_BARE.format(d="sub", p=program))
    assert result["status"] == "ok", result
    git_on_a_terminal(repo / "sub", "branch", home=base)
    assert not marker.exists()
    assert set(quarantined(recorded(client, call))) >= {"sub/HEAD", "sub/config"}


def test_a_name_that_is_not_utf8_neither_hides_the_changes_nor_fails_the_call(
    client: Client,
) -> None:
    repo = Path(client.diagnostics("repo")["root"])
    script = (
        "mkdir -p \"$(printf 'nb\\377')/.git\" && printf x > \"$(printf 'nf\\376')\""
        " && echo seen > utf8-neighbour.txt"
    )
    call, result = run(client, script)
    assert result["status"] == "ok", result
    entries = recorded(client, call)
    assert quarantined(entries) == {"nb\\xff/.git": "git_dir_created"}
    [changes] = [e["data"] for e in entries if e["type"] == "tool.changes"]
    assert {c["path"] for c in changes["created"]} >= {"nf\\xfe", "utf8-neighbour.txt"}
    assert not os.path.lexists(os.fsencode(repo) + b"/nb\xff/.git")


def test_a_sensitive_name_a_command_links_to_a_readable_file_is_quarantined(
    client: Client,
) -> None:
    repo = Path(client.diagnostics("repo")["root"])
    call, result = run(client, "touch a b && ln -s a .env && ln b .env.local")
    assert result["status"] == "ok", result
    assert quarantined(recorded(client, call)) == {
        ".env": "sensitive_alias",
        ".env.local": "sensitive_alias",
    }
    # the user fills them later, as a setup step would
    with (repo / ".env").open("a") as f:
        f.write("API_KEY=planted-link-secret-0451\n")
    with (repo / ".env.local").open("a") as f:
        f.write("TOKEN=planted-hardlink-secret-0452\n")
    _, result = run(client, "cat a b | rev; cat a b | base32")
    assert result["status"] == "ok", result
    assert result["result"]["stdout"] == ""
    for name in (".env", ".env.local"):
        (repo / name).unlink()


@nobody.needs_nobody
def test_a_daemon_that_is_not_root_quarantines_the_same_shapes() -> None:
    """``nonroot_leftovers.py`` runs as uid 65534: its daemon, its commands, its client."""
    out = nobody.run_daemon_script("tests.integration.nonroot_leftovers")
    assert out["attack"]["result"]["stdout"] == "done\n", out["attack"]
    assert out["quarantined"] == {
        "sub/HEAD": "bare_repository",
        "sub/config": "bare_repository",
        "sub/objects": "bare_repository",
        "sub/refs": "bare_repository",
        ".env": "sensitive_alias",
        ".env.local": "sensitive_alias",
        "nb\\xff/.git": "git_dir_created",
    }
    assert out["leak"] == ""
    assert out["linked_pager_ran"] is False
