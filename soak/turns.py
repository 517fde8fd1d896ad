"""The turns a soak workload sends, and what became of them (``soak.scenarios`` sends them)."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import TypedDict

import msgspec

__all__ = ["Turn", "TurnAck", "TurnResult", "WorkloadResult", "chains", "plan_turns", "turn_for"]


class TurnAck(TypedDict):
    """The daemon's ack of a turn's ``user.message``, as it answered it."""

    seq: object
    event_id: object
    correlation_id: object


class Turn(msgspec.Struct, frozen=True, kw_only=True):
    """One ``user.message`` to send."""

    project_id: str
    """The project."""
    conversation_id: str
    """The conversation."""
    index: int
    """Its position in the conversation (0-based)."""
    correlation_id: str
    """Unique per turn (integrity checks count inbound messages per correlation)."""
    key: str
    """Idempotency key: a re-send after ``overloaded`` is never appended twice."""


class TurnResult(msgspec.Struct, frozen=True, kw_only=True):
    """What happened to one turn."""

    turn: Turn
    """The turn."""
    ok: bool
    """The turn finished (ack received)."""
    latency_ms: float
    """From the first send to the answer (backoff included)."""
    ack: TurnAck | None = None
    """``{seq, event_id, correlation_id}`` when ok."""
    error_code: str | None = None
    """The error's code when not ok."""
    error_message: str | None = None
    """The error's message when not ok."""
    overloaded: int = 0
    """``overloaded`` answers before it got through."""
    refused: int = 0
    """Connections refused (listen backlog full) before it got through."""
    finished_s: float = 0.0
    """When it ended, in seconds since the workload started."""


class WorkloadResult(msgspec.Struct, frozen=True, kw_only=True):
    """All turns, and the run's timing and back-pressure figures (none yet: the defaults)."""

    results: list[TurnResult] = []
    """One per turn issued."""
    elapsed_s: float = 0.0
    """From the first send to the last answer."""
    stalled: bool = False
    """No turn finished for the stall period, so the workload stopped issuing turns."""
    overloaded: int = 0
    """``overloaded`` answers in total."""
    refused: int = 0
    """Connections refused because the daemon's listen backlog was full."""
    onset_inflight: int | None = None
    """Turns in flight when back-pressure (either kind) first showed."""
    max_inflight: int = 0
    """Most turns in flight at once."""
    start_ms: list[float] = []
    """``start_conversations``: each successful ``start_conversation``'s latency."""


def plan_turns(
    conversations: Sequence[tuple[str, str]], per_conversation: int, run_id: str
) -> list[Turn]:
    """The turns of a run, round-robin: turn 0 of every conversation, then turn 1, ..."""
    return [
        turn_for(project_id, conversation_id, index, run_id)
        for index in range(per_conversation)
        for project_id, conversation_id in conversations
    ]


def turn_for(project_id: str, conversation_id: str, index: int, run_id: str) -> Turn:
    """Turn ``index`` of a conversation (its correlation id is its idempotency key)."""
    correlation = f"soak-{run_id}-{project_id}-{conversation_id}-{index}"
    return Turn(
        project_id=project_id,
        conversation_id=conversation_id,
        index=index,
        correlation_id=correlation,
        key=correlation,
    )


def chains(turns: Sequence[Turn]) -> list[deque[Turn]]:
    """Group turns by conversation, keeping the order conversations first appear in."""
    chains: dict[tuple[str, str], deque[Turn]] = {}
    for turn in turns:
        chains.setdefault((turn.project_id, turn.conversation_id), deque()).append(turn)
    return list(chains.values())
