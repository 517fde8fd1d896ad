"""``scripts/code_metrics.py`` measures what it says, on a tree built for the purpose."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _metrics(root: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location("code_metrics", ROOT / "scripts/code_metrics.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.ROOT = root
    return module


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    for package in ("events", "runtime", "actors", "soak"):
        (tmp_path / package).mkdir()
    (tmp_path / "runtime" / "a.py").write_text(
        "from typing import Any\n\n\n"
        "class A:\n    pass\n\n\n"
        "class B(A):\n    pass\n\n\n"
        "class C(B, Exception):\n    pass\n\n\n"
        "def f(x: dict[str, Any]) -> dict[str, Any]:\n"
        "    if x:\n        return x\n    return {} if x is None else {1: 2}\n"
    )
    (tmp_path / "soak" / "b.py").write_text("class A:\n    pass\n" + "\n" * 400)
    return tmp_path


def test_each_figure_counts_what_it_names(tree: Path) -> None:
    figures = _metrics(tree).measure()
    assert figures["dict_str_any"] == 2
    assert figures["duplicate_classes"] == {"A": ["runtime/a.py", "soak/b.py"]}
    assert figures["deepest_chain"] == ["C", "B", "A"]  # Exception ends the chain
    assert figures["inheritance_depth"] == 3
    assert figures["modules_over_400_lines"] == {"soak/b.py": 402}
    lines = len((tree / "runtime" / "a.py").read_text().splitlines())
    assert figures["if_per_1000_lines"] == round(1000 / lines, 1)
    assert figures["other_branches_per_1000_lines"] == round(1000 / lines, 1)
    assert _metrics(tree).ifs_by_module() == {"runtime/a.py": (1, lines)}


def test_the_script_runs_on_the_repository() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts/code_metrics.py")],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    assert done.stdout.startswith("if per 1,000 lines (runtime/, actors/): ")
    assert "class names defined twice: 0 []" in done.stdout
