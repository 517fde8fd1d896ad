"""No production module over ~400 lines without a reason in its docstring (issue 11)."""

from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGES = ("runtime", "events", "soak", "actors")
LIMIT = 400
REASON = "Why this module is long:"


def long_modules_without_a_reason(root: pathlib.Path) -> list[str]:
    found = []
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            text = path.read_text(encoding="utf-8")
            if len(text.splitlines()) <= LIMIT:
                continue
            doc = ast.get_docstring(ast.parse(text)) or ""
            if REASON not in doc:
                found.append(path.relative_to(root).as_posix())
    return found


def test_every_long_module_says_why_in_its_docstring() -> None:
    assert long_modules_without_a_reason(ROOT) == []


def test_a_long_module_without_a_reason_is_found(tmp_path: pathlib.Path) -> None:
    package = tmp_path / "runtime"
    package.mkdir()
    body = "\n".join(f"x{i} = {i}" for i in range(LIMIT + 1))
    (package / "long.py").write_text(f'"""A long module."""\n{body}\n')
    (package / "reasoned.py").write_text(f'"""A long one.\n\n{REASON} a table."""\n{body}\n')
    (package / "short.py").write_text('"""Short."""\nx = 1\n')
    assert long_modules_without_a_reason(tmp_path) == ["runtime/long.py"]
