"""A turn's stages, from the events that open and close them: the one stage-span builder.

The incident report (``events.incidents``), its HTML page and the OpenTelemetry spans
(``runtime.telemetry.spans``) all read their stages from :func:`stage_spans`. Which
stages an event opens and closes is declared on its payload class (``facts.opens`` and
``facts.closes`` in ``events.catalog``); this module only keys them: a ``turn`` and a
``model_round`` by the event's correlation, the other stages by the event's call (its
``call_id``, else the call of the ``tool.requested`` that caused it). A turn's stages may
be open more than once at a time (two ``user.message`` of one correlation); a call's
stage opens once until it is closed. Pure: no clock, the events' order is the caller's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from events.catalog import facts_of
from events.envelope import Envelope
from events.facts import STAGES, Stage

__all__ = ["StageSpan", "StageWalk", "cause_indexes", "stage_spans"]


@dataclass
class StageSpan:
    """One stage: the index of the event that opens it and of the one that closes it."""

    stage: Stage
    """What the span stands for."""
    start: int
    """The index of its opening event in the walked events."""
    call_id: str | None
    """Its call, for a call's stage."""
    end: int | None = None
    """The index of its closing event; None while it is still open."""


@dataclass(frozen=True)
class StageWalk:
    """Every stage of the walked events, and each event's call."""

    spans: list[StageSpan]
    """In the order they were opened."""
    calls: list[str | None]
    """The call each event belongs to (by index), None for none."""
    causes: list[int | None]
    """The index of each event's cause (see :func:`cause_indexes`)."""


def cause_indexes(ordered: Sequence[Envelope]) -> list[int | None]:
    """Return, for each event of ``ordered``, the index of its cause in ``ordered``.

    The cause is the event named by its ``causation_id``; None when it has none in the
    list (a root) or names itself.
    """
    index_of: dict[str, int] = {}
    for index, event in enumerate(ordered):
        index_of.setdefault(event.event_id, index)
    parent: list[int | None] = []
    for index, event in enumerate(ordered):
        cause = index_of.get(event.causation_id) if event.causation_id is not None else None
        parent.append(None if cause == index else cause)
    return parent


def _call_of(event: Envelope) -> str | None:
    value = event.data.get("call_id")
    return value if isinstance(value, str) else None


def stage_spans(events: Sequence[Envelope]) -> StageWalk:
    """Walk ``events`` (in ``seq`` order) once and return every stage, closed or open."""
    causes = cause_indexes(events)
    calls: list[str | None] = []
    spans: list[StageSpan] = []
    open_: dict[tuple[Stage, str], list[StageSpan]] = {}
    for index, event in enumerate(events):
        call_id, cause = _call_of(event), causes[index]
        if call_id is None and cause is not None and events[cause].type == "tool.requested":
            call_id = calls[cause]
        calls.append(call_id)
        facts = facts_of(event.type)
        for stage in facts.closes:
            key = call_id if STAGES[stage].per_call else event.correlation_id
            for span in open_.pop((stage, key), []) if key is not None else []:
                span.end = index
        for stage in facts.opens:
            per_call = STAGES[stage].per_call
            key = call_id if per_call else event.correlation_id
            if key is None or (per_call and (stage, key) in open_):
                continue
            span = StageSpan(stage, index, call_id if per_call else None)
            open_.setdefault((stage, key), []).append(span)
            spans.append(span)
    return StageWalk(spans, calls, causes)
