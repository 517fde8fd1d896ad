"""Replaying past turns from committed events into the same traces the daemon exports.

Spans are a pure function of the events (``turn_spans``), so a replayed turn has the
trace id and span ids its live export had. Only traces are replayed: metrics count what
happens, and replaying them would count it twice.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypedDict

from events.envelope import Envelope
from events.projections import in_seq_order
from runtime.errors import RoostError
from runtime.telemetry.exporter import TurnExporter
from runtime.telemetry.spans import turn_correlations, turn_spans

__all__ = [
    "OtelExportFailedError",
    "ReplaySummary",
    "ReplayedTrace",
    "TurnNotFoundError",
    "replay_turns",
]


class ReplayedTrace(TypedDict):
    """One turn exported again: its trace id (32 hex digits) and its spans."""

    correlation_id: str
    trace_id: str
    spans: int
    exported: bool


class ReplaySummary(TypedDict):
    """What :func:`replay_turns` returns."""

    turns: int
    spans: int
    failed: int
    traces: list[ReplayedTrace]


class TurnNotFoundError(RoostError):
    """No turn (``user.message``) has the correlation id asked for."""

    code = "turn_not_found"


class OtelExportFailedError(RoostError):
    """The exporter refused or failed some of the replayed turns."""

    code = "otel_export_failed"


def replay_turns(
    events: Iterable[Envelope],
    exporter: TurnExporter,
    *,
    conversation_id: str | None = None,
    correlation_id: str | None = None,
    progress: Callable[[int, int], None] = lambda done, total: None,
) -> ReplaySummary:
    """Export the turns of ``events`` (of one conversation, or one turn); return a summary.

    The summary is ``{turns, spans, failed, traces: [{correlation_id, trace_id, spans,
    exported}]}`` with trace ids as 32 hex digits. ``progress(done, total)`` is called
    after each turn. Raises ``TurnNotFoundError`` when ``correlation_id`` names no turn.
    """
    ordered = in_seq_order(events)
    correlations = turn_correlations(ordered, conversation_id)
    if correlation_id is not None:
        if correlation_id not in correlations:
            raise TurnNotFoundError(
                f"no turn with correlation id {correlation_id!r}"
                + (f" in conversation {conversation_id!r}" if conversation_id else ""),
                correlation_id=correlation_id,
            )
        correlations = [correlation_id]
    by_correlation: dict[str, list[Envelope]] = {}
    for event in ordered:
        by_correlation.setdefault(event.correlation_id, []).append(event)
    traces: list[ReplayedTrace] = []
    for done, correlation in enumerate(correlations, start=1):
        spans = turn_spans(by_correlation[correlation], correlation)
        try:
            exported = exporter.export_spans(spans)
        except Exception:
            exported = False
        traces.append(
            {
                "correlation_id": correlation,
                "trace_id": f"{spans[0].trace_id:032x}",
                "spans": len(spans),
                "exported": exported,
            }
        )
        progress(done, len(correlations))
    return {
        "turns": len(traces),
        "spans": sum(t["spans"] for t in traces),
        "failed": sum(1 for t in traces if not t["exported"]),
        "traces": traces,
    }
