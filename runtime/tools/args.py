"""A tool's arguments read by kind: each kind a test and the words of its refusal.

:func:`read_arg` reads one argument (its default when absent) and refuses a value not of
its kind with ``invalid_tool_args`` (``kind: invalid_type``), naming the argument.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from runtime.errors import ToolError

__all__ = [
    "BOOLEAN",
    "NON_NEGATIVE",
    "OPTIONAL_STRING",
    "POSITIVE",
    "STRING",
    "ArgKind",
    "bad_arg",
    "integer",
    "read_arg",
]


def bad_arg(name: str, expected: str, value: object) -> ToolError:
    """``invalid_tool_args``: argument ``name`` is not ``expected``."""
    return ToolError(
        "invalid_tool_args",
        f"argument {name!r} must be {expected}, got {value!r}",
        kind="invalid_type",
        arg=name,
    )


T = TypeVar("T")


@dataclass(frozen=True)
class ArgKind(Generic[T]):
    """What an argument must be: a test of its value, and its words for a refusal."""

    valid: Callable[[Any], bool]
    """Whether a value is one."""
    expected: str
    """What it must be, in words (``a string``)."""


STRING: ArgKind[str] = ArgKind(lambda v: isinstance(v, str), "a string")
"""A string."""
BOOLEAN: ArgKind[bool] = ArgKind(lambda v: isinstance(v, bool), "a boolean")
"""``true`` or ``false``."""
OPTIONAL_STRING: ArgKind[str | None] = ArgKind(
    lambda v: v is None or isinstance(v, str), "a string"
)
"""A string, or null (absent)."""


def integer(minimum: int) -> ArgKind[int]:
    """An integer (not a boolean) of at least ``minimum``."""

    def valid(v: Any) -> bool:
        return not isinstance(v, bool) and isinstance(v, int) and v >= minimum

    return ArgKind(valid, f"an integer >= {minimum}")


NON_NEGATIVE = integer(0)
"""An integer >= 0 (an offset)."""
POSITIVE = integer(1)
"""An integer >= 1 (a count)."""


def read_arg(args: Mapping[str, Any], name: str, kind: ArgKind[T], default: T | None = None) -> T:
    """The argument ``name`` (``default`` when absent); ``invalid_tool_args`` if not ``kind``."""
    value = args.get(name, default)
    if not kind.valid(value):
        raise bad_arg(name, kind.expected, value)
    checked: T = value
    return checked
