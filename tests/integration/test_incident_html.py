"""``roost incident --format html`` on a real incident, opened in a real headless Chromium.

One real daemon plays ``incident_scenario`` (a tool call, a denial, a failing tool, a
timeout, a ToolRunner killed mid-call) with hostile text in what the user, the model and
the tool wrote: markup that would fetch from a loopback server if it ever ran. The page is
rendered by the ``roost`` program twice, then again after a daemon restart, and loaded
in Chromium over the DevTools protocol, which reports every console message, exception,
log entry and network request.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.browser import Browser, Page, find_chromium
from tests.integration.adversarial_helpers import HitServer, run_daemon
from tests.integration.conftest import daemon_env, make_root
from tests.integration.incident_scenario import CONVERSATION, PROJECT, stage_incident

CHROMIUM = find_chromium()


def roost(home: str, *args: str) -> subprocess.CompletedProcess[bytes]:
    """``roost --home HOME ARGS`` as a program (bytes out)."""
    return subprocess.run(
        [sys.executable, "-m", "runtime.cli", "--home", home, *args],
        env={**os.environ, **daemon_env()},
        capture_output=True,
        timeout=120,
        check=True,
    )


@dataclass
class Rendered:
    """The incident's pages and JSON report, and the server its hostile text aims at."""

    first: bytes
    """``--format html`` on stdout."""
    written: str
    """What ``--format html -o FILE`` printed."""
    second: bytes
    """``--format html -o FILE``: the file."""
    after_restart: bytes
    """``--format html`` on stdout from a new daemon on the same home."""
    report: dict[str, Any]
    """``--format json``."""
    path: Path
    """The page on disk (the ``-o`` file)."""
    hostile: str
    """The markup planted in the user's, the model's and the tool's text."""
    server: HitServer
    """Counts any request the page might make."""


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rendered]:
    base = tmp_path_factory.mktemp("incident-html")
    root = make_root(base / "repo")
    server = HitServer()
    hostile = (
        f"</script><script>fetch('{server.url('/script')}')</script>"
        f'<img src={server.url("/img")}><a href="javascript:alert(1)">x</a>&amp;"\''
    )
    page = base / "incident.html"
    try:
        with run_daemon(base / "home") as daemon:
            with daemon.client(timeout_s=120) as client:
                stage_incident(client, root, hostile)
            args = ["incident", PROJECT, CONVERSATION, "--format"]
            first = roost(daemon.home, *args, "html").stdout
            written = roost(daemon.home, *args, "html", "-o", str(page)).stdout.decode()
            report = json.loads(roost(daemon.home, *args, "json").stdout)
        with run_daemon(base / "home") as daemon:
            after_restart = roost(daemon.home, *args, "html").stdout
        yield Rendered(
            first=first,
            written=written,
            second=page.read_bytes(),
            after_restart=after_restart,
            report=report,
            path=page,
            hostile=hostile,
            server=server,
        )
    finally:
        server.close()


@pytest.fixture(scope="module")
def page(rendered: Rendered) -> Iterator[Page]:
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (apt-get install chromium, or set ROOST_CHROMIUM)")
    with Browser(CHROMIUM) as browser:
        yield browser.open(rendered.path)


def test_the_same_journal_gives_the_same_bytes_across_renders_and_a_daemon_restart(
    rendered: Rendered,
) -> None:
    assert rendered.first.startswith(b"<!DOCTYPE html>")
    assert rendered.first == rendered.second == rendered.after_restart


def test_o_file_says_which_file_it_wrote(rendered: Rendered) -> None:
    size = len(rendered.second)
    assert rendered.written == f"wrote {rendered.path} (html, {size} bytes)\n"


TICKS = (
    "[...document.querySelectorAll('#waterfall .ticks span')]"
    ".filter(e => getComputedStyle(e).display !== 'none')"
    ".map(e => { const r = e.getBoundingClientRect(); return [r.left, r.right]; })"
)


@pytest.mark.parametrize("width", [800, 1280])
def test_the_time_axis_labels_never_touch(page: Page, width: int) -> None:
    page.resize(width)
    try:
        ticks = page.evaluate(TICKS)
        gaps = [b[0] - a[1] for a, b in itertools.pairwise(ticks)]
    finally:
        page.resize(1280)
    assert len(ticks) >= 3
    assert all(gap >= 8 for gap in gaps), (width, ticks)
    if width >= 1200:
        assert len(ticks) == 5


def test_the_incident_has_every_kind_of_trouble(rendered: Rendered) -> None:
    report = rendered.report
    kinds = {entry["type"] for key in ("denials", "failures", "timeouts") for entry in report[key]}
    assert {"policy.denied", "tool.failed", "tool.timeout"} <= kinds
    actors = [(e["type"], e["data"]["actor"]) for e in report["actor_events"]]
    assert actors == [("actor.crashed", "toolrunner"), ("actor.restarted", "toolrunner")]
    outcomes = [(c["outcome"], c["code"]) for c in report["tool_calls"]]
    assert outcomes == [
        ("completed", None),
        ("failed", "outside_root"),
        ("failed", "tool_error"),  # the file does not exist
        ("failed", "timeout"),
        ("failed", "tool_crashed"),
    ]


def test_the_page_loads_with_no_console_message_and_no_request_but_its_own(
    page: Page, rendered: Rendered
) -> None:
    assert page.requests == [page.url]
    assert (page.console, page.exceptions, page.log_entries) == ([], [], [])
    assert rendered.server.hits == []


def test_the_dom_holds_every_stage_of_the_report(page: Page, rendered: Rendered) -> None:
    stages = page.evaluate(
        "[...document.querySelectorAll('[data-stage]')]"
        ".map(e => [e.dataset.stage, Number(e.dataset.seq), e.dataset.outcome])"
    )
    assert len(stages) == len(rendered.report["stages"]) > 0
    assert [[s["stage"], s["start_seq"]] for s in rendered.report["stages"]] == [
        s[:2] for s in stages
    ]
    assert {"turn", "model_round", "policy", "tool_call"} <= {s[0] for s in stages}
    assert {"ok", "denial", "failure"} <= {s[2] for s in stages}


def test_denials_failures_timeouts_crashes_and_restarts_are_marked(
    page: Page, rendered: Rendered
) -> None:
    marks = page.evaluate(
        "[...document.querySelectorAll('#waterfall [data-mark]')]"
        ".map(e => [e.dataset.mark, Number(e.dataset.seq)])"
    )
    report = rendered.report
    expected = {
        *(("denial", e["seq"]) for e in report["denials"]),
        *(("timeout", e["seq"]) for e in report["timeouts"]),
        *(("failure", e["seq"]) for e in report["failures"]),
        *(
            ("crash" if e["type"] == "actor.crashed" else "restart", e["seq"])
            for e in report["actor_events"]
        ),
    }
    assert expected <= {tuple(m) for m in marks}
    in_tree = page.evaluate("document.querySelectorAll('#causal-tree [data-mark]').length")
    assert in_tree == len(marks)


def test_the_first_error_is_linked_from_the_top_and_highlighted(
    page: Page, rendered: Rendered
) -> None:
    seq = rendered.report["first_error"]["seq"]
    top = page.evaluate("document.querySelector('#first-error a').getAttribute('href')")
    assert top == f"#event-{seq}"
    highlighted = page.evaluate("[...document.querySelectorAll('.first-error')].map(e => e.id)")
    assert highlighted == [f"waterfall-{seq}", f"event-{seq}"]


def test_hostile_text_from_users_models_and_tools_renders_as_text(
    page: Page, rendered: Rendered
) -> None:
    counts = page.evaluate(
        "['script', 'img', 'iframe', 'object', 'a[href^=javascript]']"
        ".map(s => document.querySelectorAll(s).length)"
    )
    assert counts == [0, 0, 0, 0, 0]
    text = page.evaluate("document.body.innerText")
    asked = page.evaluate("document.querySelector('#asked').innerText")
    failures = page.evaluate("document.querySelector('#failures + ul').textContent")
    assert rendered.hostile in asked  # the user's message, verbatim
    # the model's text, JSON-quoted (so its quotes escaped) in the causal tree
    assert f"Opening them.{rendered.hostile[:60]}" in text
    assert json.dumps(f"docs/release-notes{rendered.hostile}.md") in failures  # the tool's error
    assert b"<script" not in rendered.first and b"<img" not in rendered.first
    assert rendered.server.hits == []


def test_the_browser_harness_sees_requests_console_messages_and_blocked_loads(
    tmp_path: Path,
) -> None:
    """The checks above can fail: a page that fetches or logs is caught."""
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (apt-get install chromium, or set ROOST_CHROMIUM)")
    server = HitServer()
    leaky, strict = tmp_path / "leaky.html", tmp_path / "strict.html"
    image = f'<img src="{server.url("/pixel")}">'
    leaky.write_text(f"<!DOCTYPE html><title>x</title>{image}<script>console.log('hi')</script>")
    csp = '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'">'
    strict.write_text(f"<!DOCTYPE html><title>x</title>{csp}{image}")
    try:
        with Browser(CHROMIUM) as browser:
            loose = browser.open(leaky)
            locked = browser.open(strict)
    finally:
        server.close()
    assert loose.requests == [loose.url, server.url("/pixel")]
    assert [c["args"][0]["value"] for c in loose.console] == ["hi"]
    # the strict page's image is announced, then blocked by its policy: logged, never sent
    assert locked.requests == [locked.url, server.url("/pixel")]
    assert any("Content Security Policy" in e["text"] for e in locked.log_entries)
    assert server.hits == ["/pixel"]  # the leaky page's only
