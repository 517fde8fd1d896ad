"""Scanning shell text past its quotes: matching brackets, and ``$'…'`` strings decoded.

The scanners :mod:`runtime.guard.commands.shellwords`' lexer uses to find where a ``$(…)``,
``<(…)`` or ``${…}`` ends (quoted text and escapes inside do not count) and what a
``$'…'`` string says.
"""

from __future__ import annotations

import re
from collections.abc import Callable

__all__ = ["ansi_c", "matching_brace", "matching_paren"]

_SIMPLE_ESCAPES = {
    "a": "\a",
    "b": "\b",
    "e": "\x1b",
    "E": "\x1b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "\\": "\\",
    "'": "'",
    '"': '"',
    "?": "?",
}


_TOKEN = re.compile(r"\\[\s\S]?|'[^']*'?|\"(?:\\[\s\S]?|[^\"\\])*\"?|[\s\S]")
"""One unit of shell text: an escape, a quoted string (to its end if unclosed) or a character."""


def _matching(s: str, start: int, opening: str, closing: str) -> int:
    """Index just past the bracket matching ``s[start]``, skipping quoted text."""
    depth = 0
    for token in _TOKEN.finditer(s, start):
        if token.group() == opening:
            depth += 1
        elif token.group() == closing:
            depth -= 1
            if depth == 0:
                return token.end()
    return len(s) + 1


def matching_paren(s: str, start: int) -> int:
    """Index just past the ``)`` matching the ``(`` at ``start``."""
    return min(_matching(s, start, "(", ")"), len(s) + 1)


def matching_brace(s: str, start: int) -> int:
    """Index just past the ``}`` matching the ``{`` at ``start``."""
    return min(_matching(s, start, "{", "}"), len(s) + 1)


def _hex(digits: str) -> str:
    return chr(min(int(digits, 16), 0x10FFFF))


_ESCAPE = re.compile(
    r"\\(?:(?P<simple>[abeEfnrtv\\'\"?])|(?P<octal>[0-7]{1,3})|x(?P<hex2>[0-9A-Fa-f]{1,2})"
    r"|u(?P<hex4>[0-9A-Fa-f]{1,4})|U(?P<hex8>[0-9A-Fa-f]{1,8})|c(?P<control>[\s\S])"
    r"|(?P<unknown>[\s\S]))|(?P<plain>[\s\S])"
)
"""One unit of a ``$'…'`` body: an escape of each kind, or a plain character (a lone
trailing backslash included); an escape bash does not know is kept as written."""

_DECODE: dict[str, Callable[[str], str]] = {
    "simple": _SIMPLE_ESCAPES.__getitem__,
    "octal": lambda digits: chr(int(digits, 8)),
    "hex2": _hex,
    "hex4": _hex,
    "hex8": _hex,
    "control": lambda char: chr(ord(char) & 0x1F),
    "unknown": lambda char: "\\" + char,
    "plain": str,
}
"""How each kind of :data:`_ESCAPE` unit decodes."""


def ansi_c(s: str, j: int) -> tuple[str, int]:
    """Decode a ``$'…'`` string whose body starts at ``j``; return (text, index after)."""
    out: list[str] = []
    while j < len(s) and s[j] != "'":
        unit = _ESCAPE.match(s, j)
        assert unit is not None and unit.lastgroup is not None  # the last branch takes any char
        out.append(_DECODE[unit.lastgroup](unit.group(unit.lastgroup)))
        j = unit.end()
    return "".join(out), j + 1
