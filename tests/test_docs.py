"""The docs check: every runnable shell example of README.md and docs/*.md does what it shows.

Runnable blocks are fenced ``console`` blocks (the convention: docs/cli.md, "Examples
that run"); ``scripts/run_docs.py`` runs each page in one bash against real daemons on
temporary homes and checks every command's exit status and error line. The README's
quick tour is run by ``tests/test_quick_tour.py``, which also compares its output.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs_helpers import load_run_docs

ROOT = Path(__file__).resolve().parents[1]
TOUR = "A quick tour"
PAGES = sorted(
    [ROOT / "README.md", *(ROOT / "docs").glob("*.md")], key=lambda p: p.relative_to(ROOT)
)
run_docs = load_run_docs()


def _blocks(page: Path) -> list[list[object]]:
    skip = TOUR if page.name == "README.md" else None
    blocks: list[list[object]] = run_docs.runnable_blocks(page.read_text(), skip_section=skip)
    return blocks


RUNNABLE = [page for page in PAGES if _blocks(page)]


def test_the_pages_with_runnable_examples_are_found() -> None:
    names = {str(page.relative_to(ROOT)) for page in RUNNABLE}
    assert {"docs/assets.md", "docs/cli.md", "docs/incidents.md", "docs/models.md"} <= names
    assert run_docs.runnable_blocks((ROOT / "README.md").read_text(), TOUR)


def test_a_console_block_is_split_into_commands_with_continuations_and_here_documents() -> None:
    page = "\n".join(
        [
            "```console",
            "$ printf 'a\\n' \\",
            "    > out.txt",
            "$ cat > f <<'EOF'",
            "$ not a command",
            "EOF",
            "$ roost daemon status",
            "roost: daemon_unreachable: none",
            "```",
            "```sh",
            "$ never run",
            "```",
        ]
    )
    [commands] = run_docs.runnable_blocks(page)
    assert [c.text for c in commands] == [
        "printf 'a\\n' \\\n    > out.txt",
        "cat > f <<'EOF'\n$ not a command\nEOF",
        "roost daemon status",
    ]
    assert [(c.expected_error, c.expected_status) for c in commands] == [
        (None, 0),
        (None, 0),
        ("daemon_unreachable", 3),
    ]


def test_a_command_that_does_not_do_what_the_page_shows_is_reported(tmp_path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "```console\n$ true\n$ false\n$ roost project list\nroost: project_not_found: x\n```\n"
    )
    run = run_docs.run_page(page)
    assert [r.status for r in run.results] == [0, 1, 3]
    assert [r.problem for r in run.results] == [
        None,
        "exit status 1, the page expects 0",
        "exit status 3, the page expects 1",
    ]


def test_a_daemon_a_page_leaves_running_is_reported_and_stopped(tmp_path) -> None:
    page = tmp_path / "page.md"
    page.write_text("```console\n$ export ROOST_HOME=$(mktemp -d)\n$ roost daemon start\n```\n")
    run = run_docs.run_page(page)
    assert run.problems == []
    assert len(run.left_running) == 1
    assert run.left_running[0].startswith("<sandbox>/tmp/tmp.")


@pytest.mark.parametrize("page", RUNNABLE, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_runnable_command_of_the_page_does_what_the_page_shows(page: Path) -> None:
    skip = TOUR if page.name == "README.md" else None
    run = run_docs.run_page(page, skip_section=skip)
    assert run.commands
    assert run.problems == [], "\n".join(run.problems)
    assert run.left_running == []
