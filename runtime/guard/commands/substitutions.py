"""What a trivial command substitution prints, so that ``$(echo sudo)`` is read as ``sudo``.

The lexer (:mod:`runtime.guard.commands.shellwords`) asks this hook for a substitution's
output; only programs whose output follows from their arguments alone are known
(:data:`_PRINTERS`), every other substitution stays unknown (``None``).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable

from runtime.guard.commands.shellwords import parse_segments

__all__ = ["evaluate"]


def evaluate(inner: str) -> str | None:
    """Compute what a trivial substitution prints (``echo``, ``printf``, ``which``)."""
    segments = parse_segments(inner)
    if len(segments) != 1 or segments[0].redirects:
        return None
    argv = [w.text for w in segments[0].words]
    name = posixpath.basename(argv[0]) if argv else ""
    return _PRINTERS.get(name, _prints_unknown)(argv[1:])


def _prints_unknown(args: list[str]) -> None:
    return None


def _echo(args: list[str]) -> str:
    while args and re.fullmatch(r"-[neE]+", args[0]):
        args = args[1:]
    return " ".join(args)


def _printf(args: list[str]) -> str | None:
    if not args:
        return None
    text = args[0]
    for arg in args[1:]:
        text = text.replace("%s", arg, 1)
    return text.replace("\\n", "\n")


def _last_name(args: list[str]) -> str | None:
    if not args:
        return None
    return args[-1]


_PRINTERS: dict[str, Callable[[list[str]], str | None]] = {
    "echo": _echo,
    "printf": _printf,
    "which": _last_name,
    "type": _last_name,
    "command": _last_name,
    "whereis": _last_name,
}
"""Programs whose output :func:`_evaluate` knows from their arguments alone."""
