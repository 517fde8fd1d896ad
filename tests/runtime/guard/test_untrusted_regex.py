"""Untrusted patterns are matched by RE2 in linear time, or refused with a stable reason."""

from __future__ import annotations

import re

import pytest
import re2

from runtime.guard.shapes.untrusted_regex import (
    MAX_PATTERN_CHARS,
    MAX_PROGRAM_SIZE,
    UnsafePatternError,
    compile_untrusted,
)

LONG_AS = "a" * 100_000
"""A text on which a backtracking matcher would not finish for these patterns."""


@pytest.mark.parametrize(
    ("pattern", "text", "expected"),
    [
        (r"(?:a|a)+$", LONG_AS + "!", False),
        (r"(?:a|a)+$", LONG_AS, True),
        (r"(a+)+$", LONG_AS + "!", False),
        (r"(a|aa)+$", LONG_AS + "!", False),
        (r"(a|aa)+$", "b" + LONG_AS, True),
        (r"(.*a){20}", LONG_AS + "!", True),
        (r"(.*a){20}", "a" * 19 + "b" * 100_000, False),
        (r"^(\w+\s?)*$", "word " * 20_000 + "!", False),
    ],
)
def test_catastrophic_patterns_give_the_right_answer_on_long_texts(
    pattern: str, text: str, expected: bool
) -> None:
    assert compile_untrusted(pattern).search(text) is expected


@pytest.mark.parametrize(
    ("pattern", "reason"),
    [
        (r"(\w+)\1", "unsupported_regex"),
        (r"(?P<q>['\"]).*(?P=q)", "unsupported_regex"),
        (r"foo(?=bar)", "unsupported_regex"),
        (r"foo(?!bar)", "unsupported_regex"),
        (r"(?<=\$)\d+", "unsupported_regex"),
        (r"(?<!x)y", "unsupported_regex"),
        (r"a++", "unsupported_regex"),
        (r"a{1,2}+", "unsupported_regex"),
        (r"(?>a+)b", "unsupported_regex"),
        (r"(a)?(?(1)b|c)", "unsupported_regex"),
        (r"a**", "invalid_regex"),
        (r"(?x) a", "invalid_regex"),
        (r"end\Z", "unsupported_regex"),
        (r"(unclosed", "invalid_regex"),
        (r"[z-a]", "invalid_regex"),
        (r"a{2,1}", "invalid_regex"),
        (r"a{1001}", "regex_too_complex"),
        (r"\pL{200}", "regex_too_complex"),
        (r".{1000}", "regex_too_complex"),
        ("a" * (MAX_PATTERN_CHARS + 1), "pattern_too_long"),
    ],
)
def test_patterns_re2_cannot_run_are_refused_with_their_reason(pattern: str, reason: str) -> None:
    with pytest.raises(UnsafePatternError) as caught:
        compile_untrusted(pattern)
    assert caught.value.reason == reason


def test_a_backreference_is_refused_with_a_message_that_says_what_to_do() -> None:
    expected = (
        "the pattern uses a feature the linear-time matcher (RE2) does not have (invalid "
        "escape sequence: \\1): backreferences, lookaround, atomic groups, possessive repeats "
        "and \\Z need backtracking, which can take exponential time; rewrite it without them "
        "(\\z for the end of the text) or search for plain text"
    )
    with pytest.raises(UnsafePatternError, match=r"^" + re.escape(expected) + r"$"):
        compile_untrusted(r"(\w+)\1")


def test_the_program_size_limit_names_the_size_and_the_limit() -> None:
    with pytest.raises(UnsafePatternError, match=r"^the glob compiles to 8004 instructions; "):
        compile_untrusted(".{1000}", what="the glob")
    assert MAX_PROGRAM_SIZE == 2000


def test_an_invalid_pattern_says_so_with_re2s_words() -> None:
    with pytest.raises(
        UnsafePatternError,
        match=r"^the pattern is not a valid RE2 regular expression \(missing \): \(x\)$",
    ):
        compile_untrusted("(x")


def test_a_lone_surrogate_is_refused_in_a_pattern_and_searched_through_in_a_text() -> None:
    with pytest.raises(UnsafePatternError) as caught:
        compile_untrusted("a\ud800")
    assert (caught.value.reason, str(caught.value)) == (
        "invalid_regex",
        "the pattern is not valid Unicode text (a lone surrogate at 1)",
    )
    regex = compile_untrusted("^x+$")
    assert (regex.search("\ud800xx"), regex.search("xx"), regex.fullmatch("x\ud800")) == (
        False,
        True,
        False,
    )


def test_patterns_at_the_limits_are_accepted() -> None:
    assert compile_untrusted("x" * MAX_PATTERN_CHARS).search("x" * MAX_PATTERN_CHARS)
    assert compile_untrusted(r"\d{3}-\d{4}").search("call 555-1234 now")
    assert compile_untrusted(r"[[:alpha:]]+\z").fullmatch("abc")


def test_re2_syntax_is_the_one_used() -> None:
    # \d is ASCII in RE2 (Python's re would match the Arabic-Indic digit).
    assert compile_untrusted(r"^\d$").search("\u0663") is False
    assert compile_untrusted(r"^\pN$").search("\u0663") is True


def test_compiled_patterns_are_not_kept_in_the_bindings_cache() -> None:
    before = re2._Regexp._make.cache_info().currsize
    for i in range(20):
        compile_untrusted(f"cache-probe-{i}")
    assert re2._Regexp._make.cache_info().currsize == before
