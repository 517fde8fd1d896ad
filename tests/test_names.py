"""Names mean one thing each (issue 20, STYLE.md "Layout shows the architecture").

No class name is defined twice in the source tree: an effect a core returns and the actor
message its shell sends are two classes with two names
(``runtime.lifecycle.effects.EscalateChild`` vs ``actors.messages.Escalate``). No two
modules of one package differ by an ending (``stream.py`` / ``streaming.py``,
``mailbox.py`` / ``mailboxes.py``).
"""

from __future__ import annotations

import ast
import pathlib
from collections import defaultdict

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGES = ("events", "runtime", "actors", "soak")
ENDINGS = ("ings", "ing", "ers", "er", "ions", "ion", "ed", "es", "s")
"""Endings that make a second name of one word (``append`` / ``appends`` / ``appender``)."""


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


def _word(name: str) -> str:
    for ending in ENDINGS:
        if name.endswith(ending) and len(name) - len(ending) >= 3:
            return name[: -len(ending)]
    return name


def modules_differing_by_an_ending(root: pathlib.Path) -> list[list[str]]:
    """Groups of sibling modules (or sub-packages) whose names are one word's forms."""
    found = []
    for package in PACKAGES:
        for init in sorted((root / package).rglob("__init__.py")):
            folder = init.parent
            names = [p.stem for p in folder.glob("*.py") if p.stem != "__init__"]
            names += [p.name for p in folder.iterdir() if (p / "__init__.py").is_file()]
            words: defaultdict[str, list[str]] = defaultdict(list)
            for name in sorted(names):
                words[_word(name)].append(name)
            prefix = folder.relative_to(root).as_posix()
            found += [
                [f"{prefix}/{n}" for n in group] for group in words.values() if len(group) > 1
            ]
    return found


def test_no_two_modules_of_a_package_differ_by_an_ending() -> None:
    assert modules_differing_by_an_ending(ROOT) == []


def test_modules_that_differ_by_an_ending_are_found(tmp_path: pathlib.Path) -> None:
    actors = tmp_path / "actors"
    (actors / "thespian").mkdir(parents=True)
    for path in ("__init__.py", "appends.py", "appender.py", "sends.py", "thespian/__init__.py"):
        (actors / path).write_text("")
    (actors / "thespian" / "mailbox.py").write_text("")
    (actors / "mailboxes.py").write_text("")  # a sibling of thespian/, not of its mailbox
    assert modules_differing_by_an_ending(tmp_path) == [["actors/appender", "actors/appends"]]
