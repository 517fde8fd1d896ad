"""One-line event summaries and the Markdown rendering of an incident report.

``describe_event`` gives the short text an operator reads next to an event in the report's
causal chain and problem lists (with the describer its type declares);
``render_incident_markdown`` turns the JSON form built by
``events.incidents.incident_report`` into Markdown. Both are pure: the same input gives
the same text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from events.catalog import facts_of
from events.describe import SUMMARY_MAX_CHARS, clip, cut_at_word, generic, summarize
from events.describe import plain as _plain
from events.describe import quote as _quote
from events.facts import SECTIONS, STAGES, Section
from events.view_types import (
    ChangeRun,
    IncidentReport,
    ProblemEntry,
    ProjectProblem,
    StageLatency,
    ToolCallEntry,
)

__all__ = [
    "CHANGE_HEADERS",
    "LATENCY_HEADERS",
    "LATENCY_STAGES",
    "PROBLEM_SECTIONS",
    "SUMMARY_MAX_CHARS",
    "TOOL_CALL_HEADERS",
    "change_rows",
    "clip",
    "cut_at_word",
    "describe_event",
    "latency_rows",
    "render_incident_markdown",
    "tool_call_rows",
]

LATENCY_STAGES: Final[tuple[str, ...]] = tuple(
    stage for stage, info in STAGES.items() if info.measured
)
"""The stages an incident report measures, in the order they are shown."""


def describe_event(
    event_type: str, data: Mapping[str, object], limit: int | None = SUMMARY_MAX_CHARS
) -> str:
    """Return a one-line summary of an event's payload (empty when there is nothing to say).

    Quoted values and messages are cut to ``limit`` characters (None: the whole text).
    """
    return summarize(facts_of(event_type).describe or generic, data, limit)


# --- Markdown ---------------------------------------------------------------------------


def _cell(value: object) -> str:
    text = "—" if value is None else _plain(value)
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def _table(headers: list[str], rows: Sequence[Sequence[object]]) -> list[str]:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines.extend("| " + " | ".join(_cell(value) for value in row) + " |" for row in rows)
    return lines


def _line(entry: ProblemEntry | ProjectProblem) -> str:
    summary = f" — {entry['summary']}" if entry.get("summary") else ""
    return f"- seq {entry['seq']} · {entry['at']} · `{entry['type']}`{summary}"


def _section(title: str, body: list[str]) -> list[str]:
    return ["", f"## {title}", "", *(body or ["None."])]


def _stages(latency: dict[str, StageLatency]) -> list[tuple[str, StageLatency]]:
    known = [(stage, latency[stage]) for stage in LATENCY_STAGES if stage in latency]
    return known + sorted(item for item in latency.items() if item[0] not in LATENCY_STAGES)


TOOL_CALL_HEADERS: Final[tuple[str, ...]] = (
    "seq",
    "call",
    "tool",
    "decision",
    "outcome",
    "code",
    "latency ms",
)
"""The columns of a report's tool-call table (Markdown and HTML alike)."""
_TOOL_CALL_KEYS: Final = (
    "requested_seq",
    "call_id",
    "name",
    "decision",
    "outcome",
    "code",
    "latency_ms",
)

LATENCY_HEADERS: Final[tuple[str, ...]] = ("stage", "count", "min ms", "max ms", "total ms")
"""The columns of a report's latency table (Markdown and HTML alike)."""


def tool_call_rows(calls: list[ToolCallEntry]) -> list[list[object]]:
    """The rows of the tool-call table, one per call, in :data:`TOOL_CALL_HEADERS` order."""
    return [[call[key] for key in _TOOL_CALL_KEYS] for call in calls]


def latency_rows(latency: dict[str, StageLatency]) -> list[list[object]]:
    """The rows of the latency table: the known stages in order, then any others sorted."""
    return [
        [stage, s["count"], s["min_ms"], s["max_ms"], s["total_ms"]]
        for stage, s in _stages(latency)
    ]


CHANGE_HEADERS: Final[tuple[str, ...]] = (
    "seq",
    "call",
    "change",
    "path",
    "kind",
    "bytes",
    "sha256",
)
"""The columns of a report's "What did the agent change?" table (Markdown and HTML alike)."""


def change_rows(changes: list[ChangeRun]) -> list[list[object]]:
    """The rows of the changes table, in :data:`CHANGE_HEADERS` order.

    Per run: what was quarantined, then what was created, modified and deleted; a list
    that was capped gets a row saying how many more there were.
    """
    rows: list[list[object]] = []
    for run in changes:
        call = run["call_id"] + (" (recovered)" if run.get("recovered") else "")
        seq = run["seq"]
        for q in run["quarantined"]:
            where = q.get("moved_to") or (
                f"not moved: {q['error']}" if q.get("error") else "removed"
            )
            path = f"{q['path']} → {where}"
            rows.append([seq, call, f"quarantined: {q['reason']}", path, q["kind"], None, None])
        for what, entries, count in (
            ("created", run["created"], run["created_count"]),
            ("modified", run["modified"], run["modified_count"]),
            ("deleted", run["deleted"], run["deleted_count"]),
        ):
            for c in entries:
                path = c["path"] + (f" → {c['target']}" if "target" in c else "")
                rows.append([seq, call, what, path, c.get("kind"), c.get("size"), c.get("sha256")])
            more = count - len(entries)
            if more > 0:
                rows.append([seq, call, what, f"… {more} more", None, None, None])
    return rows


PROBLEM_SECTIONS: Final[tuple[tuple[Section, str], ...]] = tuple(
    (key, info.title) for key, info in SECTIONS.items()
)
"""The report's problem lists (key, title), in the order both renderings show them."""


def render_incident_markdown(report: IncidentReport) -> str:
    """Render the JSON form of an incident report as Markdown (ends with a newline)."""
    summary = report["summary"]
    scope = report["correlation_id"] or "all correlations"
    lines = [
        f"# Incident report: {report['project_id']} / {report['conversation_id']}",
        "",
        f"Scope: {scope}.",
    ]
    first = report["first_error"]
    span = (
        f"seq {summary['first_seq']} to {summary['last_seq']}"
        if summary["event_count"]
        else "no events"
    )
    lines += _section(
        "Summary",
        [
            f"- Status: **{summary['status']}**",
            f"- Conversation status: {summary['conversation_status']}",
            f"- Events: {summary['event_count']} ({span})",
            f"- Turns: {summary['turn_count']}, tool calls: {summary['tool_call_count']}",
            "- First error: "
            + ("none" if first is None else f"{_line(first)[2:]} ({first['kind']})"),
        ],
    )
    lines += _section(
        "What was asked",
        [
            f"- seq {a['seq']} · {a['at']} · {a['correlation_id']}: {_quote(a['content'])}"
            for a in report["asked"]
        ],
    )
    lines += _section(
        "Causal chain",
        [
            "  " * node["depth"]
            + f"- seq {node['seq']} `{node['type']}`"
            + (f" {node['summary']}" if node["summary"] else "")
            for node in report["causal_chain"]
        ],
    )
    calls = report["tool_calls"]
    lines += _section(
        "Tool calls",
        _table(list(TOOL_CALL_HEADERS), tool_call_rows(calls)) if calls else [],
    )
    for key, title in PROBLEM_SECTIONS:
        lines += _section(title, [_line(entry) for entry in report[key]])
    if report.get("project_problems"):  # shown only when the project had some
        lines += _section(
            "Project problems during it", [_line(entry) for entry in report["project_problems"]]
        )
    rows = change_rows(report.get("changes", []))
    lines += _section(
        "What did the agent change?", _table(list(CHANGE_HEADERS), rows) if rows else []
    )
    lines += _section(
        "Latency",
        _table(list(LATENCY_HEADERS), latency_rows(report["latency"])),
    )
    counts = report["counts_by_type"]
    lines += _section(
        "Counts by type",
        _table(["type", "count"], [[kind, n] for kind, n in sorted(counts.items())])
        if counts
        else [],
    )
    return "\n".join(lines) + "\n"
