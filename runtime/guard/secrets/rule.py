"""One text rule: a pattern, the lower-case literals that gate it, and how it replaces.

A rule runs only when the lowered text holds one of its triggers, so clean text costs one
``str.lower()`` and a few substring tests. Every pattern is linear (possessive quantifiers
or bounded repeats), and a rule that needs judgement matches generously and declines in its
``accept`` hook. The rules themselves are in :mod:`runtime.guard.secrets.patterns`.
"""

from __future__ import annotations

import enum
import itertools
import re
from collections.abc import Callable, Iterable

__all__ = [
    "REDACTED",
    "Accept",
    "Rule",
    "SecretKind",
    "SpanMap",
    "is_redaction_marker",
    "marker",
    "plausible_value",
]

REDACTED = "[REDACTED]"
"""What the value under a sensitive key becomes."""


class SecretKind(enum.StrEnum):
    """The stable names of what was found; they appear in findings and in markers."""

    OPENAI_KEY = "openai_key"
    ANTHROPIC_KEY = "anthropic_key"
    GITHUB_TOKEN = "github_token"
    AWS_ACCESS_KEY_ID = "aws_access_key_id"
    AWS_SECRET_ACCESS_KEY = "aws_secret_access_key"
    SLACK_TOKEN = "slack_token"
    SLACK_WEBHOOK = "slack_webhook"
    BEARER_TOKEN = "bearer_token"
    BASIC_AUTH = "basic_auth"
    PRIVATE_KEY = "private_key"
    JWT = "jwt"
    URL_CREDENTIALS = "url_credentials"
    COMMAND_CREDENTIALS = "command_credentials"
    SENSITIVE_KEY = "sensitive_key"
    SECRET_VALUE = "secret_value"
    DEPTH_LIMIT = "depth_limit"


def marker(kind: str) -> str:
    """Return the text that replaces a secret of ``kind`` inside a string."""
    return f"[REDACTED:{kind}]"


_MARKERS = frozenset({REDACTED} | {marker(kind.value) for kind in SecretKind})


def is_redaction_marker(text: str) -> bool:
    """Tell whether ``text`` is exactly a redaction marker (already redacted)."""
    return text in _MARKERS


Accept = Callable[[re.Match[str], str], bool]
"""A rule's second opinion on a match: ``(match, value) -> redact?``."""


class Rule:
    r"""One secret shape: a pattern, the literals that gate it, and what to replace.

    ``fold``: the pattern is written in lower case and runs on the lowered text (a literal
    prefix keeps it fast; case-insensitive patterns are several times slower).
    ``line_start``: the pattern begins with ``\n`` and runs on the text with a newline
    prepended, so "at the start of a line" is a literal the regex engine can search for.
    """

    __slots__ = (
        "accept",
        "fallback",
        "fold",
        "kind",
        "line_start",
        "pattern",
        "triggers",
        "value_groups",
        "within_lines",
    )

    def __init__(
        self,
        kind: SecretKind,
        pattern: str,
        triggers: tuple[str, ...],
        *,
        value_groups: tuple[str, ...] = (),
        accept: Accept | None = None,
        fold: bool = False,
        line_start: bool = False,
        within_lines: bool = False,
    ) -> None:
        self.kind: str = kind.value
        """The :class:`SecretKind` value reported for a match."""
        self.pattern = re.compile(pattern)
        """The compiled, linear-time pattern."""
        self.fallback = re.compile(pattern, re.IGNORECASE) if fold else self.pattern
        """For ``fold`` rules: the case-insensitive form, for text whose length lowering changes."""
        self.triggers = triggers
        """Lower-case literals; the rule runs only if the lowered text contains one."""
        self.value_groups = value_groups
        """Groups holding the secret (the first that matched); empty: the whole match."""
        self.accept = accept
        """Declines a match when it returns false (the text is then left as it was)."""
        self.fold = fold
        """Match on the lowered text."""
        self.line_start = line_start
        """Match on the text with a newline prepended."""
        self.within_lines = within_lines
        """Every match lies on one line holding a trigger: in long text, scan only those."""

    def apply(
        self, text: str, lowered: str, kinds: list[str] | None, spans: SpanMap | None = None
    ) -> str:
        """Replace every accepted match in ``text`` (``lowered`` is ``text.lower()``).

        Appends the kind to ``kinds`` for each replacement, and records the replaced
        ranges in ``spans``; returns ``text`` itself when nothing was replaced.
        """
        pattern = self.pattern
        subject = text
        if self.fold:
            if len(lowered) == len(text):
                subject = lowered
            else:
                pattern = self.fallback
        shift = 0
        if self.line_start:
            subject = "\n" + subject
            shift = 1
        replacement = marker(self.kind)
        edits: list[tuple[int, int]] | None = [] if spans is not None else None
        pieces: list[str] = []
        done = 0
        windows = None
        if self.within_lines and len(subject) > _WINDOWS_FROM and len(lowered) == len(text):
            windows = _trigger_lines(lowered, self.triggers)
        if windows is None:
            matches: Iterable[re.Match[str]] = pattern.finditer(subject)
        else:
            matches = itertools.chain.from_iterable(
                pattern.finditer(subject, a, b) for a, b in windows
            )
        for match in matches:
            start, end = match.span()
            for group in self.value_groups:
                if match.start(group) >= 0:
                    start, end = match.span(group)
                    break
            start -= shift
            end -= shift
            if self.accept is not None and not self.accept(match, text[start:end]):
                continue
            if kinds is not None:
                kinds.append(self.kind)
            if edits is not None:
                edits.append((start, end))
            pieces.append(text[done:start])
            pieces.append(replacement)
            done = end
        if not pieces:
            return text
        pieces.append(text[done:])
        if spans is not None and edits:
            spans.record(edits, len(replacement))
        return "".join(pieces)


_WINDOWS_FROM = 4096
_MAX_WINDOWS = 4096


def _trigger_lines(lowered: str, triggers: tuple[str, ...]) -> list[tuple[int, int]] | None:
    """The lines of ``lowered`` holding a trigger, merged, as ``(start, end)`` ranges.

    None when scanning them would not pay: few lines at all, more than
    :data:`_MAX_WINDOWS` of them, or together more than half the text.
    """
    if lowered.count("\n", 0, _WINDOWS_FROM) < 8:
        return None  # long lines: a window would be most of the text
    found: list[tuple[int, int]] = []
    for trigger in triggers:
        at = lowered.find(trigger)
        while at >= 0:
            start = lowered.rfind("\n", 0, at) + 1
            end = lowered.find("\n", at)
            end = len(lowered) if end < 0 else end
            found.append((start, end))
            if len(found) > _MAX_WINDOWS:
                return None
            at = lowered.find(trigger, end)
    found.sort()
    merged: list[tuple[int, int]] = []
    covered = 0
    for start, end in found:
        if merged and start <= merged[-1][1] + 1:
            last = merged[-1]
            covered += max(0, end - last[1])
            merged[-1] = (last[0], max(last[1], end))
        else:
            merged.append((start, end))
            covered += end - start
    return None if covered * 2 > len(lowered) else merged


_ALNUM_CHAR = re.compile(r"[^\W_]")


def plausible_value(value: str) -> bool:
    """Tell a value worth hiding from nothing: empty, a number, ``$VAR``, a marker, ``...``.

    A value without any letter or digit (``...``, ``…``, ``***``) is a placeholder.
    """
    bare = value.strip().strip("\"'").strip()
    return (
        bool(bare)
        and not bare.isdigit()
        and bare[0] != "$"
        and "[REDACTED" not in bare
        and _ALNUM_CHAR.search(bare) is not None
    )


class SpanMap:
    """Where the replacements of one :func:`~runtime.guard.secrets.patterns.redact_string` call lie.

    ``spans`` is a sorted list of disjoint ``[orig_start, orig_end, cur_start, cur_end]``:
    ``original[orig_start:orig_end]`` became ``redacted[cur_start:cur_end]`` (a marker, or
    markers and the text between them when a later rule replaced text around an earlier
    marker). Outside the spans both texts are the same characters, shifted. Used to cut a
    redacted stream where its chunks were cut
    (:func:`runtime.guard.secrets.redaction.redact_stream`).
    """

    __slots__ = ("spans",)

    def __init__(self) -> None:
        self.spans: list[list[int]] = []
        """``[orig_start, orig_end, cur_start, cur_end]`` of every replaced range, in order."""

    def record(self, edits: list[tuple[int, int]], width: int) -> None:
        """One rule replaced each ``(start, end)`` of the current text by ``width`` characters."""
        old, new = self.spans, []
        i = 0
        drift = 0  # current - original, for positions after old[:i]
        shift = 0  # after these edits - before them, for positions after the edits so far
        for a, b in edits:
            while i < len(old) and old[i][3] <= a:
                o0, o1, c0, c1 = old[i]
                new.append([o0, o1, c0 + shift, c1 + shift])
                drift += (c1 - c0) - (o1 - o0)
                i += 1
            lo, orig_lo = a, a - drift
            hi, orig_hi = b, -1
            while i < len(old) and old[i][2] < b:  # an earlier span the edit overlaps
                o0, o1, c0, c1 = old[i]
                if c0 < lo:
                    lo, orig_lo = c0, o0
                if c1 > hi:
                    hi, orig_hi = c1, o1
                drift += (c1 - c0) - (o1 - o0)
                i += 1
            if orig_hi < 0:
                orig_hi = b - drift
            start = lo + shift
            new.append([orig_lo, orig_hi, start, start + (a - lo) + width + (hi - b)])
            shift += width - (b - a)
        for o0, o1, c0, c1 in old[i:]:
            new.append([o0, o1, c0 + shift, c1 + shift])
        self.spans = new
