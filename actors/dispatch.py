"""Each actor's dispatch: a message type -> method table, built once per class.

A shell's method that serves a type of message says so with :func:`handles`; the class's
table is collected when the class is made (``RoostActor.__init_subclass__``, and
``AgentShell``'s for the inputs its core takes), and a message goes to the method its
exact type's row names. A subclass inherits its bases' rows and replaces one by marking a
method of the same name. No isinstance chain exists to drift from the methods (pykka: an
actor's methods are its messages); the house pattern is ``runtime.wire.dispatch``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["Handler", "handler_table", "handles"]

Handler = Callable[[Any, Any, Any], None]
"""A row's method, unbound: ``(actor, message, sender)``."""

_Method = TypeVar("_Method", bound=Callable[..., Any])


def _mark(table: str) -> str:
    """The attribute a marked method holds the types it serves in ``table`` under."""
    return f"roost_{table}_of"


def handles(*types: type, table: str = "handle") -> Callable[[_Method], _Method]:
    """Mark a method as the one serving messages of ``types`` in its class's ``table``."""

    def mark(method: _Method) -> _Method:
        setattr(method, _mark(table), types)
        return method

    return mark


def handler_table(cls: type, table: str = "handle") -> dict[type, Handler]:
    """Each message type the methods of ``cls`` serve in ``table``, and the method.

    Raises ``TypeError`` (when the class is made, never on a message) when two methods
    claim one type.
    """
    members = [getattr(cls, name) for name in dir(cls)]
    rows = [(kind, member) for member in members for kind in getattr(member, _mark(table), ())]
    found = dict(rows)
    if len(found) != len(rows):
        claimed = sorted(kind.__name__ for kind, _ in rows)
        raise TypeError(f"{cls.__name__}: a message type has two handlers among {claimed}")
    return found
