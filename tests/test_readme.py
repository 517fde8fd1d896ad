"""The README's set-up commands exist and the demo they run works."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from runtime.daemon.processes import daemon_processes

ROOT = Path(__file__).resolve().parents[1]


def test_the_readme_opens_with_exactly_the_two_set_up_commands() -> None:
    text = (ROOT / "README.md").read_text()
    first_block = re.search(r"```\n(.*?)```", text, re.S)
    assert first_block is not None
    commands = [line.split("#")[0].strip() for line in first_block.group(1).splitlines()]
    assert [c for c in commands if c] == ["make demo", "make test"]


def test_the_makefile_has_the_targets_the_readme_names() -> None:
    makefile = (ROOT / "Makefile").read_text()
    for target in ("demo", "test", "check"):
        assert re.search(rf"^{target}:", makefile, re.M), target
    assert "scripts/demo.py" in makefile


def _make_plan(target: str) -> list[str]:
    """What ``make TARGET`` would run from scratch (``-n -B``: print, run nothing)."""
    done = subprocess.run(
        ["make", "-n", "-B", target], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return [line for line in done.stdout.splitlines() if "pip install" in line]


def test_make_demo_installs_only_what_roost_runs_on_and_make_test_adds_the_dev_tools() -> None:
    assert _make_plan("demo")[-1].endswith("pip install --quiet -e .")
    assert _make_plan("test")[-1].endswith("pip install --quiet -e '.[dev]'")


def test_the_demo_runs_a_turn_with_the_cli_keeps_its_state_and_its_next_steps_work() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "demo.py")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=110,
        check=False,
    )
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    base = re.search(r"^The demo's state is kept in (\S+) ", out, re.M)
    assert base is not None, out
    try:
        assert re.search(r"^\$ roost daemon start --home \S+/home$", out, re.M)
        assert re.search(r"^outcome: +llm\.completed$", out, re.M)
        assert "    This file is read by the demo's first tool call." in out  # what the model read
        assert "## Causal chain" in out
        # 14 events of the turn, plus the seal's checkpoint when the demo outlasts the seal
        # interval (5 s of unsealed events) on a slow machine
        assert re.search(r"^ok: 1[45] events checked, hash chain ok$", out, re.M), out
        assert "processes left: 0" in out
        next_steps = re.findall(r"^  (\S*roost .*)$", out, re.M)
        assert [shlex.split(step)[1:3] for step in next_steps] == [
            ["daemon", "start"],
            ["--home", f"{base.group(1)}/home"],
            ["--home", f"{base.group(1)}/home"],
        ]
        runs = [
            subprocess.run(
                [sys.executable, "-m", "runtime.cli", *shlex.split(step)[1:]],
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
            for step in next_steps
        ]
        assert [r.returncode for r in runs] == [0, 0, 0], [r.stderr for r in runs]
        assert runs[1].stdout.startswith("timeline of demo/c1: 12 of 12 entries\n")
        assert daemon_processes(f"{base.group(1)}/home") == []
    finally:
        shutil.rmtree(base.group(1), ignore_errors=True)
