"""Scanning shell text past its quotes (runtime.guard.commands.shellquotes)."""

from __future__ import annotations

import pytest

from runtime.guard.commands.shellquotes import ansi_c, matching_brace, matching_paren


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("(a)b", 3),
        ("(a(b)c)d", 7),
        ("(a ')' b)c", 9),
        ('(a ")" b)c', 9),
        ('(a "\\")" b)c', 11),
        ("(a \\) b)c", 8),
        ("(a 'unclosed", 13),
        ('(a "unclosed \\', 15),
        ("(a b", 5),
        ("(a \\", 5),
        (")x(", 4),
    ],
)
def test_matching_paren_skips_quoted_text(text: str, expected: int) -> None:
    assert matching_paren(text, 0) == expected


def test_matching_brace() -> None:
    assert matching_brace("{a:-'}'}x", 0) == 8
    assert matching_brace("{a{b}c", 0) == 7


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("plain'", ("plain", 6)),
        ("a\\nb\\tc'", ("a\nb\tc", 8)),
        ("\\'x'", ("'x", 4)),
        ("\\\\\\\"\\?'", ('\\"?', 7)),
        ("\\e\\E\\a\\b\\f\\r\\v'", ("\x1b\x1b\a\b\f\r\v", 15)),
        ("\\163udo'", ("sudo", 8)),
        ("\\0'", ("\x00", 3)),
        ("\\1234'", ("S4", 6)),
        ("\\x73udo'", ("sudo", 8)),
        ("\\x7g'", ("\x07g", 5)),
        ("\\xg'", ("\\xg", 4)),
        ("\\u0073udo'", ("sudo", 10)),
        ("\\U0001F600'", ("\U0001f600", 11)),
        ("\\UFFFFFFFF'", ("\U0010ffff", 11)),
        ("\\u'", ("\\u", 3)),
        ("\\cA\\c'", ("\x01\x07", 7)),  # \c takes the quote as its character
        ("\\c", ("\\c", 3)),
        ("\\8\\q'", ("\\8\\q", 5)),
        ("end\\", ("end\\", 5)),
        ("no end", ("no end", 7)),
    ],
)
def test_ansi_c_decodes_escapes(body: str, expected: tuple[str, int]) -> None:
    assert ansi_c(body, 0) == expected
