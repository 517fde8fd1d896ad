"""One text rule: a pattern, the lower-case literals that gate it, and how it replaces.

A rule runs only when the lowered text holds one of its triggers, so clean text costs one
``str.lower()`` and a few substring tests. Every pattern is linear (possessive quantifiers
or bounded repeats), and a rule that needs judgement matches generously and declines in its
``accept`` hook. The rules themselves are in :mod:`runtime.guard.secrets.patterns`.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable
from typing import Protocol

__all__ = [
    "REDACTED",
    "UNNOTED",
    "Accept",
    "FoldedRule",
    "Recorder",
    "Replaced",
    "Rule",
    "SecretKind",
    "SpanMap",
    "is_redaction_marker",
    "marker",
    "ordinary_word",
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


class Recorder(Protocol):
    """Told by each rule that replaced something in one ``redact_string`` call."""

    def note(self, kind: str, edits: list[tuple[int, int]], width: int) -> None:
        """One rule replaced each ``(start, end)`` of the current text by ``width`` characters."""


class Replaced:
    """What one :func:`~runtime.guard.secrets.patterns.redact_string` call replaced."""

    __slots__ = ("kinds", "spans")

    def __init__(self) -> None:
        self.kinds: list[str] = []
        """The kind of every replacement, in rule order."""
        self.spans = SpanMap()
        """Where the replacements lie."""

    def note(self, kind: str, edits: list[tuple[int, int]], width: int) -> None:
        """One rule replaced each ``(start, end)`` of the current text by ``width`` characters."""
        self.kinds.extend([kind] * len(edits))
        self.spans.record(edits, width)


class _Unnoted(Replaced):
    """Keeps nothing: for a caller that wants only the redacted text."""

    __slots__ = ()

    def note(self, kind: str, edits: list[tuple[int, int]], width: int) -> None:
        """Forget the replacements."""


UNNOTED: Recorder = _Unnoted()
"""The recorder that keeps nothing (the default)."""


class Rule:
    r"""One secret shape: a pattern, the literals that gate it, and what to replace.

    ``prefix``: text put before the text the pattern runs on (``"\n"``: a pattern that
    begins with ``\n`` finds "at the start of a line" as a literal the regex engine can
    search for). :class:`FoldedRule` runs its pattern on the lowered text.
    """

    __slots__ = (
        "accept",
        "kind",
        "marker",
        "pattern",
        "prefix",
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
        prefix: str = "",
        within_lines: bool = False,
    ) -> None:
        self.kind: str = kind.value
        """The :class:`SecretKind` value reported for a match."""
        self.marker = marker(self.kind)
        """What a match becomes."""
        self.pattern = re.compile(pattern)
        """The compiled, linear-time pattern."""
        self.triggers = triggers
        """Lower-case literals; the rule runs only if the lowered text contains one."""
        self.value_groups = value_groups
        """Groups holding the secret (the first that matched); empty: the whole match."""
        self.accept = accept
        """Declines a match when it returns false (the text is then left as it was)."""
        self.prefix = prefix
        """Put before the text the pattern runs on (match positions are shifted back)."""
        self.within_lines = within_lines
        """Every match lies on one line holding a trigger: in long text, scan only those."""

    def _subject(self, text: str, lowered: str) -> tuple[re.Pattern[str], str]:
        """The pattern to run and the text to run it on (before the prefix)."""
        return self.pattern, text

    def apply(self, text: str, lowered: str, replaced: Recorder = UNNOTED) -> str:
        """Replace every accepted match in ``text`` (``lowered`` is ``text.lower()``).

        Notes the replacements in ``replaced``; returns ``text`` itself when nothing was
        replaced.
        """
        pattern, subject = self._subject(text, lowered)
        subject = self.prefix + subject
        shift = len(self.prefix)
        replacement = self.marker
        edits: list[tuple[int, int]] = []
        pieces: list[str] = []
        done = 0
        windows = [(0, len(subject))]
        if self.within_lines and len(subject) > _WINDOWS_FROM and len(lowered) == len(text):
            windows = _trigger_lines(lowered, self.triggers, windows)
        for a, b in windows:
            for match in pattern.finditer(subject, a, b):
                start, end = match.span()
                for group in self.value_groups:
                    if match.start(group) >= 0:
                        start, end = match.span(group)
                        break
                start -= shift
                end -= shift
                if self.accept is not None and not self.accept(match, text[start:end]):
                    continue
                edits.append((start, end))
                pieces.append(text[done:start])
                pieces.append(replacement)
                done = end
        if not pieces:
            return text
        pieces.append(text[done:])
        replaced.note(self.kind, edits, len(replacement))
        return "".join(pieces)


class FoldedRule(Rule):
    """A rule whose pattern is written in lower case and runs on the lowered text.

    A literal prefix keeps it fast (case-insensitive patterns are several times slower);
    for a text whose length lowering changes, the case-insensitive form runs on the text.
    """

    __slots__ = ("fallback",)

    def __init__(
        self,
        kind: SecretKind,
        pattern: str,
        triggers: tuple[str, ...],
        *,
        value_groups: tuple[str, ...] = (),
        accept: Accept | None = None,
    ) -> None:
        super().__init__(kind, pattern, triggers, value_groups=value_groups, accept=accept)
        self.fallback = re.compile(pattern, re.IGNORECASE)
        """The case-insensitive form, for text whose length lowering changes."""

    def _subject(self, text: str, lowered: str) -> tuple[re.Pattern[str], str]:
        if len(lowered) == len(text):
            return self.pattern, lowered
        return self.fallback, text


_WINDOWS_FROM = 4096
_MAX_WINDOWS = 4096


def _trigger_lines(
    lowered: str, triggers: tuple[str, ...], whole: list[tuple[int, int]]
) -> list[tuple[int, int]]:
    """The lines of ``lowered`` holding a trigger, merged, as ``(start, end)`` ranges.

    ``whole`` (the one range of the whole text) when scanning them would not pay: few
    lines at all, more than :data:`_MAX_WINDOWS` of them, or together more than half the
    text.
    """
    if lowered.count("\n", 0, _WINDOWS_FROM) < 8:
        return whole  # long lines: a window would be most of the text
    found: list[tuple[int, int]] = []
    for trigger in triggers:
        at = lowered.find(trigger)
        while at >= 0:
            start = lowered.rfind("\n", 0, at) + 1
            end = lowered.find("\n", at)
            end = len(lowered) if end < 0 else end
            found.append((start, end))
            if len(found) > _MAX_WINDOWS:
                return whole
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
    return whole if covered * 2 > len(lowered) else merged


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


def ordinary_word(value: str) -> bool:
    """A word or a number (letters only, or digits only): it masks nothing but ordinary text."""
    return value.isalpha() or value.isdigit()
