"""The README's quick tour runs word for word and prints what docs/quick-tour.md shows."""

from __future__ import annotations

import collections
import re
import subprocess
import sys
from pathlib import Path

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
    width of the numbers in it). The seal line of ``verify`` says only that the seals are
    ok: whether the journal's 5-second timer sealed the project before the tour reached
    ``verify`` depends on how busy the machine is.
    """
    if line.startswith("seals ok: "):
        return ("seals", "ok:", "<seal state>")
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


def transcript_of(page: Path) -> str:
    match = re.search(r"```text\n(.*?)\n```", page.read_text(), re.S)
    assert match is not None, f"{page} has no ```text block"
    return match.group(1)


def test_the_volatile_parts_of_a_line_do_not_count_in_its_shape() -> None:
    a = "10   2026-11-23T14:57:19.192Z  conversation  tool.completed  corr-31c57124813f0b7adf  {…"
    b = "9  2025-01-01T00:00:00.000Z conversation tool.completed corr-0000000000000000aaaa {xy…"
    assert shape(a) == shape(b)
    assert shape("daemon started (pid 1) in /tmp/tmp.AbC") == shape(
        "daemon started (pid 22) in /tmp/tmp.x"
    )
    assert shape("ok: 31 events checked, hash chain ok") != shape("NOT OK: 31 events checked")
    assert shape("seals ok: 0 checkpoints; nothing sealed yet; 31 unsealed events") == shape(
        "seals ok: 1 checkpoints; sealed through event 9 (seq 9) at T; 2 unsealed events after it"
    )
    assert shape("seals BROKEN: 1 checkpoints") != shape("seals ok: 1 checkpoints")


def test_the_order_of_a_commands_output_lines_is_free_but_not_their_number() -> None:
    one = by_command("$ roost timeline p1 c1\nA 1\nB 2\n$ roost verify p1\nok")
    swapped = by_command("$ roost timeline p1 c1\nB 3\nA 4\n$ roost verify p1\nok")
    fewer = by_command("$ roost timeline p1 c1\nA 1\n$ roost verify p1\nok")
    assert one == swapped
    assert one != fewer


def test_the_quick_tour_runs_word_for_word_and_prints_what_docs_quick_tour_shows(
    tmp_path: Path,
) -> None:
    written = tmp_path / "quick-tour.md"
    done = subprocess.run(
        [
            sys.executable, str(ROOT / "scripts" / "run_docs.py"), "README.md",
            "--section", "A quick tour", "--transcript", str(written),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr
    assert re.search(r"^-- (\d+) of \1 commands run in [\d.]+ s; ok$", done.stderr, re.M)
    actual = by_command(transcript_of(written))
    expected = by_command(transcript_of(ROOT / "docs" / "quick-tour.md"))
    assert len(actual) >= 15
    assert [command for command, _ in actual] == [command for command, _ in expected], (
        f"the README's tour and docs/quick-tour.md differ; regenerate: {REGENERATE}"
    )
    for (command, got), (_, want) in zip(actual, expected, strict=True):
        assert got == want, (
            f"{command}\n  only now: {sorted(got - want)}\n  only in the doc: "
            f"{sorted(want - got)}\nregenerate: {REGENERATE}"
        )
