"""Checks as data: a validator's rules in a table, read by one loop.

Each :class:`Check` is a test on named values and the texts of the error it gives (format
strings over the same values); :func:`check` raises the error of the first rule the values
break. A validator lists its rules in the order they are checked instead of writing one
``if`` per rule, so what is refused, and with which words, is read from one place.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["Check", "check"]


class Check:
    """A test (true when the values are wrong) and the texts of the error it gives."""

    __slots__ = ("broken", "texts")

    def __init__(self, broken: Callable[..., bool], *texts: str) -> None:
        self.broken = broken
        """Called with the checked values as keyword arguments."""
        self.texts = texts
        """Format strings over the same values: the error's arguments."""


def check(rules: Iterable[Check], fail: Callable[..., Exception], **values: Any) -> None:
    """Raise ``fail(*texts)`` for the first of ``rules`` that ``values`` break."""
    for rule in rules:
        if rule.broken(**values):
            raise fail(*(text.format(**values) for text in rule.texts))
