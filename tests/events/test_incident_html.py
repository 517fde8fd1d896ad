"""Tests for events.incident_html: the incident report as one self-contained HTML page."""

from __future__ import annotations

import random
from html.parser import HTMLParser
from typing import Any

import pytest

from events import catalog as ev
from events.incident_html import CONTENT_SECURITY_POLICY, render_incident_html
from events.incidents import incident_report
from tests.events.test_incidents import changes_journal
from tests.events.test_projections import (
    Journal,
    cancel_journal,
    incident_journal,
    started_project,
)

HOSTILE = (
    "</script><script>fetch('http://198.51.100.7/x')</script>"
    '<img src=http://198.51.100.7/i.png onerror="alert(1)"><a href="javascript:alert(2)">x</a>'
    "<style>body{background:url(http://198.51.100.7/s)}</style>&amp;\"'"
)
"""Markup a model, a user or a tool could write, aimed at a reader's browser."""

ALLOWED_TAGS = {
    *("html", "head", "meta", "title", "style", "body", "main", "header", "footer"),
    *("h1", "h2", "h3", "p", "ul", "li", "span", "b", "section", "div", "a", "code"),
    *("details", "summary", "pre", "table", "thead", "tbody", "tr", "th", "td"),
}


class Page(HTMLParser):
    """The parsed page: its tags with their attributes, and its text."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.text: list[str] = []
        self.feed(text)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, {k: v or "" for k, v in attrs}))

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def with_attr(self, name: str) -> list[dict[str, str]]:
        return [attrs for _, attrs in self.tags if name in attrs]


def hostile_journal() -> Journal:
    """A turn whose user, model and tool all wrote ``HOSTILE``; the ToolRunner restarts."""
    j = started_project()
    msg = j.add(ev.UserMessage(content=f"look {HOSTILE}"), after_ms=5)
    r1 = j.add(ev.LlmStarted(provider="deterministic", round=1), cause=msg, after_ms=2)
    j.add(ev.AssistantMessage(content=HOSTILE), cause=r1, after_ms=30)
    req = j.add(
        ev.ToolRequested(call_id="call-9", name="command.run", args={"command": HOSTILE}),
        cause=r1,
    )
    allowed = j.add(ev.PolicyAllowed(tool="command.run", call_id="call-9"), cause=req, after_ms=2)
    started = j.add(ev.ToolStarted(call_id="call-9", name="command.run"), cause=allowed)
    crash = j.add(
        ev.ActorCrashed(actor="toolrunner", reason=HOSTILE, restart_count=1),
        conversation_id=None,
        after_ms=400,
    )
    j.add(
        ev.ActorRestarted(actor="toolrunner", reason="restarted", restart_count=1),
        conversation_id=None,
        cause=crash,
        after_ms=60,
    )
    failed = j.add(
        ev.ToolFailed(
            call_id="call-9",
            name="command.run",
            reason={"code": "tool_crashed", "message": f"stderr: {HOSTILE}\x00\x1b[31m"},
        ),
        cause=started,
        after_ms=3,
    )
    r2 = j.add(ev.LlmStarted(provider="deterministic", round=2), cause=failed, after_ms=2)
    j.add(ev.AssistantMessage(content="Tool command.run failed: tool_crashed"), cause=r2)
    j.add(ev.LlmCompleted(finish_reason="stop", tool_call_count=1), cause=r2, after_ms=4)
    return j


@pytest.fixture
def hostile() -> tuple[dict[str, Any], str]:
    report = incident_report(hostile_journal().events, "p1", "c1")
    return report, render_incident_html(report)


def test_every_string_from_the_journal_renders_as_text(hostile: tuple[dict[str, Any], str]) -> None:
    _, text = hostile
    page = Page(text)
    assert {tag for tag, _ in page.tags} <= ALLOWED_TAGS
    assert [tag for tag, _ in page.tags].count("style") == 1  # the page's own, in the head
    assert all(attrs["href"].startswith("#") for attrs in page.with_attr("href"))
    assert [a for _, attrs in page.tags for a in attrs if a.startswith("on") or a == "src"] == []
    shown = "".join(page.text)
    assert f"look {HOSTILE}" in shown  # what was asked, verbatim
    assert HOSTILE.replace('"', '\\"') in shown  # the tool's error, as pretty JSON
    assert "<script" not in text and "<img" not in text


def test_every_link_points_into_the_page(hostile: tuple[dict[str, Any], str]) -> None:
    for report in (hostile[0], incident_report(incident_journal().events, "p1", "c1")):
        page = Page(render_incident_html(report))
        ids = {attrs["id"] for attrs in page.with_attr("id")}
        links = {attrs["href"] for attrs in page.with_attr("href")}
        assert {"#denials", "#failures", "#timeouts", "#event-9"} & links
        assert {link.removeprefix("#") for link in links} <= ids


def test_control_characters_are_replaced(hostile: tuple[dict[str, Any], str]) -> None:
    _, text = hostile
    assert "\x00" not in text and "\x1b" not in text
    assert "\\u0000" in text  # inside the JSON of the failure's data, escaped by JSON itself


def test_the_page_forbids_loading_anything() -> None:
    text = render_incident_html(incident_report(incident_journal().events, "p1", "c1"))
    page = Page(text)
    csp = [a for tag, a in page.tags if tag == "meta" and "http-equiv" in a]
    assert csp == [{"http-equiv": "Content-Security-Policy", "content": CONTENT_SECURITY_POLICY}]
    assert CONTENT_SECURITY_POLICY.startswith("default-src 'none'; style-src 'unsafe-inline';")
    assert "http:" not in text and "https:" not in text and "//" not in text.replace("://", "")
    assert "<script" not in text and "@import" not in text and "url(" not in text


def test_the_first_error_is_linked_from_the_top_and_highlighted() -> None:
    report = incident_report(incident_journal().events, "p1", "c1")
    page = Page(render_incident_html(report))
    first = report["first_error"]
    assert (first["seq"], first["type"]) == (9, "policy.denied")
    top = next(attrs for tag, attrs in page.tags if attrs.get("id") == "first-error")
    assert top["data-seq"] == "9"
    start = page.tags.index(("section", top))
    link = next(attrs["href"] for tag, attrs in page.tags[start:] if tag == "a")
    assert link == "#event-9"
    highlighted = [a["id"] for _, a in page.tags if "first-error" in a.get("class", "").split()]
    assert highlighted == ["waterfall-9", "event-9"]


def test_denials_failures_timeouts_crashes_and_restarts_are_marked() -> None:
    def marks(journal: Journal) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
        page = Page(render_incident_html(incident_report(journal.events, "p1", "c1")))
        marked = [
            (a["id"].split("-")[0], a["data-mark"], a["data-seq"])
            for a in page.with_attr("data-mark")
        ]
        return (
            [(mark, seq) for where, mark, seq in marked if where == "waterfall"],
            # the tree is in causal order: sorted by seq to compare
            sorted(((m, s) for w, m, s in marked if w == "event"), key=lambda m: int(m[1])),
        )

    waterfall, tree = marks(hostile_journal())
    assert waterfall == tree == [("crash", "9"), ("restart", "10"), ("failure", "11")]
    waterfall, tree = marks(incident_journal())
    expected = [("denial", "9"), ("security", "10"), ("failure", "11"), ("timeout", "13")]
    assert waterfall == [*expected, ("failure", "15")]
    assert tree == waterfall


def test_every_stage_is_a_bar_from_its_offset_for_its_latency() -> None:
    report = incident_report(incident_journal().events, "p1", "c1")
    page = Page(render_incident_html(report))
    rows = page.with_attr("data-stage")
    assert [(r["data-stage"], int(r["data-seq"])) for r in rows] == [
        (s["stage"], s["start_seq"]) for s in report["stages"]
    ]
    # the span is 30094 ms (the turn ends last); the turn starts at +10 ms for 30084 ms
    bars = [attrs["style"] for tag, attrs in page.tags if attrs.get("class", "") == "bar"]
    assert "left:0.033%;width:99.967%" in bars[0]
    outcomes = [r["data-outcome"] for r in rows]
    assert outcomes == ["ok", "ok", "ok", "failure", "denial", "failure", "ok"]


def test_an_open_stage_runs_to_the_end_and_is_drawn_open() -> None:
    report = incident_report(cancel_journal().events, "p1", "c1")
    page = Page(render_incident_html(report))
    open_rows = [
        r["data-stage"] for r in page.with_attr("data-outcome") if r["data-outcome"] == "open"
    ]
    assert open_rows == ["turn", "policy"]  # no answer came, no decision was recorded
    assert [r["data-outcome"] for r in page.with_attr("data-stage")][-1] == "cancel"


def test_the_same_journal_gives_the_same_bytes_in_any_order() -> None:
    events = hostile_journal().events
    first = render_incident_html(incident_report(events, "p1", "c1"))
    shuffled = list(events)
    random.Random(7).shuffle(shuffled)
    assert render_incident_html(incident_report(shuffled, "p1", "c1")) == first


def test_an_empty_report_is_a_page_too() -> None:
    report = incident_report(incident_journal().events, "p1", "c1", correlation_id="nope")
    text = render_incident_html(report)
    assert text.startswith("<!DOCTYPE html>\n") and text.endswith("</html>\n")
    assert "No stages." in text and '<section id="first-error"><h2>First error</h2>' in text


def test_the_page_has_a_changes_section_with_escaped_paths() -> None:
    page = render_incident_html(incident_report(changes_journal().events, "p1", "c1"))
    section = page.split('<section id="changes">', 1)[1].split("</section>", 1)[0]
    assert "&lt;b&gt;x&lt;/b&gt;.txt" in section and "<b>x" not in section
    assert "ab" * 32 in section and "quarantined: git_dir_created" in section
