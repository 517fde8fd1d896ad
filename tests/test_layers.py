"""The floor plan is a contract that can fail: import-linter's layers, run on a copy of the tree.

``make check`` runs ``lint-imports`` on the real tree; these tests show that it passes there
and that one deliberate upward import (a guard importing the daemon) breaks it, naming the
import, so the contract is not a hope.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LINT = Path(sys.executable).parent / "lint-imports"

pytestmark = pytest.mark.skipif(not LINT.exists(), reason="import-linter is not installed")


def lint(tree: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run(
        [str(LINT), "--config", str(tree / "pyproject.toml"), "--no-cache"],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A copy of the packages and of pyproject.toml (where the contracts live)."""
    for package in ("events", "runtime", "actors", "soak"):
        shutil.copytree(
            REPO / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def test_the_tree_keeps_every_import_contract(tree: Path) -> None:
    done = lint(tree)
    assert done.returncode == 0, done.stdout
    assert "Contracts: 8 kept, 0 broken." in done.stdout


def test_the_mcp_server_may_not_reach_past_the_client(tree: Path) -> None:
    server = tree / "runtime" / "mcp_server" / "server.py"
    server.write_text(server.read_text() + "\nfrom runtime.execution import pipeline  # past\n")
    done = lint(tree)
    assert done.returncode == 1, done.stdout
    assert "runtime.mcp_server is not allowed to import runtime.execution:" in done.stdout


def test_the_a2a_server_may_not_reach_past_the_client(tree: Path) -> None:
    agent = tree / "runtime" / "a2a_server" / "agent.py"
    agent.write_text(agent.read_text() + "\nfrom runtime.agent import core  # past\n")
    done = lint(tree)
    assert done.returncode == 1, done.stdout
    assert "runtime.a2a_server is not allowed to import runtime.agent:" in done.stdout


def test_a_client_command_may_not_load_the_daemon_not_even_inside_a_function(tree: Path) -> None:
    commands = tree / "runtime" / "cli" / "commands.py"
    commands.write_text(
        commands.read_text()
        + "\n\ndef cmd_late(ns: Namespace) -> int:\n"
        + "    from runtime.daemon.control import daemon_pid  # noqa: PLC0415\n"
        + "    return 0 if daemon_pid(ns.home) else 1\n"
    )
    done = lint(tree)
    assert done.returncode == 1, done.stdout
    assert "runtime.cli.commands is not allowed to import runtime.daemon:" in done.stdout


def test_the_client_may_not_load_msgspec_nor_the_events_package(tree: Path) -> None:
    connection = tree / "runtime" / "client" / "connection.py"
    connection.write_text(connection.read_text() + "\nfrom runtime.wire.ops import OP_TABLE\n")
    waiting = tree / "runtime" / "cli" / "waiting.py"
    waiting.write_text(waiting.read_text() + "\nfrom events.view_types import TimelinePage\n")
    done = lint(tree)
    assert done.returncode == 1, done.stdout
    assert "runtime.client is not allowed to import runtime.wire.ops:" in done.stdout
    assert "runtime.client is not allowed to import msgspec:" in done.stdout
    assert "runtime.cli.waiting is not allowed to import events:" in done.stdout


def test_an_upward_import_breaks_the_layers_contract(tree: Path) -> None:
    paths = tree / "runtime" / "guard" / "workspace.py"
    paths.write_text(paths.read_text() + "\nfrom runtime.daemon import gateway  # upward\n")
    done = lint(tree)
    assert done.returncode == 1, done.stdout
    assert "runtime.guard is not allowed to import runtime.daemon:" in done.stdout
    assert "runtime.guard.workspace -> runtime.daemon" in done.stdout


def test_a_guard_concern_may_not_import_one_above_it(tree: Path) -> None:
    rules = tree / "runtime" / "guard" / "paths" / "rules.py"
    rules.write_text(rules.read_text() + "\nfrom runtime.guard.sandbox import layers  # upward\n")
    done = lint(tree)
    assert done.returncode == 1, done.stdout
    assert "runtime.guard.paths.rules -> runtime.guard.sandbox.layers" in done.stdout
