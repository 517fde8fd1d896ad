"""A turn's spans, built from its committed events: a pure function, no SDK, no clock.

One trace per turn: its id is derived from the correlation id, each span's id from the
event that opens it and the span's kind, so building the same turn twice (live, or later
from the journal) gives the same trace. Times are the events' ``at``.

The stages are the incident report's, from the same builder (``events.stages``): each
stage is a span (``SPAN_NAMES``), plus ``roost.journal.commit`` (commit), the turn's first
committed event to its last (each one a span event). A ``policy`` span is its decision's
(the event it is identified by), so a decision not yet made has none; the turn's spans are
its first ``user.message``'s. A span still open at the turn's end runs to its last event.

A span's parent is found up the causation chain of its identifying event
(``events.stages.cause_indexes``): the nearest event that opens a span of the parent's
kind (a later round, caused by a tool result, still belongs to the turn); a call's spans
that follow a user's decision (a new causal chain from ``tool.approved``) hang from the
call's ``tool.requested``. A span is an error when an event of
``events.incidents.ERROR_KINDS`` (a failure, denial or timeout) belongs to it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from typing import Final, Literal, NamedTuple

import msgspec

from events.catalog import TERMINAL_TOOL_TYPES
from events.envelope import Envelope
from events.facts import STAGES, Stage
from events.incidents import ERROR_KINDS, epoch_ms
from events.projections import DECISION_TYPES, TURN_END_TYPES, in_seq_order
from events.stages import StageSpan, StageWalk, stage_spans

__all__ = [
    "SPAN_NAMES",
    "AttributeValue",
    "SpanKind",
    "SpanMark",
    "SpanRecord",
    "span_id_of",
    "trace_id_of",
    "turn_correlations",
    "turn_spans",
]

SpanKind = Stage | Literal["commit"]
"""What a span stands for: a stage (``events.facts.STAGES``) or the journal commit."""

AttributeValue = str | int | bool
"""A span attribute's value."""

SPAN_NAMES: Final[dict[SpanKind, str]] = {
    "turn": "roost.turn",
    "model_round": "roost.llm.round",
    "tool_call": "roost.tool.call",
    "policy": "roost.policy.decision",
    "approval": "roost.approval.wait",
    "tool_run": "roost.tool.run",
    "commit": "roost.journal.commit",
}
"""The span name of each kind."""

_PARENT_KIND: Final[dict[SpanKind, Stage]] = {
    "model_round": "turn",
    "tool_call": "model_round",
    "policy": "tool_call",
    "approval": "tool_call",
    "tool_run": "tool_call",
}
_ID_KINDS: Final[dict[SpanKind, str]] = {"model_round": "round"}
"""Kinds whose span ids are derived from the name they had before the stages were named
once (``round``), so a replay still matches what was exported before."""
_RUN_ERRORS: Final = frozenset({"tool.failed", "tool.timeout"})
_APPROVAL_ENDS: Final = frozenset({"tool.approved", "tool.rejected"})
_RANK: Final = {stage: rank for rank, stage in enumerate(STAGES)}
_NS_PER_MS: Final = 1_000_000


class SpanMark(msgspec.Struct, frozen=True, kw_only=True):
    """A committed event shown on a span (an OpenTelemetry span event)."""

    name: str
    """The event's type."""
    time_ns: int
    """Its ``at``, in nanoseconds since the epoch."""
    attributes: dict[str, AttributeValue]
    """``roost.seq`` and ``roost.event_id``."""


class SpanRecord(msgspec.Struct, frozen=True, kw_only=True):
    """One span of a turn, with explicit ids and times (no SDK object)."""

    name: str
    """``SPAN_NAMES[kind]``."""
    kind: SpanKind
    """What the span stands for."""
    trace_id: int
    """128-bit trace id (``trace_id_of`` the correlation id)."""
    span_id: int
    """64-bit span id (``span_id_of`` the opening event id and the kind)."""
    parent_span_id: int | None
    """The parent span's id; None for the turn."""
    start_ns: int
    """Start, nanoseconds since the epoch."""
    end_ns: int
    """End, nanoseconds since the epoch (never before ``start_ns``)."""
    error: bool
    """Whether a failure, denial or timeout belongs to the span."""
    status_message: str
    """The first error's type and reason code ('' when none)."""
    attributes: dict[str, AttributeValue]
    """The opening event's ids and the kind's own attributes."""
    marks: tuple[SpanMark, ...] = ()
    """Committed events shown on the span (the journal commit span's)."""


def _digest(*parts: str) -> bytes:
    return hashlib.sha256("\x00".join(parts).encode()).digest()


def trace_id_of(correlation_id: str) -> int:
    """The 128-bit trace id of a turn: a hash of its correlation id (never 0)."""
    return int.from_bytes(_digest("roost.trace", correlation_id)[:16], "big") or 1


def span_id_of(event_id: str, kind: SpanKind) -> int:
    """The 64-bit span id of the ``kind`` span opened by ``event_id`` (never 0)."""
    return (
        int.from_bytes(_digest("roost.span", _ID_KINDS.get(kind, kind), event_id)[:8], "big") or 1
    )


def turn_correlations(events: Iterable[Envelope], conversation_id: str | None = None) -> list[str]:
    """Correlation ids of the turns (``user.message``) in ``events``, in ``seq`` order."""
    out: dict[str, None] = {}
    for event in in_seq_order(events):
        if event.type == "user.message" and conversation_id in (None, event.conversation_id):
            out.setdefault(event.correlation_id, None)
    return list(out)


def _ns(at: str) -> int:
    ms = epoch_ms(at)
    return 0 if ms is None else ms * _NS_PER_MS


def _reason(event: Envelope) -> str:
    """The event's reason code: ``data.reason`` (or its ``code``), else ''."""
    reason = event.data.get("reason")
    if isinstance(reason, dict):
        reason = reason.get("code")
    return reason if isinstance(reason, str) else ""


def _ids(event: Envelope) -> dict[str, AttributeValue]:
    attributes: dict[str, AttributeValue] = {
        "roost.event_id": event.event_id,
        "roost.event_type": event.type,
        "roost.seq": event.seq,
        "roost.correlation_id": event.correlation_id,
        "roost.project_id": event.project_id,
    }
    if event.causation_id is not None:
        attributes["roost.causation_id"] = event.causation_id
    if event.conversation_id is not None:
        attributes["roost.conversation_id"] = event.conversation_id
    return attributes


class _Turn:
    """The events of one turn, their stages and the lookups the spans need."""

    def __init__(self, events: list[Envelope]) -> None:
        self.events = events
        self.end = events[-1]
        walk: StageWalk = stage_spans(events)
        self.cause = walk.causes
        self.call_of = walk.calls
        self.calls: dict[str, list[Envelope]] = {}
        for event, call_id in zip(events, walk.calls, strict=True):
            if call_id is not None:
                self.calls.setdefault(call_id, []).append(event)
        self.request = {
            span.call_id: span.start
            for span in reversed(walk.spans)
            if span.stage == "tool_call" and span.call_id is not None
        }
        self.stages = sorted(
            (
                (self.anchor(span), span)
                for span in walk.spans
                if (span.stage != "turn" or span.start == 0)
                and (span.stage != "policy" or span.end is not None)
            ),
            key=lambda item: (item[0], _RANK[item[1].stage]),
        )
        self.anchored = {(index, span.stage) for index, span in self.stages}

    @staticmethod
    def anchor(span: StageSpan) -> int:
        """The index of the event a span is identified by: a decision's, else its opener's."""
        return span.end if span.stage == "policy" and span.end is not None else span.start

    def parent(self, index: int, kind: SpanKind) -> int | None:
        """The index of the event opening ``kind``'s parent span, up the causation chain."""
        wanted = _PARENT_KIND.get(kind)
        if wanted is None:
            return None
        up, steps = self.cause[index], 0
        while up is not None and steps <= len(self.events):
            if (up, wanted) in self.anchored:
                return up
            up, steps = self.cause[up], steps + 1
        call_id = self.call_of[index]
        if wanted == "tool_call" and call_id is not None:
            # a user's decision starts a new causal chain (``tool.approved``): same call
            return self.request.get(call_id, 0)
        return 0  # the user.message: a span whose parent cannot be found hangs from the turn


def _first_error(events: Iterable[Envelope], types: frozenset[str] | None = None) -> str:
    for event in events:
        if event.type in ERROR_KINDS and (types is None or event.type in types):
            reason = _reason(event)
            return f"{event.type}: {reason}" if reason else event.type
    return ""


def turn_spans(events: Iterable[Envelope], correlation_id: str) -> list[SpanRecord]:
    """Return the spans of the turn ``correlation_id`` names, turn first, in ``seq`` order.

    ``events`` are committed events (any order, other turns' too). The turn's events run
    from its ``user.message`` to its end, as the daemon saw them when it exported the turn
    (what the correlation commits later, e.g. an async call's result, is left out). No
    ``user.message`` with that correlation gives ``[]``. A turn with no end yet is closed
    at its last event (``roost.turn.outcome`` is ``incomplete``).
    """
    selected = [e for e in in_seq_order(events) if e.correlation_id == correlation_id]
    start = next((i for i, e in enumerate(selected) if e.type == "user.message"), None)
    if start is None:
        return []
    end = next((i for i in range(start, len(selected)) if selected[i].type in TURN_END_TYPES), -1)
    turn = _Turn(selected[start:] if end < 0 else selected[start : end + 1])
    trace_id = trace_id_of(correlation_id)
    opened: dict[tuple[int, SpanKind], int] = {}
    spans: list[SpanRecord] = []
    for index, stage in turn.stages:
        kind = stage.stage
        parent = turn.parent(index, kind)
        wanted = _PARENT_KIND.get(kind)
        parent_span_id = None if parent is None or wanted is None else opened.get((parent, wanted))
        span = _span(turn, index, stage, trace_id, parent_span_id)
        opened[(index, kind)] = span.span_id
        spans.append(span)
    spans.append(_commit(turn, trace_id, spans[0].span_id))
    return spans


def _span(
    turn: _Turn, index: int, stage: StageSpan, trace_id: int, parent_span_id: int | None
) -> SpanRecord:
    kind: SpanKind = stage.stage
    event = turn.events[index]
    call_id = turn.call_of[index]
    call = turn.calls.get(call_id, []) if call_id is not None else []
    start = turn.events[stage.start]
    end = turn.end if stage.end is None else turn.events[stage.end]
    attributes = _ids(event)
    message = _KIND_PARTS[stage.stage](_Made(turn, event, end, call_id, call), attributes)
    attributes["roost.end_event_id"] = end.event_id
    attributes["roost.end_event_type"] = end.type
    start_ns = _ns(start.at)
    return SpanRecord(
        name=SPAN_NAMES[kind],
        kind=kind,
        trace_id=trace_id,
        span_id=span_id_of(event.event_id, kind),
        parent_span_id=parent_span_id,
        start_ns=start_ns,
        end_ns=max(start_ns, _ns(end.at)),
        error=bool(message),
        status_message=message,
        attributes=attributes,
    )


class _Made(NamedTuple):
    """What a stage's span is made of: its turn, its event, its end and its call's events."""

    turn: _Turn
    event: Envelope
    end: Envelope
    call_id: str | None
    call: list[Envelope]


def _turn_part(made: _Made, attributes: dict[str, AttributeValue]) -> str:
    end = made.turn.end
    attributes["roost.turn.outcome"] = end.type if end.type in TURN_END_TYPES else "incomplete"
    return _first_error([end])


def _round_part(made: _Made, attributes: dict[str, AttributeValue]) -> str:
    data = made.event.data
    attributes["roost.llm.round"] = int(data.get("round", 0) or 0)
    attributes["gen_ai.system"] = str(data.get("provider", ""))
    if isinstance(data.get("model"), str):
        attributes["gen_ai.request.model"] = data["model"]
    return _first_error([made.end])


def _call_part(made: _Made, attributes: dict[str, AttributeValue]) -> str:
    end = made.end
    outcome = end.type.removeprefix("tool.") if end.type in TERMINAL_TOOL_TYPES else "pending"
    attributes.update(
        {
            "roost.tool.name": str(made.event.data.get("name", "")),
            "roost.tool.call_id": made.call_id or "",
            "roost.tool.outcome": outcome,
        }
    )
    if end.type == "tool.failed":
        attributes["roost.tool.error_code"] = _reason(end)
    return _first_error(made.call)


def _policy_part(made: _Made, attributes: dict[str, AttributeValue]) -> str:
    event = made.event
    attributes["roost.policy.decision"] = DECISION_TYPES[event.type]
    attributes["roost.policy.reason"] = _reason(event) or "approval_required"
    attributes["roost.policy.source"] = str(event.data.get("source", "policy"))
    attributes["roost.tool.name"] = str(event.data.get("tool", ""))
    return _first_error([event])


def _approval_part(made: _Made, attributes: dict[str, AttributeValue]) -> str:
    end = made.end
    attributes["roost.approval.outcome"] = (
        end.type.removeprefix("tool.") if end.type in _APPROVAL_ENDS else "pending"
    )
    return _first_error([end], frozenset({"tool.rejected"}))


def _run_part(made: _Made, attributes: dict[str, AttributeValue]) -> str:
    event, end = made.event, made.end
    attributes["roost.tool.name"] = str(event.data.get("name", ""))
    ran = [e for e in made.call if event.seq <= e.seq <= end.seq]
    return _first_error(ran, _RUN_ERRORS)


_KIND_PARTS: Final[dict[Stage, Callable[[_Made, dict[str, AttributeValue]], str]]] = {
    "turn": _turn_part,
    "model_round": _round_part,
    "tool_call": _call_part,
    "policy": _policy_part,
    "approval": _approval_part,
    "tool_run": _run_part,
}
"""Each stage's own attributes (added to its event's ids); each returns the span's error."""


def _commit(turn: _Turn, trace_id: int, turn_span_id: int) -> SpanRecord:
    first, last = turn.events[0], turn.events[-1]
    attributes = _ids(first)
    attributes.update(
        {
            "roost.journal.first_seq": first.seq,
            "roost.journal.last_seq": last.seq,
            "roost.journal.event_count": len(turn.events),
            "roost.journal.last_hash": last.hash,
        }
    )
    start_ns = _ns(first.at)
    return SpanRecord(
        name=SPAN_NAMES["commit"],
        kind="commit",
        trace_id=trace_id,
        span_id=span_id_of(first.event_id, "commit"),
        parent_span_id=turn_span_id,
        start_ns=start_ns,
        end_ns=max(start_ns, _ns(last.at)),
        error=False,
        status_message="",
        attributes=attributes,
        marks=tuple(
            SpanMark(
                name=e.type,
                time_ns=_ns(e.at),
                attributes={"roost.seq": e.seq, "roost.event_id": e.event_id},
            )
            for e in turn.events
        ),
    )
