"""Tables, key/value blocks, event lines and the progress bar."""

from __future__ import annotations

import argparse
import io

import pytest

from runtime.cli.format import (
    cell,
    dumps_json,
    event_line,
    kv_block,
    render,
    seal_lines,
    table,
)
from runtime.cli.progress import Progress


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_table_aligns_its_columns_under_the_headers() -> None:
    rows = [{"a": "x", "b": 1}, {"a": "longer", "b": None}]
    assert table(rows, [("a", "A"), ("b", "B")]) == "A       B\nx       1\nlonger  -"


def test_a_table_without_columns_uses_every_key_in_first_seen_order() -> None:
    assert table([{"b": 1}, {"a": True}]) == "B  A\n1  -\n-  yes"


def test_an_empty_table_says_so() -> None:
    assert table([], empty="(no projects)") == "(no projects)"
    assert table([{}, {}], empty="(nothing)") == "(nothing)"  # rows with no keys: no columns
    assert table([{"a": 1}], [], empty="(nothing)") == "(nothing)"


def test_a_long_cell_is_cut_with_an_ellipsis() -> None:
    assert cell("x" * 70) == "x" * 59 + "…"
    assert cell({"k": [1, 2]}) == '{"k":[1,2]}'
    assert cell("two\nlines") == "two lines"


def test_a_kv_block_aligns_keys_and_indents_nested_values() -> None:
    value = {
        "id": "p1",
        "health": {"status": "ok"},
        "tags": ["a", "b"],
        "none": [],
        "rows": [{"n": 1}],
    }
    assert kv_block(value) == (
        "id:     p1\nhealth:\n  status: ok\ntags:   a, b\nnone:   -\nrows:\n  N\n  1"
    )


def test_render_picks_a_shape_for_any_result() -> None:
    assert render("text") == "text"
    assert render([]) == "(none)"
    assert render([1, 2]) == "1\n2"
    assert render({"a": 1}) == "a: 1"


def test_an_event_line_shows_seq_time_conversation_type_and_data() -> None:
    event = {"seq": 12, "at": "T", "conversation_id": None, "type": "x.y", "data": {"a": 1}}
    assert event_line(event) == '    12  T  -  x.y  {"a":1}'


def test_json_output_is_indented() -> None:
    assert dumps_json({"a": [1]}) == '{\n  "a": [\n    1\n  ]\n}'
    assert dumps_json({"a": [1]}, pretty=False) == '{"a":[1]}'


def test_progress_draws_nothing_when_the_stream_is_not_a_terminal() -> None:
    stream = io.StringIO()
    with Progress("verifying", stream=stream) as progress:
        progress.update(3, total=10)
    assert stream.getvalue() == ""


ERASE_LINE = "\x1b[2K"


def test_progress_draws_a_bar_on_a_terminal_and_removes_it() -> None:
    stream = FakeTTY()
    progress = Progress("soak", total=4, stream=stream)
    progress.update(1, note="warming up")
    first = stream.getvalue()
    progress.close()
    assert ("soak" in first, "━" in first, "1/4" in first, "warming up" in first) == (
        True,
        True,
        True,
        True,
    )
    assert stream.getvalue().endswith(ERASE_LINE)
    assert progress.line().startswith("soak: 1/4 (25%) warming up ")


def test_ticking_shows_the_bar_until_the_block_ends() -> None:
    stream = FakeTTY()
    with Progress("verifying", stream=stream).ticking(interval_s=0.01):
        drawn = stream.getvalue()
    assert "verifying" in drawn
    assert stream.getvalue().endswith(ERASE_LINE)


def test_text_of_several_lines_in_a_block_keeps_its_lines() -> None:
    result = {"exit_code": 0, "stdout": "a\n  b\n\nc\n", "stderr": "warn\n", "empty": ""}
    assert kv_block({"result": result}) == (
        "result:\n"
        "  exit_code: 0\n"
        "  stdout:    |\n"
        "    a\n"
        "      b\n"
        "\n"
        "    c\n"
        "  stderr:    warn\n"
        "  empty:"
    )


def test_seal_lines_say_when_nothing_is_sealed_yet_and_name_unknown_problems() -> None:
    result = {
        "anchor_ok": False,
        "seal": {"anchor": "missing", "checkpoints": 0, "sealed_through": 0, "unsealed_events": 1},
        "anchor_problems": [
            {"kind": "checkpoint_missing", "seq": 9, "checkpoint_index": 3, "expected_index": 2,
             "after_seq": None},
            {"kind": "from_a_newer_daemon", "seq": 12},
        ],
    }  # fmt: skip
    assert seal_lines(result) == [
        "seals BROKEN: 0 checkpoints; nothing sealed yet; 1 unsealed event; anchor missing",
        "2 anchor problems:",
        "  - checkpoint_missing: checkpoint 3 (seq 9) comes where checkpoint 2 should: the "
        "checkpoints between are gone",
        "  - from_a_newer_daemon: seq=12",
    ]
    assert seal_lines({"ok": True}) == []  # a daemon that does not seal says nothing


def test_number_type_keeps_what_it_accepts_and_says_what_it_expected() -> None:
    from runtime.cli.format import number_type

    positive = number_type(float, lambda n: n > 0, "a positive number of seconds")
    assert positive("2.5") == 2.5
    for text in ("0", "-1", "nan", "soon"):
        with pytest.raises(
            argparse.ArgumentTypeError,
            match=rf"^expected a positive number of seconds, got '{text}'$",
        ):
            positive(text)
    count = number_type(int, lambda n: n >= 0, "a non-negative integer")
    assert count("0") == 0
    with pytest.raises(
        argparse.ArgumentTypeError, match=r"^expected a non-negative integer, got '1\.5'$"
    ):
        count("1.5")
