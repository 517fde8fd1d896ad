"""The HTML incident page says each thing once and plainly (issue 19, item 16).

One classification of security signals (chips, waterfall, tree, first error), the first
error's whole message, a round's message before its tool calls in the causal tree, and
the two times of one tool call labelled.
"""

from __future__ import annotations

import html
import re

from events import catalog as ev
from events.incident_html import FIRST_ERROR_CHARS, render_incident_html
from events.incidents import incident_report
from events.report import cut_at_word, describe_event, render_incident_markdown
from tests.events.test_incident_html import Page
from tests.events.test_projections import Journal, incident_journal, started_project


def violation_journal() -> Journal:
    """A read outside the root: the sandbox signal, then the denial, as the pipeline writes."""
    j = started_project()
    msg = j.add(ev.UserMessage(content="read ../../etc/passwd"), after_ms=5)
    r1 = j.add(ev.LlmStarted(provider="deterministic", round=1), cause=msg, after_ms=2)
    req = j.add(
        ev.ToolRequested(call_id="call-1", name="fs.read", args={"path": "../../etc/passwd"}),
        cause=r1,
    )
    j.add(
        ev.SecuritySandboxViolation(
            tool="fs.read", path="../../etc/passwd", reason="outside_root", call_id="call-1"
        ),
        cause=req,
    )
    denied = j.add(
        ev.PolicyDenied(tool="fs.read", reason="outside_root", call_id="call-1"), cause=req
    )
    j.add(ev.ToolFailed(call_id="call-1", name="fs.read", reason={"code": "denied"}), cause=denied)
    return j


def marks(page: Page, where: str) -> dict[str, list[int]]:
    found: dict[str, list[int]] = {}
    for attrs in page.with_attr("data-mark"):
        if attrs.get("id", "").startswith(where):
            found.setdefault(attrs["data-mark"], []).append(int(attrs["data-seq"]))
    return found


def chips(text: str) -> dict[str, tuple[str, str]]:
    """``{href: (text, color)}`` of the summary's chips."""
    pattern = r'<a class="chip" href="#(\w+)" style="--c:var\(--(\w+)\)">([^<]*)</a>'
    return {href: (label, color) for href, color, label in re.findall(pattern, text)}


def test_a_sandbox_violation_is_a_security_signal_everywhere_and_the_denial_is_counted_once():
    for journal in (violation_journal(), incident_journal()):
        report = incident_report(journal.events, "p1", "c1")
        text = render_incident_html(report)
        page = Page(text)
        denials = [e["seq"] for e in report["denials"]]
        signals = [e["seq"] for e in report["security_signals"]]
        assert denials and signals
        for where in ("waterfall", "event"):
            found = marks(page, where)
            assert found.get("denial") == denials, (where, found)
            assert found.get("security") == signals, (where, found)
        shown = chips(text)
        assert shown["denials"] == (f"{len(denials)} denial{'s' * (len(denials) > 1)}", "denial")
        assert shown["security_signals"][1] == "security"
    report = incident_report(violation_journal().events, "p1", "c1")
    assert (report["first_error"]["type"], report["first_error"]["kind"]) == (
        "security.sandbox_violation",
        "security",
    )
    box = render_incident_html(report).split('<section id="first-error"', 1)[1]
    assert 'style="--c:var(--security)">security</span>' in box.split("</h2>", 1)[0]
    assert "(security)" in render_incident_markdown(report)


def failed_turn(message: str) -> Journal:
    j = started_project()
    msg = j.add(ev.UserMessage(content="hello"), after_ms=5)
    r1 = j.add(ev.LlmStarted(provider="openai", round=1), cause=msg, after_ms=2)
    j.add(ev.LlmFailed(reason="provider_error", message=message), cause=r1, after_ms=20)
    return j


def first_error_box(journal: Journal) -> str:
    text = render_incident_html(incident_report(journal.events, "p1", "c1"))
    return text.split('<section id="first-error"', 1)[1].split("</section>", 1)[0]


def test_the_first_error_shows_its_message_whole() -> None:
    message = "HTTP 500 from http://127.0.0.1:9/v1/chat/completions: " + "upstream " * 20
    message += "(after 3 attempts)"
    assert len(describe_event("llm.failed", {"reason": "provider_error", "message": message})) < (
        len(message)
    )  # the one-line summary elsewhere is cut
    box = first_error_box(failed_turn(message))
    shown = html.unescape(box.split('<span class="message"', 1)[1].split("</span>", 1)[0])
    assert shown.endswith(f">provider_error: {message}")
    assert "(after 3 attempts)" in shown and "…" not in shown
    assert "<details><summary>the whole message" not in box


def test_a_very_long_first_error_is_cut_at_a_word_with_the_whole_text_below() -> None:
    words = " ".join(f"word{i}" for i in range(400)) + " (after 3 attempts)"
    box = first_error_box(failed_turn(words))
    span = box.split('<span class="message"', 1)[1].split("</span>", 1)[0]
    title, shown = span.split('title="', 1)[1].split('">', 1)
    assert html.unescape(title) == f"provider_error: {words}"
    assert shown.endswith("…") and len(shown) <= FIRST_ERROR_CHARS
    assert re.search(r" word\d+…$", shown)  # a whole word, then the ellipsis
    assert words.startswith(shown.removeprefix("provider_error: ").removesuffix("…"))
    details = box.split("<details><summary>the whole message", 1)[1]
    assert f"provider_error: {words}" in html.unescape(details.split("</pre>", 1)[0])


def test_cut_at_word_never_ends_in_half_a_word() -> None:
    assert cut_at_word("short", 10) == "short"
    assert cut_at_word("failed (after 3 attempts)", 22) == "failed (after 3…"
    assert cut_at_word("x" * 30, 10) == "x" * 9 + "…"  # no space to cut at


def round_with_text_and_a_call() -> Journal:
    """Round 1 says something and calls a tool; its message is journaled after the request."""
    j = started_project()
    msg = j.add(ev.UserMessage(content="hi"), after_ms=5)
    r1 = j.add(ev.LlmStarted(provider="deterministic", round=1), cause=msg, after_ms=2)
    req = j.add(ev.ToolRequested(call_id="call-1", name="fs.read", args={}), cause=r1, after_ms=9)
    j.add(ev.AssistantMessage(content="Reading."), cause=r1)
    allowed = j.add(ev.PolicyAllowed(tool="fs.read", call_id="call-1"), cause=req, after_ms=3)
    started = j.add(ev.ToolStarted(call_id="call-1", name="fs.read"), cause=allowed, after_ms=40)
    done = j.add(
        ev.ToolCompleted(call_id="call-1", name="fs.read", duration_ms=22),
        cause=started,
        after_ms=25,
    )
    r2 = j.add(ev.LlmStarted(provider="deterministic", round=2), cause=done, after_ms=2)
    j.add(ev.AssistantMessage(content="Done."), cause=r2, after_ms=10)
    return j


def test_a_rounds_message_comes_before_the_chain_of_its_tool_calls() -> None:
    report = incident_report(round_with_text_and_a_call().events, "p1", "c1")
    chain = [(n["type"], n["depth"]) for n in report["causal_chain"]]
    assert chain[2:6] == [
        ("llm.started", 1),
        ("assistant.message", 2),  # "Reading.", seq 6, before the call requested at seq 5
        ("tool.requested", 2),
        ("policy.allowed", 3),
    ]
    tree = render_incident_markdown(report).split("## Causal chain", 1)[1]
    assert tree.index('"Reading."') < tree.index("tool.requested") < tree.index('"Done."')
    page = render_incident_html(report).split('id="causal-tree"', 1)[1]
    assert page.index("&quot;Reading.&quot;") < page.index("tool.requested")


def test_the_two_times_of_a_tool_call_are_labelled() -> None:
    report = incident_report(round_with_text_and_a_call().events, "p1", "c1")
    [call] = report["tool_calls"]
    assert (call["latency_ms"], call["run_ms"]) == (69, 22)
    text = render_incident_html(report)
    tree = text.split('id="causal-tree"', 1)[1].split("</section>", 1)[0]
    completed = tree.split("tool.completed", 1)[1].split("</li>", 1)[0]
    assert "ok in 22 ms" in completed
    assert "(ran 22 ms; 69 ms from tool.requested to here)" in completed
    assert "A tool call has two times." in text
    table = text.split('id="tool-calls"', 1)[1].split("</section>", 1)[0]
    assert "<th>requested → done ms</th><th>ran ms</th>" in table
    assert "<td class=n>69</td><td class=n>22</td>" in table
    row = next(r for r in Page(text).with_attr("data-stage") if r["data-stage"] == "tool_call")
    assert "69 ms from tool.requested to its end" in row["title"]
