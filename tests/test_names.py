"""Each class name means one thing: no name is defined twice in the source tree (issue 20).

An effect a core returns and the actor message its shell sends are two classes with two
names (``runtime.lifecycle.effects.EscalateChild`` vs ``actors.messages.Escalate``).
"""

from __future__ import annotations

import ast
import pathlib
from collections import defaultdict

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGES = ("events", "runtime", "actors", "soak")


def classes_defined_twice(root: pathlib.Path) -> dict[str, list[str]]:
    """Every class name defined more than once under ``PACKAGES``: name → ``path:line``s."""
    where: defaultdict[str, list[str]] = defaultdict(list)
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            for node in ast.walk(tree):
                if isinstance(node, ast.ClassDef):
                    where[node.name].append(f"{path.relative_to(root).as_posix()}:{node.lineno}")
    return {name: places for name, places in sorted(where.items()) if len(places) > 1}


def test_no_class_name_is_defined_twice() -> None:
    assert classes_defined_twice(ROOT) == {}


def test_a_class_defined_twice_is_found_with_both_places(tmp_path: pathlib.Path) -> None:
    (tmp_path / "runtime").mkdir()
    (tmp_path / "actors").mkdir()
    (tmp_path / "runtime" / "effects.py").write_text("class Send:\n    pass\n")
    (tmp_path / "actors" / "messages.py").write_text(
        "class Reply:\n    pass\n\n\ndef f():\n    class Send:\n        pass\n"
    )
    assert classes_defined_twice(tmp_path) == {
        "Send": ["runtime/effects.py:1", "actors/messages.py:6"]
    }
