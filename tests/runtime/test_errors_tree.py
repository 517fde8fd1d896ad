"""The tree drawn in ``runtime/errors.py``'s docstring is the module's real class tree."""

from __future__ import annotations

import re

import runtime.errors
from runtime.errors import RoostError

_LINE = re.compile(r"^(?P<indent>[ │├└─]*)(?P<name>[A-Z]\w*)\s*(?P<code>[a-z_]+)?")


def drawn_tree(doc: str) -> dict[str, tuple[str | None, str | None]]:
    """The docstring's tree: class name → (its parent, the code drawn beside it)."""
    block = doc.split("::\n\n", 1)[1].split("\n\n", 1)[0]
    tree: dict[str, tuple[str | None, str | None]] = {}
    parents: list[str] = []
    for line in block.splitlines():
        match = _LINE.match(line.removeprefix("    "))
        assert match, f"not a line of the tree: {line!r}"
        depth = len(match["indent"]) // 4
        del parents[depth:]
        tree[match["name"]] = (parents[-1] if parents else None, match["code"])
        parents.append(match["name"])
    return tree


def real_tree() -> dict[str, tuple[str | None, str | None]]:
    """``runtime.errors``'s own classes: name → (its parent, its class-level code)."""
    tree: dict[str, tuple[str | None, str | None]] = {}
    for value in vars(runtime.errors).values():
        if not (isinstance(value, type) and issubclass(value, RoostError)):
            continue
        if value.__module__ != runtime.errors.__name__:
            continue
        parent = value.__mro__[1].__name__ if value is not RoostError else None
        code = vars(value).get("code")
        tree[value.__name__] = (parent, code if isinstance(code, str) else None)
    return tree


def test_the_docstring_draws_every_error_class_its_parent_and_its_code() -> None:
    assert runtime.errors.__doc__
    assert drawn_tree(runtime.errors.__doc__) == real_tree()


def test_a_drawn_class_that_does_not_exist_is_seen() -> None:
    doc = """The tree::

    RoostError                         internal_error
    ├── RequestError                   bad_request (a request)
    │   └── TimeoutError_              timeout
    └── ToolError                      (its own code)

After.
"""
    assert drawn_tree(doc) == {
        "RoostError": (None, "internal_error"),
        "RequestError": ("RoostError", "bad_request"),
        "TimeoutError_": ("RequestError", "timeout"),
        "ToolError": ("RoostError", None),
    }
    assert drawn_tree(doc) != real_tree()
