"""Roost's own class towers stay three levels deep at most (STYLE.md, issue 20).

A class's depth is the number of Roost classes on its longest chain of bases, itself
included: ``ConversationActor -> AgentShell -> RoostActor`` is 3. A base from a library
(thespian's ``Actor``, msgspec's ``Struct``, ``Exception``) ends the chain. Bases are
resolved by name within ``events/``, ``runtime/``, ``actors/`` and ``soak/``; a name
imported from outside them is a library's, and a name defined twice counts as its deepest
definition.
"""

from __future__ import annotations

import ast
import pathlib
from collections.abc import Iterator

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGES = ("events", "runtime", "actors", "soak")
LIMIT = 3


def _external_names(tree: ast.Module) -> set[str]:
    """Names a module binds by importing from outside the packages (a library's)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] not in PACKAGES:
                names.update(alias.asname or alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] not in PACKAGES:
                    names.add(alias.asname or alias.name.split(".")[0])
    return names


def _base_name(base: ast.expr, external: set[str]) -> str | None:
    """The name a base is looked up by, or None when it is a library's."""
    if isinstance(base, ast.Subscript):  # Generic[T], list[tuple[str, Any]]
        base = base.value
    if isinstance(base, ast.Name):
        return None if base.id in external else base.id
    if isinstance(base, ast.Attribute):
        root: ast.expr = base
        while isinstance(root, ast.Attribute):
            root = root.value
        if isinstance(root, ast.Name) and root.id in external:
            return None
        return base.attr
    return None


def _classes(root: pathlib.Path) -> Iterator[tuple[str, str, list[str]]]:
    """Every class of the packages: its name, its module, the names of its bases."""
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            external = _external_names(tree)
            for node in ast.walk(tree):
                if isinstance(node, ast.ClassDef):
                    names = [_base_name(base, external) for base in node.bases]
                    module = path.relative_to(root).as_posix()
                    yield node.name, module, [name for name in names if name is not None]


def longest_chains(root: pathlib.Path) -> list[tuple[list[str], str]]:
    """Each class's longest chain through Roost classes (and its module), deepest first."""
    bases: dict[str, list[list[str]]] = {}
    modules: dict[str, str] = {}
    for name, module, base_names in _classes(root):
        bases.setdefault(name, []).append(base_names)
        modules.setdefault(name, module)
    memo: dict[str, list[str]] = {}

    def chain(name: str, seen: frozenset[str]) -> list[str]:
        if name in memo:
            return memo[name]
        best = [name]
        for definition in bases[name]:
            for base in definition:
                if base in bases and base not in seen:
                    longer = [name, *chain(base, seen | {name})]
                    if len(longer) > len(best):
                        best = longer
        memo[name] = best
        return best

    chains = [(chain(name, frozenset()), modules[name]) for name in sorted(bases)]
    return sorted(chains, key=lambda found: -len(found[0]))


def too_deep(root: pathlib.Path) -> list[str]:
    """The chains deeper than :data:`LIMIT`, as ``A -> B -> ... (module)``."""
    return [
        f"{' -> '.join(chain)} ({module})"
        for chain, module in longest_chains(root)
        if len(chain) > LIMIT
    ]


def test_no_roost_class_inherits_through_more_than_three_roost_classes() -> None:
    deepest = too_deep(ROOT)
    assert deepest == [], f"the longest chain is {deepest[0]}" if deepest else ""


def test_a_four_level_tower_is_found_and_a_library_base_ends_a_chain(
    tmp_path: pathlib.Path,
) -> None:
    package = tmp_path / "actors"
    package.mkdir()
    (package / "tower.py").write_text(
        "from thespian.actors import Actor\n"
        "import msgspec\n"
        "from actors import base\n"
        "class Base(Actor): pass\n"
        "class Middle(base.Base): pass\n"
        "class Shell(Middle): pass\n"
        "class Leaf(Shell): pass\n"
        "class Message(msgspec.Struct): pass\n"
        "class Reply(Message): pass\n"
    )
    (package / "other.py").write_text("class Actor: pass\nclass Struct: pass\n")
    assert too_deep(tmp_path) == ["Leaf -> Shell -> Middle -> Base (actors/tower.py)"]
    chains = {chain[0]: chain for chain, _module in longest_chains(tmp_path)}
    assert chains["Base"] == ["Base"]  # thespian's Actor, not other.py's
    assert chains["Reply"] == ["Reply", "Message"]  # msgspec's Struct, not other.py's
