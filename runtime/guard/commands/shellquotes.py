"""Scanning shell text past its quotes: matching brackets, and ``$'…'`` strings decoded.

The scanners :mod:`runtime.guard.commands.shellwords`' lexer uses to find where a ``$(…)``,
``<(…)`` or ``${…}`` ends (quoted text and escapes inside do not count) and what a
``$'…'`` string says.
"""

from __future__ import annotations

import re

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


def _skip_quoted(s: str, j: int) -> int:
    """Index just past the quoted string or escape starting at ``s[j]``."""
    c = s[j]
    if c == "\\":
        return j + 2
    if c == "'":
        end = s.find("'", j + 1)
        return len(s) if end < 0 else end + 1
    k = j + 1
    while k < len(s) and s[k] != '"':
        k += 2 if s[k] == "\\" else 1
    return k + 1


def _matching(s: str, start: int, opening: str, closing: str) -> int:
    """Index just past the bracket matching ``s[start]``, skipping quoted text."""
    depth, j = 0, start
    while j < len(s):
        c = s[j]
        if c in "\\'\"":
            j = _skip_quoted(s, j)
            continue
        if c == opening:
            depth += 1
        elif c == closing:
            depth -= 1
            if depth == 0:
                return j + 1
        j += 1
    return len(s) + 1


def matching_paren(s: str, start: int) -> int:
    """Index just past the ``)`` matching the ``(`` at ``start``."""
    return min(_matching(s, start, "(", ")"), len(s) + 1)


def matching_brace(s: str, start: int) -> int:
    """Index just past the ``}`` matching the ``{`` at ``start``."""
    return min(_matching(s, start, "{", "}"), len(s) + 1)


def ansi_c(s: str, j: int) -> tuple[str, int]:
    """Decode a ``$'…'`` string whose body starts at ``j``; return (text, index after)."""
    out: list[str] = []
    while j < len(s) and s[j] != "'":
        c = s[j]
        if c != "\\" or j + 1 >= len(s):
            out.append(c)
            j += 1
            continue
        e = s[j + 1]
        if e in _SIMPLE_ESCAPES:
            out.append(_SIMPLE_ESCAPES[e])
            j += 2
        elif e in "01234567":
            digits = re.match(r"[0-7]{1,3}", s[j + 1 :])
            assert digits is not None
            out.append(chr(int(digits.group(), 8)))
            j += 1 + len(digits.group())
        elif e in "xuU":
            width = {"x": 2, "u": 4, "U": 8}[e]
            digits = re.match(f"[0-9A-Fa-f]{{1,{width}}}", s[j + 2 :])
            if digits:
                out.append(chr(min(int(digits.group(), 16), 0x10FFFF)))
                j += 2 + len(digits.group())
            else:
                out.append("\\" + e)
                j += 2
        elif e == "c" and j + 2 < len(s):
            out.append(chr(ord(s[j + 2]) & 0x1F))
            j += 3
        else:
            out.append("\\" + e)
            j += 2
    return "".join(out), j + 1
