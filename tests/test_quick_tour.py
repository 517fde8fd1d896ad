"""The README's quick tour runs word for word and prints what docs/quick-tour.md shows."""

from __future__ import annotations

import collections
import re
from pathlib import Path

from tests.docs_helpers import load_run_docs

ROOT = Path(__file__).resolve().parents[1]
REGENERATE = (
    ".venv/bin/python scripts/run_docs.py README.md --section 'A quick tour' "
    "--transcript docs/quick-tour.md"
)

_VOLATILE = [
    (re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z"), "<time>"),
    (re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"), "<uuid>"),
    (re.compile(r"\b(corr|call|c)-[0-9a-f]{6,}"), r"\1-<hex>"),
    (re.compile(r"/tmp/tmp\.[A-Za-z0-9]+"), "/tmp/<mktemp>"),
    (re.compile(r"[+-]?\d+(\.\d+)?"), "<n>"),
]


def shape(line: str) -> tuple[str, ...]:
    """A line's tokens with times, ids, numbers and temporary paths made anonymous.

    A cell cut with "…" keeps only that it was cut (where it is cut moves with the
    width of the numbers in it).
    """
    tokens = []
    for raw in line.split():
        if "…" in raw:
            tokens.append("…")
            continue
        token = raw
        for pattern, placeholder in _VOLATILE:
            token = pattern.sub(placeholder, token)
        tokens.append(token)
    return tuple(tokens)


def by_command(text: str) -> list[tuple[str, collections.Counter[tuple[str, ...]]]]:
    """``(command, output shapes)`` per ``$`` line; the order of output lines is free.

    Events that two actors append concurrently (a model's message, a policy's signal)
    may come in either order, so a command's output is compared as a multiset of lines.
    """
    groups: list[tuple[str, collections.Counter[tuple[str, ...]]]] = []
    for line in text.splitlines():
        if line.startswith("$ "):
            groups.append((line, collections.Counter()))
        elif groups:
            groups[-1][1][shape(line)] += 1
    return groups


def documented_transcript() -> str:
    page = (ROOT / "docs" / "quick-tour.md").read_text()
    match = re.search(r"```text\n(.*?)\n```", page, re.S)
    assert match is not None, "docs/quick-tour.md has no ```text block"
    return match.group(1)


def test_the_volatile_parts_of_a_line_do_not_count_in_its_shape() -> None:
    a = "10   2026-11-23T14:57:19.192Z  conversation  tool.completed  corr-31c57124813f0b7adf  {…"
    b = "9  2025-01-01T00:00:00.000Z conversation tool.completed corr-0000000000000000aaaa {xy…"
    assert shape(a) == shape(b)
    assert shape("daemon started (pid 1) in /tmp/tmp.AbC") == shape(
        "daemon started (pid 22) in /tmp/tmp.x"
    )
    assert shape("ok: 31 events checked, hash chain ok") != shape("NOT OK: 31 events checked")


def test_the_quick_tour_runs_word_for_word_with_the_documented_exit_statuses() -> None:
    run_docs = load_run_docs()
    run = run_docs.run_page(ROOT / "README.md", section="A quick tour", cwd=str(ROOT))
    assert len(run.commands) >= 15
    assert run.problems == []
    assert run.left_running == []
    actual = by_command(run.transcript())
    expected = by_command(documented_transcript())
    assert [command for command, _ in actual] == [command for command, _ in expected], (
        f"the README's tour and docs/quick-tour.md differ; regenerate: {REGENERATE}"
    )
    for (command, got), (_, want) in zip(actual, expected, strict=True):
        assert got == want, (
            f"{command}\n  only now: {sorted(got - want)}\n  only in the doc: "
            f"{sorted(want - got)}\nregenerate: {REGENERATE}"
        )
