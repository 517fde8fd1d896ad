"""The model's context window: which of a conversation's messages the model is sent.

A conversation's history grows with every turn; what its model is sent, what the live
conversation keeps in memory and what its snapshot holds must not. :class:`ContextWindow`
keeps the most recent messages of :class:`events.projections.LlmContextFold` within a
budget of characters (the project option ``context_window_chars``) and drops the oldest,
whole turns at a time:

- the window starts at a ``user`` message, never inside a turn's rounds, so a tool result
  is never sent without the assistant message that asked for it (a user message that came
  while a call was still unanswered is no place to start: the answer would follow it);
- a round still open is never dropped (its message still changes);
- when even the latest turn is over the budget, the window is that turn alone.

Trimming runs after every event, the same way on the live conversation, on a replay and on
a snapshot restored, so what is kept is a function of the events and the budget alone.
The journal keeps everything; only what the model is sent is windowed.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

from events.codecs import canonical_json
from events.envelope import Envelope

__all__ = ["CONTEXT_WINDOW_CHARS", "ContextWindow", "context_window_chars", "message_chars"]

CONTEXT_WINDOW_CHARS: Final = 32_000
"""The default budget (``context_window_chars``): about 8,000 tokens at ~4 characters a
token (``docs/configuration.md`` says why)."""


def context_window_chars(events: Iterable[Envelope]) -> int:
    """The budget of the last ``project.started`` (its ``options.context_window_chars``).

    The default when there is none, or its options do not hold a non-negative integer
    (as ``orchestration_enabled`` reads ``orchestration``).
    """
    budget = CONTEXT_WINDOW_CHARS
    for event in sorted(events, key=lambda e: e.seq):
        if event.type == "project.started" and event.conversation_id is None:
            options = event.data.get("options")
            found = options.get("context_window_chars") if isinstance(options, dict) else None
            if isinstance(found, int) and not isinstance(found, bool) and found >= 0:
                budget = found
            else:
                budget = CONTEXT_WINDOW_CHARS
    return budget


def message_chars(message: dict[str, Any]) -> int:
    """What ``message`` counts against the budget: its text, its calls' names and arguments."""
    content = message.get("content")
    size = len(content) if isinstance(content, str) else 0
    for call in message.get("tool_calls") or ():
        size += len(call["name"]) + len(canonical_json(call["args"]))
    if message.get("role") == "tool":
        size += len(str(message.get("name", "")))
    return size


class ContextWindow:
    """The kept messages, in order, each at its absolute position in the whole context.

    Positions count every message the conversation ever had (:attr:`start` of them are
    gone), so a position held elsewhere (an open round's, a call's) stays valid.
    """

    def __init__(self, budget: int) -> None:
        self.budget = budget
        """Characters kept at most (0: no window, everything is kept)."""
        self.start = 0
        """The position of the first kept message (how many were dropped)."""
        self.messages: list[dict[str, Any]] = []
        """The kept messages (the fold's own objects)."""
        self.cuts: list[int] = []
        """Positions after :attr:`start` where the window may start, ascending."""
        self._sizes: list[int] = []
        self._total = 0

    @property
    def end(self) -> int:
        """The position the next message will have."""
        return self.start + len(self.messages)

    @property
    def chars(self) -> int:
        """What the kept messages count against the budget."""
        return self._total

    def append(self, message: dict[str, Any], *, cut: bool) -> int:
        """Keep ``message`` (a ``user`` message is a ``cut``); return its position."""
        at = self.end
        size = message_chars(message)
        self.messages.append(message)
        self._sizes.append(size)
        self._total += size
        if cut:
            self.cuts.append(at)
        return at

    def changed(self, at: int) -> None:
        """The message at position ``at`` changed (an open round's text or calls)."""
        i = at - self.start
        size = message_chars(self.messages[i])
        self._total += size - self._sizes[i]
        self._sizes[i] = size

    def join(self, since: int) -> None:
        """The last message belongs with the one at ``since``: no cut between them."""
        cuts = self.cuts
        while cuts and cuts[-1] > since:
            cuts.pop()

    def trim(self, settled: int) -> list[dict[str, Any]]:
        """Drop the oldest whole turns while over the budget; return what was dropped.

        The window starts at the first cut (at or before ``settled``, the first message
        that may still change) from which the rest fits the budget, or at the last such
        cut when none does.
        """
        if not self.budget or self._total <= self.budget:
            return []
        total, at, to = self._total, self.start, -1
        for cut in self.cuts:
            if cut > settled:
                break
            total -= sum(self._sizes[at - self.start : cut - self.start])
            at = to = cut
            if total <= self.budget:
                break
        if to < 0:
            return []
        count = to - self.start
        dropped = self.messages[:count]
        del self.messages[:count]
        del self._sizes[:count]
        self.start, self._total = to, total
        self.cuts = [c for c in self.cuts if c > to]
        return dropped

    def restore(self, start: int, messages: list[dict[str, Any]], cuts: list[int]) -> None:
        """Put back what a snapshot kept (the sizes are counted again)."""
        self.start, self.messages, self.cuts = start, messages, cuts
        self._sizes = [message_chars(m) for m in messages]
        self._total = sum(self._sizes)
