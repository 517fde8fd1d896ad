"""The mutable state the agent loop folds from a conversation's events.

Pending calls, open turns and the status are not here: they are
:class:`events.conversation_fold.ConversationFold`'s, shared with the projections.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["TurnState"]


@dataclass
class TurnState:
    """The turn in progress: one inbound message and its model rounds."""

    correlation_id: str
    user_event_id: str | None
    started_at: str
    directives: dict[str, Any] | None = None
    round: int = 0
    round_event_id: str | None = None
    last_event_id: str | None = None
    model_done: bool = False
    tool_call_count: int = 0
    usage: dict[str, int] = field(default_factory=dict)
