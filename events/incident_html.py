"""The incident report as one self-contained HTML page: ``render_incident_html(report)``.

A pure function of ``events.incidents.incident_report``'s JSON form, with no script. Every
string in the report was written by users, models or tools: it goes through ``html.escape``
and never into a URL, a style or a script; styles and link targets are built from fixed
names and integers only. The page and its CSP: ``docs/projections.md``, "The HTML page".
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Sequence
from typing import Final, get_args

from events.catalog import PAYLOAD_TYPES, facts_of
from events.facts import SECTIONS, STAGES, Mark
from events.incident_style import CSS as _CSS
from events.report import (
    CHANGE_HEADERS,
    LATENCY_HEADERS,
    LATENCY_STAGES,
    PROBLEM_SECTIONS,
    TOOL_CALL_HEADERS,
    change_rows,
    cut_at_word,
    describe_event,
    latency_rows,
    tool_call_rows,
)
from events.view_types import CausalNode, IncidentReport, StageEntry

__all__ = ["CONTENT_SECURITY_POLICY", "FIRST_ERROR_CHARS", "MARK_KINDS", "render_incident_html"]

CONTENT_SECURITY_POLICY: Final = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
    "base-uri 'none'; form-action 'none'"
)
"""The page's policy: inline styles and ``data:`` images only; no script, font or fetch."""

MARK_KINDS: Final[dict[str, Mark]] = {
    name: mark for name, cls in PAYLOAD_TYPES.items() if (mark := cls.facts.marked) is not None
}
"""Event types marked on the waterfall and in the tree, mapped to their mark (each payload
class's ``facts.mark``, else its error kind).

Every ``security.*`` signal is marked ``security``: one mark per event, the same name as
its chip (``security_signals``)."""

FIRST_ERROR_CHARS: Final = 600
"""The first error's message is shown whole up to this length, else cut at a word, with
the whole text in a ``<details>`` below and in the ``title``."""

_STAGE_NAMES: Final[dict[str, str]] = {
    stage: info.name for stage, info in STAGES.items() if info.measured
}
_DEPTH: Final[dict[str, int]] = {stage: info.depth for stage, info in STAGES.items()}
_MARKS: Final = frozenset(get_args(Mark))
_CONTROL: Final = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")

_CHIPS: Final = {key: info.chip for key, info in SECTIONS.items() if info.chip is not None}

_LATENCIES: Final = (
    "A tool call has two times. Its latency (its bar, the right column, “requested → done” "
    "in Tool calls) runs from tool.requested to its end: the policy decision, any approval, "
    "the wait for a runner, the run and the checks of the result. “ran” (the “ok in N ms” of "
    "tool.completed, “ran ms” in Tool calls) is the run alone."
)
_TOOL_CALL_HEADERS: Final = [
    *("requested → done ms" if h == "latency ms" else h for h in TOOL_CALL_HEADERS),
    "ran ms",
]


def _t(value: object) -> str:
    """Return ``value`` as escaped HTML text (also safe inside a quoted attribute)."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = _CONTROL.sub("\ufffd", text).encode("utf-8", "replace").decode("utf-8")
    return html.escape(text, quote=True)


def _ms(value: int | None) -> str:
    if value is None:
        return "—"
    if abs(value) < 1000:
        return f"{value} ms"
    return f"{value / 1000:.2f} s" if abs(value) < 60_000 else f"{value / 60_000:.1f} min"


def _pct(value: float, total: int) -> str:
    return f"{max(0.0, min(100.0, 100.0 * value / total)):.3f}%"


def _mark_of(event_type: str) -> Mark | None:
    return facts_of(event_type).marked


def _stage_mark(stage: StageEntry) -> str:
    """How a stage ended: ``open``, the mark of the event that closed it, else ``ok``."""
    if stage["end_type"] is None:
        return "open"
    return _mark_of(stage["end_type"]) or "ok"


def _header(report: IncidentReport, span_ms: int) -> str:
    summary = report["summary"]
    scope = report["correlation_id"] or "all correlations"
    first, last = summary["first_seq"], summary["last_seq"]
    seqs = f"seq {first} to {last}" if summary["event_count"] else "none"
    facts = [
        ("Events", f"{summary['event_count']} ({seqs})"),
        ("Turns", summary["turn_count"]),
        ("Tool calls", summary["tool_call_count"]),
        ("Span", _ms(span_ms)),
        ("Conversation", summary["conversation_status"]),
    ]
    status = summary["status"]
    chips = "".join(
        f'<a class="chip" href="#{key}" style="--c:var(--{color})">{len(report[key])} '
        f"{one if len(report[key]) == 1 else many}</a>"
        for key, (one, many, color) in _CHIPS.items()
        if report[key]
    )
    return (
        f"<header><h1>Incident report: {_t(report['project_id'])} / "
        f'{_t(report["conversation_id"])} <span class="badge {_t(status)}">{_t(status)}'
        f'</span></h1><p class="sub">Scope: {_t(scope)}.</p><ul class="facts">'
        + "".join(f"<li>{_t(name)}: <b>{_t(value)}</b></li>" for name, value in facts)
        + "</ul>"
        + (f'<p class="chips">{chips}</p>' if chips else "")
        + "</header>"
    )


def _first_error(report: IncidentReport, offsets: dict[int, int | None]) -> str:
    first = report["first_error"]
    if first is None:
        return '<section id="first-error"><h2>First error</h2><p class="none">None.</p></section>'
    seq, kind = first["seq"], first["kind"]
    color = kind if kind in _MARKS else "failure"  # a CSS name
    whole = describe_event(first["type"], first["data"], limit=None)
    shown = cut_at_word(whole, FIRST_ERROR_CHARS)
    rest = (
        ""
        if shown == whole
        else f"<details><summary>the whole message ({len(whole)} characters)</summary>"
        f"<pre>{_t(whole)}</pre></details>"
    )
    return (
        f'<section id="first-error" class="first" data-seq="{seq}"><h2>First error: '
        f'<span class="mark" style="--c:var(--{color})">{_t(kind)}</span></h2>'
        f'<p><a href="#event-{seq}">seq {seq} · <code>{_t(first["type"])}</code></a> at '
        f"+{_t(_ms(offsets.get(seq)))} ({_t(first['at'])}) — "
        f'<span class="message" title="{_t(whole)}">{_t(shown)}</span></p>'
        f"{rest}{_data(first['data'])}</section>"
    )


def _legend() -> str:
    kinds = [(f"--{s}", name) for s, name in _STAGE_NAMES.items()]
    marks = ("denial", "security", "failure", "timeout", "crash", "cancel", "open")
    kinds += [(f"--{m}", m) for m in marks]
    return (
        '<div class="legend">'
        + "".join(f'<span style="--c:var({var})">{_t(name)}</span>' for var, name in kinds)
        + "</div>"
    )


def _stage_row(stage: StageEntry, total: int) -> str:
    kind = stage["stage"] if stage["stage"] in _STAGE_NAMES else "turn"
    mark = _stage_mark(stage)
    end = total if stage["latency_ms"] is None else stage["offset_ms"] + stage["latency_ms"]
    color = f"var(--{kind})" if mark in ("ok", "open") else f"var(--{mark})"
    ends = (
        "still open"
        if stage["end_seq"] is None
        else (f"seq {stage['end_seq']} {stage['end_type']}")
    )
    took = _ms(stage["latency_ms"])
    if kind == "tool_call":
        took = f"{took} from tool.requested to its end (decision, wait, run)"
    title = (
        f"{_STAGE_NAMES[kind]} {stage['label']}: seq {stage['start_seq']} → {ends}, "
        f"+{_ms(stage['offset_ms'])}, {took}"
    )
    indent = 8 + 14 * _DEPTH[kind]
    return (
        f'<div class="row" data-stage="{_t(kind)}" data-seq="{stage["start_seq"]}" '
        f'data-outcome="{_t(mark)}" title="{_t(title)}">'
        f'<div class="name" style="padding-left:{indent}px"><span class="kind">'
        f"{_t(_STAGE_NAMES[kind])}</span> {_t(stage['label'])}</div>"
        f'<div class="track"><div class="bar{" open" if mark == "open" else ""}" '
        f'style="--c:{color};left:{_pct(stage["offset_ms"], total)};'
        f'width:{_pct(end - stage["offset_ms"], total)}"></div></div>'
        f'<div class="ms">{_t(_ms(stage["latency_ms"]))}</div></div>'
    )


def _pin_row(node: CausalNode, mark: str, total: int, first_seq: int | None) -> str:
    seq, offset = node["seq"], node["offset_ms"]
    first = " first-error" if seq == first_seq else ""
    pin = (
        ""
        if offset is None
        else f'<div class="pin" style="--c:var(--{_t(mark)});left:{_pct(offset, total)}"></div>'
    )
    return (
        f'<div class="row{first}" id="waterfall-{seq}" data-mark="{_t(mark)}" data-seq="{seq}" '
        f'title="{_t(node["type"] + " " + node["summary"])}">'
        f'<div class="name" style="padding-left:50px"><span class="mark" '
        f'style="--c:var(--{_t(mark)})">◆ {_t(mark)}</span> <a href="#event-{seq}">seq {seq}</a> '
        f"<code>{_t(node['type'])}</code> {_t(node['summary'])}</div>"
        f'<div class="track">{pin}</div><div class="ms">+{_t(_ms(offset))}</div></div>'
    )


def _waterfall(report: IncidentReport, total: int) -> str:
    rank = {stage: index for index, stage in enumerate(LATENCY_STAGES)}
    first = report["first_error"]
    first_seq = None if first is None else first["seq"]
    rows: list[tuple[tuple[int, int], str]] = [
        ((stage["start_seq"], rank.get(stage["stage"], len(rank))), _stage_row(stage, total))
        for stage in report["stages"]
    ]
    for node in report["causal_chain"]:
        mark = _mark_of(node["type"])
        if mark is not None:
            rows.append(((node["seq"], len(rank) + 1), _pin_row(node, mark, total, first_seq)))
    ticks = "".join(  # the odd ones hide on narrow screens (CSS), so labels never touch
        f'<span class="{"odd" if i % 2 else "even"}" style="left:{25 * i}%">'
        f"{_t(_ms(total * i // 4))}</span>"
        for i in range(5)
    )
    body = "".join(row for _, row in sorted(rows, key=lambda item: item[0]))
    return (
        '<section id="waterfall"><h2>Waterfall</h2>'
        + _legend()
        + f'<div class="axis"><div>stage</div><div class="ticks">{ticks}</div>'
        '<div class="ms">latency</div></div>'
        + f'<div class="wf">{body or "<p class=none>No stages.</p>"}</div>'
        + f'<p class="note">{_t(_LATENCIES)}</p></section>'
    )


def _call_times(report: IncidentReport) -> dict[int, str]:
    """The two times of each ended tool call, by the seq of its end, as the tree says them."""
    ran = {call["requested_seq"]: call.get("run_ms") for call in report["tool_calls"]}
    out: dict[int, str] = {}
    for stage in report["stages"]:
        if stage["stage"] != "tool_call" or stage["end_seq"] is None:
            continue
        took = f"{_ms(stage['latency_ms'])} from tool.requested to here"
        run = ran.get(stage["start_seq"])
        out[stage["end_seq"]] = took if run is None else f"ran {_ms(run)}; {took}"
    return out


def _tree(report: IncidentReport) -> str:
    first = report["first_error"]
    first_seq = None if first is None else first["seq"]
    times = _call_times(report)
    items = []
    for node in report["causal_chain"]:
        seq, mark = node["seq"], _mark_of(node["type"])
        attrs = f' data-mark="{_t(mark)}" style="--c:var(--{_t(mark)})"' if mark else ""
        classes = ' class="first-error"' if seq == first_seq else ""
        guide = "│ " * max(node["depth"] - 1, 0) + ("└ " if node["depth"] else "")
        items.append(
            f'<li id="event-{seq}" data-seq="{seq}"{classes}{attrs}>'
            f'<span class="at">+{_t(_ms(node["offset_ms"]))}</span>'
            f'<span class="seq">{seq}</span><span class="guide mono">{guide}</span>'
            f'<span class="t mono">{_t(node["type"])}</span> {_t(node["summary"])}'
            + (f' <span class="ran">({_t(times[seq])})</span>' if seq in times else "")
            + (f' <span class="mark">◆ {_t(mark)}</span>' if mark else "")
            + "</li>"
        )
    body = f'<ul class="tree">{"".join(items)}</ul>' if items else '<p class="none">None.</p>'
    return f'<section id="causal-tree"><h2>Causal tree</h2>{body}</section>'


def _data(data: object) -> str:
    text = json.dumps(data, ensure_ascii=False, indent=2, sort_keys=True)
    return f"<details><summary>data</summary><pre>{_t(text)}</pre></details>"


def _entries(report: IncidentReport) -> str:
    parts, empty = [], []
    for key, title in PROBLEM_SECTIONS:
        entries = report[key]
        if not entries:
            empty.append(title.lower())
            continue
        items = "".join(
            f'<li data-seq="{e["seq"]}"><a href="#event-{e["seq"]}">seq {e["seq"]}</a> · '
            f"{_t(e['at'])} · <code>{_t(e['type'])}</code> — {_t(e['summary'])}"
            f"{_data(e['data'])}</li>"
            for e in entries
        )
        parts.append(
            f'<h3 id="{key}">{_t(title)} ({len(entries)})</h3><ul class="entries">{items}</ul>'
        )
    none = f'<p class="none">None: {_t(", ".join(empty))}.</p>' if empty else ""
    return f'<section id="problems"><h2>Problems</h2>{"".join(parts)}{none}</section>'


def _table(headers: list[str], rows: Sequence[Sequence[object]], numeric: set[int]) -> str:
    head = "".join(f"<th>{_t(h)}</th>" for h in headers)
    body = "".join(
        "<tr>"
        + "".join(
            f"<td{' class=n' if i in numeric else ''}>{'—' if v is None else _t(v)}</td>"
            for i, v in enumerate(row)
        )
        + "</tr>"
        for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _tables(report: IncidentReport) -> str:
    calls = [
        [*row, call.get("run_ms")]
        for row, call in zip(
            tool_call_rows(report["tool_calls"]), report["tool_calls"], strict=True
        )
    ]
    changes = change_rows(report.get("changes", []))
    latency = latency_rows(report["latency"])
    counts = [[kind, n] for kind, n in sorted(report["counts_by_type"].items())]
    asked = "".join(
        f'<li><a href="#event-{a["seq"]}">seq {a["seq"]}</a> · {_t(a["at"])} · '
        f"{_t(a['correlation_id'])}: {_t(a['content'])}</li>"
        for a in report["asked"]
    )
    return (
        '<section id="asked"><h2>What was asked</h2>'
        + (f'<ul class="entries">{asked}</ul>' if asked else '<p class="none">None.</p>')
        + "</section>"
        + '<section id="tool-calls"><h2>Tool calls</h2>'
        + _table(_TOOL_CALL_HEADERS, calls, {0, 6, 7})
        + '</section><section id="changes"><h2>What did the agent change?</h2>'
        + (
            _table(list(CHANGE_HEADERS), changes, {0, 5})
            if changes
            else '<p class="none">None.</p>'
        )
        + '</section><div class="grid2"><section id="latency"><h2>Latency</h2>'
        + _table(list(LATENCY_HEADERS), latency, {1, 2, 3, 4})
        + '</section><section id="counts"><h2>Counts by type</h2>'
        + _table(["type", "count"], counts, {1})
        + "</section></div>"
    )


def render_incident_html(report: IncidentReport) -> str:
    """Render the JSON form of an incident report as one self-contained HTML page."""
    offsets = {node["seq"]: node["offset_ms"] for node in report["causal_chain"]}
    ends = [stage["offset_ms"] + (stage["latency_ms"] or 0) for stage in report["stages"]] + [
        offset for offset in offsets.values() if offset is not None
    ]
    span = max(ends, default=0)
    title = f"Incident report: {report['project_id']} / {report['conversation_id']}"
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{_t(CONTENT_SECURITY_POLICY)}">'
        '<meta name="referrer" content="no-referrer">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_t(title)}</title><style>{_CSS}</style></head><body><main>"
        + _header(report, span)
        + _first_error(report, offsets)
        + _waterfall(report, max(span, 1))
        + _tree(report)
        + _entries(report)
        + _tables(report)
        + "<footer>Rendered by roost incident --format html from the journal alone: "
        "the same journal gives the same bytes.</footer></main></body></html>\n"
    )
