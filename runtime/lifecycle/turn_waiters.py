"""The clients a Project knows to wait for a turn of one of its conversations.

A client that sends ``send_event`` with ``wait`` is remembered until its wait would have
timed out. If the conversation dies, its replacement is spawned with these waiters and
answers them when it has finished the turn (the daemon ignores an answer whose request is
over).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from runtime.wire.ops import Call, waits_for_turn

__all__ = ["TurnWaiters"]


class TurnWaiters:
    """Conversation → correlation → (the client waiting for that turn, its wait deadline)."""

    def __init__(self, monotonic: Callable[[], float]) -> None:
        self.monotonic = monotonic
        self.by_conversation: dict[str, dict[str, tuple[Any, float]]] = {}

    def note(self, call: Call[Any], reply_to: Any) -> None:
        """Remember ``reply_to`` if ``call`` waits for a turn; forget waits already over."""
        if not waits_for_turn(call):
            return
        correlation = call.correlation()
        now = self.monotonic()
        waits = self.by_conversation.setdefault(call.args.conversation_id, {})
        for key in [k for k, (_, until) in waits.items() if until < now]:
            del waits[key]
        waits[correlation] = (reply_to, now + call.args.wait_timeout_s)

    def of(self, conversation_id: str) -> list[tuple[str, Any]]:
        """``(correlation_id, reply_to)`` of the clients still waiting on a turn there."""
        now = self.monotonic()
        waits = self.by_conversation.get(conversation_id, {})
        return [(corr, to) for corr, (to, until) in sorted(waits.items()) if until >= now]
