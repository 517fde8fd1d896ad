"""The incident report as one self-contained HTML page: ``render_incident_html(report)``.

A pure function of the JSON form built by ``events.incidents.incident_report``: no clock,
no random ids, no network. The page carries its own CSS, draws with HTML and CSS only (no
script at all) and declares a Content-Security-Policy that forbids loading anything, so
even a mistake here cannot make a browser fetch a byte. Every string in the report was
written by users, models or tools: all of it goes through ``html.escape`` (text and
attributes alike), and none of it is ever placed in a URL, a style or a script: styles and
link targets are built from fixed names (stage kinds, marks) and the events' integer
``seq`` and millisecond offsets only.

The page: a summary with the first error linked from the top; a waterfall of every stage
(turns, model rounds, policy decisions, approvals, tool calls: a bar from its start offset
for its latency) with denials, failures, timeouts, crashes, restarts and cancellations
marked on the same time axis; the causal tree; then the report's lists and tables.
Elements carry ``data-stage``, ``data-mark`` and ``data-seq`` attributes for tools.

Why this module is long: the page's stylesheet is part of it (the page must carry its own),
and every section is escaped by the same few helpers, which must stay next to the markup
they guard.
"""

from __future__ import annotations

import html
import json
import re
from typing import Any, Final

from events.incidents import ERROR_KINDS
from events.report import (
    CHANGE_HEADERS,
    LATENCY_HEADERS,
    LATENCY_STAGES,
    PROBLEM_SECTIONS,
    TOOL_CALL_HEADERS,
    change_rows,
    latency_rows,
    tool_call_rows,
)

__all__ = ["CONTENT_SECURITY_POLICY", "MARK_KINDS", "render_incident_html"]

CONTENT_SECURITY_POLICY: Final = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
    "base-uri 'none'; form-action 'none'"
)
"""The page's policy: inline styles and ``data:`` images only; no script, font or fetch."""

MARK_KINDS: Final[dict[str, str]] = {
    **ERROR_KINDS,
    "actor.restarted": "restart",
    "actor.mailbox_overflow": "failure",
    "conversation.cancel": "cancel",
    "tool.cancelled": "cancel",
}
"""Event types marked on the waterfall and in the tree, mapped to their mark."""

_STAGE_NAMES: Final = {
    "turn": "turn",
    "model_round": "model round",
    "policy": "policy",
    "approval": "approval",
    "tool_call": "tool call",
}
_DEPTH: Final = {"turn": 0, "model_round": 1, "policy": 2, "approval": 2, "tool_call": 2}
_END_MARKS: Final = {
    "policy.denied": "denial",
    "tool.rejected": "denial",
    "tool.failed": "failure",
    "llm.failed": "failure",
    "budget.exceeded": "failure",
    "tool.cancelled": "cancel",
    "conversation.cancel": "cancel",
}
_CONTROL: Final = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")

_CHIPS: Final = {
    "denials": ("denial", "denials", "denial"),
    "failures": ("failure", "failures", "failure"),
    "timeouts": ("timeout", "timeouts", "timeout"),
    "cancellations": ("cancellation", "cancellations", "cancel"),
    "security_signals": ("security signal", "security signals", "denial"),
    "actor_events": ("actor crash or restart", "actor crashes and restarts", "crash"),
}

_CSS: Final = """
:root{--ink:#1d2330;--muted:#5d6779;--line:#e3e7ee;--bg:#f6f7fb;--card:#fff;
--turn:#64748b;--model_round:#7c5cd6;--policy:#0f9d8f;--approval:#d69e16;--tool_call:#2f6fde;
--denial:#e07b14;--failure:#d6333f;--timeout:#b3261e;--crash:#8e1b5a;--restart:#8e1b5a;
--cancel:#6b7280;--open:#9aa3b2}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--ink);
font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif}
main{max-width:1200px;margin:0 auto;padding:24px 28px 40px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:16px;margin:0 0 12px}
h3{font-size:14px;margin:14px 0 4px}h3:first-of-type{margin-top:0}
code,pre,.mono{font-family:ui-monospace,"SFMono-Regular","DejaVu Sans Mono",Menlo,monospace;
font-size:12.5px}
a{color:#2454b8;text-decoration:none}a:hover{text-decoration:underline}
section{background:var(--card);border:1px solid var(--line);border-radius:10px;
padding:16px 18px;margin:16px 0}
.sub{color:var(--muted);margin:0}
.facts{display:flex;flex-wrap:wrap;gap:8px 22px;margin:14px 0 0;padding:0;list-style:none}
.facts b{font-weight:600}
.badge{display:inline-block;padding:1px 9px;border-radius:999px;color:#fff;font-weight:600;
font-size:12px;vertical-align:2px;background:var(--turn)}
.badge.error{background:var(--failure)}.badge.ok{background:#1f8a4c}
.badge.cancelled{background:var(--cancel)}.badge.in_progress{background:var(--approval)}
.chips{margin:12px 0 0;display:flex;flex-wrap:wrap;gap:8px}
.chip{border:1px solid var(--c);color:var(--c);border-radius:999px;padding:1px 10px;
font-size:12.5px;font-weight:600;background:#fff}
.first{border-left:5px solid var(--failure);background:#fff5f5}
.first p{margin:4px 0 0}
.none{color:var(--muted);margin:0}
.legend{display:flex;flex-wrap:wrap;gap:6px 16px;margin:0 0 12px;color:var(--muted);
font-size:12px}
.legend span::before{content:"";display:inline-block;width:12px;height:8px;border-radius:2px;
margin-right:5px;background:var(--c)}
.wf{border-top:1px solid var(--line)}
.row{display:grid;grid-template-columns:minmax(0,380px) minmax(0,1fr) 76px;gap:10px;
align-items:center;min-height:24px;border-bottom:1px solid var(--line)}
.row:hover{background:#f3f6fc}
.name{white-space:nowrap;overflow:hidden;text-overflow:ellipsis;font-size:12.5px}
.kind{display:inline-block;min-width:74px;color:var(--muted);font-size:11px;
text-transform:uppercase;letter-spacing:.03em}
.track{position:relative;height:24px;background:repeating-linear-gradient(90deg,
transparent 0,transparent calc(25% - 1px),var(--line) calc(25% - 1px),var(--line) 25%)}
.bar{position:absolute;top:6px;height:12px;min-width:3px;border-radius:3px;
background:var(--c,var(--turn))}
.bar.open{background:repeating-linear-gradient(45deg,var(--open) 0 5px,#c8ced8 5px 10px)}
.pin{position:absolute;top:4px;width:14px;height:14px;margin-left:-7px;transform:rotate(45deg);
background:var(--c);border:2px solid #fff;box-shadow:0 0 0 1px var(--c)}
.ms{text-align:right;color:var(--muted);font-size:12px;white-space:nowrap}
.axis{display:grid;grid-template-columns:minmax(0,380px) minmax(0,1fr) 76px;gap:10px;
color:var(--muted);font-size:11px}
.ticks{position:relative;height:16px}
.ticks span{position:absolute;transform:translateX(-50%);white-space:nowrap}
.ticks span:first-child{transform:none}.ticks span:last-child{transform:translateX(-100%)}
.mark{color:var(--c);font-weight:600}
.first-error{outline:2px solid var(--failure);outline-offset:-2px;background:#fff0f0}
.tree{list-style:none;margin:0;padding:0}
.tree li{padding:2px 6px;border-left:2px solid transparent;white-space:nowrap;overflow:hidden;
text-overflow:ellipsis}
.tree li[data-mark]{border-left-color:var(--c);background:#fbfbfd}
.tree .seq{color:var(--muted);display:inline-block;min-width:52px}
.tree .t{font-weight:600}.tree .guide{color:#b7bfcc}
.tree .at{color:var(--muted);float:right;padding-left:12px}
table{border-collapse:collapse;width:100%;font-size:13px}
th,td{text-align:left;padding:4px 8px;border-bottom:1px solid var(--line);vertical-align:top}
th{color:var(--muted);font-weight:600;font-size:12px}
td.n{text-align:right}
.entries{list-style:none;margin:0;padding:0}
.entries li{padding:4px 0;border-bottom:1px solid var(--line)}
details summary{cursor:pointer;color:var(--muted);font-size:12px}
pre{background:#f3f4f8;border-radius:6px;padding:8px 10px;margin:6px 0;white-space:pre-wrap;
word-break:break-all;max-height:320px;overflow:auto}
.grid2{display:grid;grid-template-columns:1fr 1fr;gap:16px;align-items:start}
.grid2 section{margin:0}
footer{color:var(--muted);font-size:12px;text-align:center}
"""


def _t(value: Any) -> str:
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


def _mark_of(event_type: str) -> str | None:
    return MARK_KINDS.get(event_type)


def _stage_mark(stage: dict[str, Any]) -> str:
    if stage["end_type"] is None:
        return "open"
    return _END_MARKS.get(stage["end_type"], "ok")


def _header(report: dict[str, Any], span_ms: int) -> str:
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


def _first_error(report: dict[str, Any], offsets: dict[int, int | None]) -> str:
    first = report["first_error"]
    if first is None:
        return '<section id="first-error"><h2>First error</h2><p class="none">None.</p></section>'
    seq, kind = first["seq"], first["kind"]
    color = kind if kind in set(MARK_KINDS.values()) else "failure"  # a CSS name, never data
    return (
        f'<section id="first-error" class="first" data-seq="{seq}"><h2>First error: '
        f'<span class="mark" style="--c:var(--{color})">{_t(kind)}</span></h2>'
        f'<p><a href="#event-{seq}">seq {seq} · <code>{_t(first["type"])}</code></a> at '
        f"+{_t(_ms(offsets.get(seq)))} ({_t(first['at'])}) — {_t(first['summary'])}</p>"
        f"{_data(first['data'])}</section>"
    )


def _legend() -> str:
    kinds = [(f"--{s}", name) for s, name in _STAGE_NAMES.items()]
    kinds += [(f"--{m}", m) for m in ("denial", "failure", "timeout", "crash", "cancel", "open")]
    return (
        '<div class="legend">'
        + "".join(f'<span style="--c:var({var})">{_t(name)}</span>' for var, name in kinds)
        + "</div>"
    )


def _stage_row(stage: dict[str, Any], total: int) -> str:
    kind = stage["stage"] if stage["stage"] in _STAGE_NAMES else "turn"
    mark = _stage_mark(stage)
    end = total if stage["latency_ms"] is None else stage["offset_ms"] + stage["latency_ms"]
    color = f"var(--{kind})" if mark in ("ok", "open") else f"var(--{mark})"
    ends = (
        "still open"
        if stage["end_seq"] is None
        else (f"seq {stage['end_seq']} {stage['end_type']}")
    )
    title = (
        f"{_STAGE_NAMES[kind]} {stage['label']}: seq {stage['start_seq']} → {ends}, "
        f"+{_ms(stage['offset_ms'])}, {_ms(stage['latency_ms'])}"
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


def _pin_row(node: dict[str, Any], mark: str, total: int, first_seq: int | None) -> str:
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


def _waterfall(report: dict[str, Any], total: int) -> str:
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
    ticks = "".join(
        f'<span style="left:{25 * i}%">{_t(_ms(total * i // 4))}</span>' for i in range(5)
    )
    body = "".join(row for _, row in sorted(rows, key=lambda item: item[0]))
    return (
        '<section id="waterfall"><h2>Waterfall</h2>'
        + _legend()
        + f'<div class="axis"><div>stage</div><div class="ticks">{ticks}</div>'
        '<div class="ms">latency</div></div>'
        + f'<div class="wf">{body or "<p class=none>No stages.</p>"}</div></section>'
    )


def _tree(report: dict[str, Any]) -> str:
    first = report["first_error"]
    first_seq = None if first is None else first["seq"]
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
            + (f' <span class="mark">◆ {_t(mark)}</span>' if mark else "")
            + "</li>"
        )
    body = f'<ul class="tree">{"".join(items)}</ul>' if items else '<p class="none">None.</p>'
    return f'<section id="causal-tree"><h2>Causal tree</h2>{body}</section>'


def _data(data: Any) -> str:
    text = json.dumps(data, ensure_ascii=False, indent=2, sort_keys=True)
    return f"<details><summary>data</summary><pre>{_t(text)}</pre></details>"


def _entries(report: dict[str, Any]) -> str:
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


def _table(headers: list[str], rows: list[list[Any]], numeric: set[int]) -> str:
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


def _tables(report: dict[str, Any]) -> str:
    calls = tool_call_rows(report["tool_calls"])
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
        + _table(list(TOOL_CALL_HEADERS), calls, {0, 6})
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


def render_incident_html(report: dict[str, Any]) -> str:
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
