"""The shape figures issue 20 tracks, measured on the source tree (docs/architecture.md).

``python scripts/code_metrics.py`` prints, for ``events/``, ``runtime/``, ``actors/`` and
``soak/``: ``if`` statements per 1,000 lines in ``runtime/`` + ``actors/``, the number of
``dict[str, Any]`` annotations, class names defined more than once, the longest chain of
Roost's own classes (a base from a library ends the chain) and the modules over 400 lines.
Beside the ``if`` figure it counts the other ways to branch (conditional expressions and
``match`` cases, per 1,000 lines), so an ``if`` rewritten into another form shows up.
``--json`` prints the same as one JSON object; ``--ifs`` lists each module's ``if`` count.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("events", "runtime", "actors", "soak")
LONG = 400


def _modules(*packages: str) -> list[Path]:
    return sorted(p for package in packages for p in (ROOT / package).rglob("*.py"))


def _parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


def if_density() -> float:
    """``if`` statements per 1,000 physical lines in ``runtime/`` and ``actors/``."""
    ifs = lines = 0
    for path in _modules("runtime", "actors"):
        lines += len(path.read_text().splitlines())
        ifs += sum(isinstance(node, ast.If) for node in ast.walk(_parse(path)))
    return round(ifs * 1000 / lines, 1)


def other_branches() -> float:
    """Conditional expressions and ``match`` cases per 1,000 lines (``runtime/``, ``actors/``)."""
    branches = lines = 0
    for path in _modules("runtime", "actors"):
        lines += len(path.read_text().splitlines())
        branches += sum(
            isinstance(node, (ast.IfExp, ast.match_case)) for node in ast.walk(_parse(path))
        )
    return round(branches * 1000 / lines, 1)


def ifs_by_module() -> dict[str, tuple[int, int]]:
    """Each module of ``runtime/`` and ``actors/``: its ``if`` count and lines, most first."""
    found = {
        str(path.relative_to(ROOT)): (
            sum(isinstance(node, ast.If) for node in ast.walk(_parse(path))),
            len(path.read_text().splitlines()),
        )
        for path in _modules("runtime", "actors")
    }
    return dict(sorted(found.items(), key=lambda item: -item[1][0]))


def dict_any() -> int:
    """``dict[str, Any]`` written in code (annotations and casts, not prose)."""
    return sum(
        isinstance(node, ast.Subscript) and ast.unparse(node) == "dict[str, Any]"
        for path in _modules(*PACKAGES)
        for node in ast.walk(_parse(path))
    )


def _classes() -> dict[str, list[tuple[str, list[str]]]]:
    found: dict[str, list[tuple[str, list[str]]]] = defaultdict(list)
    for path in _modules(*PACKAGES):
        for node in ast.walk(_parse(path)):
            if isinstance(node, ast.ClassDef):
                bases = [ast.unparse(b).split("[")[0].rsplit(".", 1)[-1] for b in node.bases]
                found[node.name].append((str(path.relative_to(ROOT)), bases))
    return found


def duplicate_classes() -> dict[str, list[str]]:
    """Class names defined in more than one place, with where."""
    return {
        name: [where for where, _ in defs] for name, defs in _classes().items() if len(defs) > 1
    }


def deepest_chain() -> list[str]:
    """The longest inheritance chain through Roost's own classes (resolved by name)."""
    classes = _classes()

    def chain(name: str, seen: tuple[str, ...]) -> list[str]:
        best: list[str] = []
        for _, bases in classes.get(name, []):
            for base in bases:
                if base in classes and base not in seen:
                    longer = chain(base, (*seen, base))
                    best = max(best, longer, key=len)
        return [name, *best]

    return max((chain(name, (name,)) for name in classes), key=len)


def long_modules() -> dict[str, int]:
    """Modules over 400 lines, longest first."""
    sizes = {
        str(path.relative_to(ROOT)): len(path.read_text().splitlines())
        for path in _modules(*PACKAGES)
    }
    return dict(sorted(((m, n) for m, n in sizes.items() if n > LONG), key=lambda i: -i[1]))


def measure() -> dict[str, object]:
    """Every figure, as ``--json`` prints it."""
    chain = deepest_chain()
    return {
        "if_per_1000_lines": if_density(),
        "other_branches_per_1000_lines": other_branches(),
        "dict_str_any": dict_any(),
        "duplicate_classes": duplicate_classes(),
        "inheritance_depth": len(chain),
        "deepest_chain": chain,
        "modules_over_400_lines": long_modules(),
    }


def main(argv: list[str] | None = None) -> int:
    """Print the figures."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--json", action="store_true", help="one JSON object")
    parser.add_argument("--ifs", action="store_true", help="each module's if count and lines")
    args = parser.parse_args(argv)
    if args.json:
        print(json.dumps(measure(), indent=2))
        return 0
    if args.ifs:
        for module, (ifs, lines) in ifs_by_module().items():
            print(f"{ifs:4d} {lines:5d}  {module}")
        return 0
    chain, long, twice = deepest_chain(), long_modules(), duplicate_classes()
    print(f"if per 1,000 lines (runtime/, actors/): {if_density()}")
    print(f"conditional expressions and match cases per 1,000 lines: {other_branches()}")
    print(f"dict[str, Any]: {dict_any()}")
    print(f"class names defined twice: {len(twice)} {sorted(twice)}")
    print(f"inheritance depth: {len(chain)} ({' -> '.join(chain)})")
    print(f"modules over {LONG} lines: {len(long)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
