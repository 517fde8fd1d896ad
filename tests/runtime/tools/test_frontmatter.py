"""The asset frontmatter grammar (runtime/tools/frontmatter.py)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.tools.frontmatter import FrontmatterError, parse_frontmatter


@pytest.mark.parametrize(
    ("line", "value"),
    [
        ("k: plain text  ", "plain text"),
        ("k:no-space", "no-space"),
        ("k:", ""),
        ('k: "a \\"quoted\\" \\u00e9 # not a comment"', 'a "quoted" é # not a comment'),
        ("k: 'it''s'", "it's"),
        ("k: ''", ""),
        ("k: true", "true"),
        ("k: 5", "5"),
        ('k: ["git", "log", "-n", "{{count}}"]', ["git", "log", "-n", "{{count}}"]),
        ('k: {"a": [1, 2.5, null, true]}', {"a": [1, 2.5, None, True]}),
        ("k: plain # stays", "plain # stays"),
    ],
)
def test_frontmatter_values_follow_the_grammar(line: str, value: Any):
    assert parse_frontmatter(f"---\n{line}\n---\nbody") == ({"k": value}, "body")


def test_blank_lines_comments_and_crlf_line_endings_are_accepted():
    text = "---\r\n# a comment\r\n\r\n  # indented comment\r\na: 1\r\nb: [1,\r\n 2]\r\n---\r\nx"
    assert parse_frontmatter(text) == ({"a": "1", "b": [1, 2]}, "x")


def test_a_json_value_may_span_lines_and_the_next_key_follows_it():
    text = '---\nk: {\n  "a": 1,\n  "b": "}"\n}\nnext: v\n---\n'
    assert parse_frontmatter(text) == ({"k": {"a": 1, "b": "}"}, "next": "v"}, "")


def test_text_without_a_leading_fence_has_no_frontmatter():
    text = "# Title\n---\nk: v\n---\n"
    assert parse_frontmatter(text) == ({}, text)


@pytest.mark.parametrize(
    ("block", "detail"),
    [
        ("no colon here", "frontmatter line 2: expected 'key: value'"),
        ("  indented: x", "frontmatter line 2: expected 'key: value'"),
        ("- tool: x", "frontmatter line 2: expected 'key: value'"),
        ("a: 1\na: 2", "frontmatter line 3: the key 'a' appears twice"),
        ("k: [1, 2", "frontmatter line 2: the value of 'k' is not valid JSON"),
        ("k: [1] trailing", "frontmatter line 2: unexpected text after the JSON value of 'k'"),
        ("k: [NaN]", "frontmatter line 2: the value of 'k' is not valid JSON"),
        ('k: {"a": 1, "a": 2}', "frontmatter line 2: the value of 'k' is not valid JSON"),
        ('k: "open', "frontmatter line 2: the value of 'k' is not a valid JSON string"),
        ("k: 'it's'", "frontmatter line 2: a single-quoted value must end with '"),
        ("k: " + "[" * 40 + "]" * 40, "frontmatter line 2: the JSON value of 'k' nests over 32"),
    ],
)
def test_malformed_frontmatter_is_refused_with_its_line(block: str, detail: str):
    with pytest.raises(FrontmatterError) as exc:
        parse_frontmatter(f"---\n{block}\n---\n")
    assert exc.value.reason == "invalid_frontmatter"
    assert exc.value.detail.startswith(detail)


def test_a_frontmatter_without_its_closing_fence_is_unterminated():
    with pytest.raises(FrontmatterError) as exc:
        parse_frontmatter("---\nk: v\nbody")
    assert exc.value.reason == "unterminated_frontmatter"


@settings(max_examples=150)
@given(st.text(alphabet=st.characters(blacklist_categories=["Cs", "Cc", "Zl", "Zp"])))
def test_any_single_line_text_round_trips_as_a_single_quoted_value(text: str):
    quoted = "'" + text.replace("'", "''") + "'"
    assert parse_frontmatter(f"---\nk: {quoted}\n---\n")[0] == {"k": text}
