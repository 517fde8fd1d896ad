"""What a finished turn adds to the metrics, read off its spans (pure, no SDK).

- ``roost.turns`` (counter, ``{turn}``) and ``roost.turn.duration`` (histogram, ``ms``):
  ``roost.project_id``, ``roost.turn.outcome``.
- ``roost.tool.outcomes`` (counter, ``{call}``): ``roost.tool.name``, ``roost.tool.outcome``.
- ``roost.policy.denials`` (counter, ``{decision}``): ``roost.tool.name``,
  ``roost.policy.reason``.
- ``roost.actor.restarts`` (counter, ``{restart}``): ``roost.actor``, the actor's kind
  (``conversation``, ``toolrunner``...).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import msgspec

from events.envelope import Envelope
from runtime.telemetry.spans import AttributeValue, SpanRecord

__all__ = ["METRIC_NAMES", "TurnMeasures", "restarted_actor", "turn_measures"]

METRIC_NAMES: Final[tuple[str, ...]] = (
    "roost.actor.restarts",
    "roost.policy.denials",
    "roost.tool.outcomes",
    "roost.turn.duration",
    "roost.turns",
)
"""The metrics Roost exports, sorted."""

_NS_PER_MS: Final = 1_000_000


class TurnMeasures(msgspec.Struct, frozen=True, kw_only=True):
    """One finished turn's contribution to the metrics."""

    turn: dict[str, AttributeValue]
    """Attributes of ``roost.turns`` and ``roost.turn.duration``."""
    duration_ms: float
    """The turn span's length."""
    tool_outcomes: list[dict[str, AttributeValue]]
    """Attributes of one ``roost.tool.outcomes`` per call."""
    denials: list[dict[str, AttributeValue]]
    """Attributes of one ``roost.policy.denials`` per denial."""


def _pick(span: SpanRecord, *keys: str) -> dict[str, AttributeValue]:
    return {key: span.attributes.get(key, "") for key in keys}


def turn_measures(spans: Sequence[SpanRecord]) -> TurnMeasures | None:
    """Return what the turn of ``spans`` (from ``turn_spans``) adds; None without a turn."""
    turn = next((span for span in spans if span.kind == "turn"), None)
    if turn is None:
        return None
    return TurnMeasures(
        turn=_pick(turn, "roost.project_id", "roost.turn.outcome"),
        duration_ms=(turn.end_ns - turn.start_ns) / _NS_PER_MS,
        tool_outcomes=[
            _pick(span, "roost.tool.name", "roost.tool.outcome")
            for span in spans
            if span.kind == "tool_call"
        ],
        denials=[
            _pick(span, "roost.tool.name", "roost.policy.reason")
            for span in spans
            if span.kind == "policy" and span.attributes.get("roost.policy.decision") == "deny"
        ],
    )


def restarted_actor(event: Envelope) -> str | None:
    """The kind of actor an ``actor.restarted`` restarted; None for other events.

    ``conversation:c1`` gives ``conversation``.
    """
    if event.type != "actor.restarted":
        return None
    actor = event.data.get("actor")
    return actor.partition(":")[0] if isinstance(actor, str) and actor else "unknown"
