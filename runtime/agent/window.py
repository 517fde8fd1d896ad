"""What a model request carries: the context window, tool results wrapped, built once.

The conversation's :class:`events.projections.LlmContextFold` keeps the context window
(:mod:`events.context_window`); :class:`SentContext` turns it into the request's messages.
The settled part (messages that no longer change) is built once and kept, so a request
costs the open rounds' messages and a list of references, not a copy of the window; what
leaves the window leaves the kept part too. A context replaced (a snapshot restored)
starts it again.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Any

from events.projections import LlmContextFold

__all__ = ["SentContext", "as_data"]


def as_data(message: dict[str, Any], wrapped: dict[str, tuple[str, str]]) -> dict[str, Any]:
    """Hand a tool result to the model inside a per-call nonce-delimited data block.

    ``wrapped`` keeps each call's block (call id → (content, block)), so a result keeps
    its nonce in every later request: the prompt's prefix stays the same from round to
    round (provider prompt caches) and the history is not wrapped again each time.
    """
    content = message.get("content")
    if message.get("role") != "tool" or not isinstance(content, str):
        return message
    call_id = str(message.get("tool_call_id", ""))
    hit = wrapped.get(call_id)
    if hit is None or hit[0] != content:
        from runtime.execution.results import wrap_for_model  # noqa: PLC0415 - runtime-only helper

        hit = (content, wrap_for_model(call_id, content))
        wrapped[call_id] = hit
    return {**message, "content": hit[1]}


class SentContext:
    """The messages of a conversation's model requests, the settled ones kept built."""

    def __init__(self) -> None:
        self.wrapped: dict[str, tuple[str, str]] = {}
        """The blocks of the tool results not yet settled (:func:`as_data`)."""
        self._prefix: list[dict[str, Any]] = []
        self._at: list[int] = []
        self._end = 0
        self._of: LlmContextFold | None = None

    def messages(self, context: LlmContextFold) -> list[dict[str, Any]]:
        """The window of ``context`` as the model gets it, tool results wrapped."""
        if self._of is not context:
            self._prefix, self._at, self._end, self._of = [], [], 0, context
        first = context.window.start
        if self._at and self._at[0] < first:  # left the window
            gone = bisect_left(self._at, first)
            del self._prefix[:gone], self._at[:gone]
        self._end = max(self._end, first)
        settled = context.settled()
        for at in range(self._end, settled):
            for message in context.messages(at, at + 1):
                self._prefix.append(as_data(message, self.wrapped))
                self._at.append(at)
                if message.get("role") == "tool":
                    self.wrapped.pop(str(message.get("tool_call_id", "")), None)
        self._end = max(self._end, settled)
        tail = context.messages(self._end)
        if len(self.wrapped) > len(tail):  # results that left the window before they settled
            kept = {str(m.get("tool_call_id", "")) for m in tail}
            self.wrapped = {k: v for k, v in self.wrapped.items() if k in kept}
        return [*self._prefix, *(as_data(m, self.wrapped) for m in tail)]
