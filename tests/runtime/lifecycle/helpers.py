"""Fixed clocks, ids and envelopes for the lifecycle cores' unit tests."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime
from typing import Any

from events.envelope import Envelope
from runtime.lifecycle import effects as fx

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
NOW_AT = "2026-01-02T03:04:05.000Z"


class Clock:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def ids() -> Any:
    """``corr-1``, ``corr-2``, ..."""
    counter = itertools.count(1)
    return lambda: f"corr-{next(counter)}"


def envelope(
    type_: str, project_id: str, data: dict[str, Any], conversation_id: str | None = None
) -> Envelope:
    return Envelope(
        seq=1,
        stream_version=1,
        event_id="e-1",
        type=type_,
        at=NOW_AT,
        project_id=project_id,
        conversation_id=conversation_id,
        correlation_id="corr-0",
        causation_id=None,
        data=data,
        hash="h",
        prev_hash="p",
    )


def of(effects: list[fx.Effect], kind: type[Any]) -> list[Any]:
    """The effects of one kind, in order."""
    return [e for e in effects if isinstance(e, kind)]


def appended(effects: list[fx.Effect]) -> list[tuple[str, dict[str, Any]]]:
    """``(type, data)`` of every event the effects append, in order."""
    return [(e.type, dict(e.data)) for a in of(effects, fx.AppendThen) for e in a.events]


def error_of(effects: list[fx.Effect]) -> dict[str, Any]:
    """The wire error of the one error reply among ``effects``."""
    (reply,) = of(effects, fx.Answer)
    assert reply.ok is False
    assert reply.error is not None
    return reply.error
