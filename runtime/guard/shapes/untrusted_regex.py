r"""Regular expressions from untrusted sources, matched in linear time with RE2.

Python's ``re`` backtracks: a pattern such as ``(?:a|a)+$`` or ``(a+)+$`` takes time
exponential in the text, and a match cannot be interrupted (it holds the GIL, so every
other thread of the process stalls with it). Patterns that come from a model (``fs.search``
with ``regex``, ``fs.list`` globs) or from a repository (an asset's JSON-Schema
``pattern``) are therefore compiled with RE2 (the ``google-re2`` binding): it runs in time
linear in the text, keeps its memory within :data:`MAX_MEM`, and releases the GIL while it
matches.

A pattern RE2 cannot run is refused, never handed to ``re``; :class:`UnsafePatternError`
carries one ``reason``:

- ``pattern_too_long``: more than :data:`MAX_PATTERN_CHARS` characters;
- ``unsupported_regex``: Python syntax that needs backtracking, which RE2 does not do:
  backreferences (``\1``, ``(?P=name)``), lookaround (``(?=``, ``(?!``, ``(?<=``,
  ``(?<!``), atomic groups (``(?>``), conditionals (``(?(1)``), possessive repeats
  (``a++``), ``\Z`` (RE2 spells it ``\z``);
- ``invalid_regex``: anything else RE2 cannot parse (``(unclosed``, ``[z-a]``, ``a**``);
- ``regex_too_complex``: RE2 accepts the syntax but the compiled program is larger than
  :data:`MAX_PROGRAM_SIZE` instructions or :data:`MAX_MEM` (a repeat count over 1000,
  ``\pL{200}``); the work per character of text grows with the program's size, so the
  size is what bounds the time of one match.

The syntax is RE2's (https://github.com/google/re2/wiki/Syntax): ``\d``, ``\w``, ``\s``
and ``\b`` are ASCII-only, and ``$`` matches only at the end of the text (the text here is
one line, or one argument value).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import re2

__all__ = [
    "MAX_MEM",
    "MAX_PATTERN_CHARS",
    "MAX_PROGRAM_SIZE",
    "UnsafePatternError",
    "UnsafeReason",
    "UntrustedRegex",
    "compile_untrusted",
]

MAX_PATTERN_CHARS = 1000
"""Longest accepted pattern, in characters."""

MAX_MEM = 8 << 20
"""Bytes one compiled pattern may use (RE2's ``max_mem``: its program and DFA cache)."""

MAX_PROGRAM_SIZE = 2000
"""Most RE2 program instructions a pattern may compile to (``x{1000}`` is about 1000)."""

UnsafeReason = Literal[
    "pattern_too_long", "invalid_regex", "unsupported_regex", "regex_too_complex"
]
"""Why a pattern is refused."""


class UnsafePatternError(ValueError):
    """A pattern that is not compiled; ``reason`` says why, ``str()`` says how to fix it."""

    def __init__(self, message: str, reason: UnsafeReason) -> None:
        super().__init__(message)
        self.reason: UnsafeReason = reason


class UntrustedRegex:
    """A compiled RE2 pattern: only yes/no questions (no groups, no positions)."""

    __slots__ = ("_compiled", "pattern")

    def __init__(self, pattern: str, compiled: Any) -> None:
        self.pattern = pattern
        """The pattern as given."""
        self._compiled = compiled

    def search(self, text: str) -> bool:
        """Whether the pattern matches anywhere in ``text``."""
        return self._compiled.search(_utf8(text)) is not None

    def fullmatch(self, text: str) -> bool:
        """Whether the pattern matches the whole of ``text``."""
        return self._compiled.fullmatch(_utf8(text)) is not None


def _utf8(text: str) -> bytes:
    """``text`` in UTF-8 for RE2, a lone surrogate passed through as its three bytes.

    JSON allows an escaped lone surrogate in a string; it must not fail the match.
    """
    return text.encode("utf-8", "surrogatepass")


def _options() -> Any:
    options = re2.Options()
    options.max_mem = MAX_MEM
    options.never_capture = True  # yes/no answers only: no submatch work
    options.log_errors = False  # RE2 would print every refused pattern on stderr
    return options


# RE2's errors for Python syntax that needs backtracking (RE2 names the fragment).
_BACKTRACKING = (
    "invalid perl operator: (?=",  # lookahead
    "invalid perl operator: (?!",
    "invalid perl operator: (?<=",  # lookbehind
    "invalid perl operator: (?<!",
    "invalid perl operator: (?P",  # (?P=name): (?P<name>...) itself is fine
    "invalid perl operator: (?>",  # atomic group
    "invalid perl operator: (?(",  # conditional on a group
    "invalid escape sequence: \\Z",
    *(f"invalid escape sequence: \\{digit}" for digit in "123456789"),  # backreference
)


def _needs_backtracking(detail: str) -> bool:
    possessive = detail.startswith("bad repetition operator: ") and detail.endswith("+")  # a++
    return detail.startswith(_BACKTRACKING) or possessive


def _too_large(detail: str) -> bool:
    return detail.startswith("pattern too large")


def _repeat_over_limit(detail: str) -> bool:
    """A repeat count over RE2's limit of 1000 (``x{1001}``), not a malformed one."""
    if not detail.startswith("invalid repetition size: "):
        return False
    bounds = detail.partition(": ")[2].strip("{}").split(",")
    return any(b.isdigit() and int(b) > 1000 for b in bounds)


_REASONS: tuple[tuple[Callable[[str], bool], UnsafeReason], ...] = (
    (_needs_backtracking, "unsupported_regex"),
    (_too_large, "regex_too_complex"),
    (_repeat_over_limit, "regex_too_complex"),
)
"""RE2's error texts, in order, and the refusal each names (any other: ``invalid_regex``)."""


def _reason(detail: str) -> UnsafeReason:
    """Name the refusal from RE2's error text (pinned binding: the texts are stable)."""
    for applies, reason in _REASONS:
        if applies(detail):
            return reason
    return "invalid_regex"


_MESSAGES: dict[UnsafeReason, str] = {
    "regex_too_complex": (
        "{what} is too complex to match in bounded time and memory ({detail}); "
        "use smaller repeat counts or a simpler pattern"
    ),
    "unsupported_regex": (
        "{what} uses a feature the linear-time matcher (RE2) does not have "
        "({detail}): backreferences, lookaround, atomic groups, possessive repeats "
        "and \\Z need backtracking, which can take exponential time; rewrite it "
        "without them (\\z for the end of the text) or search for plain text"
    ),
    "invalid_regex": "{what} is not a valid RE2 regular expression ({detail})",
}
"""What a refusal of RE2's says, per reason."""


def compile_untrusted(pattern: str, *, what: str = "the pattern") -> UntrustedRegex:
    """Compile ``pattern`` with RE2 or raise :class:`UnsafePatternError`.

    ``what`` names the pattern in messages (``the pattern``,
    ``'properties.tag.pattern'``).
    """
    if len(pattern) > MAX_PATTERN_CHARS:
        raise UnsafePatternError(
            f"{what} is {len(pattern)} characters; the limit is {MAX_PATTERN_CHARS}",
            "pattern_too_long",
        )
    try:
        pattern.encode("utf-8")
    except UnicodeEncodeError as e:
        raise UnsafePatternError(
            f"{what} is not valid Unicode text (a lone surrogate at {e.start})", "invalid_regex"
        ) from e
    try:
        # Not re2.compile: its module-level cache would keep up to 128 patterns alive,
        # each with up to MAX_MEM of DFA cache. This one lives as long as its caller.
        compiled = re2._Regexp(pattern, _options())
    except re2.error as e:
        raw = e.args[0] if e.args else b"rejected"
        detail = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
        reason = _reason(detail)
        message = _MESSAGES[reason].format(what=what, detail=detail)
        raise UnsafePatternError(message, reason) from e
    size = int(compiled._regexp.ProgramSize())
    if size > MAX_PROGRAM_SIZE:
        raise UnsafePatternError(
            f"{what} compiles to {size} instructions; the limit is {MAX_PROGRAM_SIZE} "
            "(the time per character grows with it); use smaller repeat counts or a "
            "simpler pattern",
            "regex_too_complex",
        )
    return UntrustedRegex(pattern, compiled)
