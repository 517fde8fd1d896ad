"""Each package re-exports its public names, sorted, and every one resolves."""

from __future__ import annotations

import importlib

import pytest


@pytest.mark.parametrize("package", ["events", "runtime", "actors", "soak"])
def test_all_is_sorted_and_every_name_resolves(package: str) -> None:
    module = importlib.import_module(package)
    names = module.__all__
    # ruff's RUF022 order: CONSTANTS, then Classes, then functions, each alphabetical
    assert names == sorted(
        names, key=lambda n: (0 if n.isupper() else 1 if n[0].isupper() else 2, n)
    )
    assert len(names) == len(set(names))
    for name in names:
        assert getattr(module, name) is not None, name


@pytest.mark.parametrize("package", ["events", "runtime", "actors", "soak"])
def test_the_package_docstring_draws_its_layout(package: str) -> None:
    module = importlib.import_module(package)
    assert module.__doc__ and len(module.__doc__.splitlines()) > 2


def test_events_imports_nothing_from_runtime_or_actors() -> None:
    import ast
    import pathlib

    root = pathlib.Path(importlib.import_module("events").__file__).parent  # type: ignore[arg-type]
    offenders = []
    for path in root.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                if node.module.split(".")[0] in ("runtime", "actors", "soak"):
                    offenders.append(f"{path.name}: {node.module}")
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] in ("runtime", "actors", "soak"):
                        offenders.append(f"{path.name}: {alias.name}")
    assert offenders == []
