"""The README's set-up commands exist and the demo they run works."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

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


def test_the_demo_runs_a_turn_and_leaves_no_process() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "demo.py")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=110,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "turn over: llm.completed" in done.stdout
    assert "tool.completed" in done.stdout
    assert "## Causal chain" in done.stdout
    assert done.stdout.rstrip().endswith("daemon stopped; processes left: 0")
