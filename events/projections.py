"""Pure projections of a project's events: timeline, pending calls, model context, status.

Every function is a fold over committed envelopes that sorts its input by ``seq`` itself
and returns plain dicts and lists, so ``canonical_json`` of the result is byte-identical
for the same events. Conversation-scoped functions keep the events whose
``conversation_id`` is the conversation's. Each projection's rules: ``docs/projections.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Final

import msgspec

from events import catalog as ev
from events.catalog import PAYLOAD_TYPES, decode_data, type_names
from events.codecs import canonical_json
from events.context_window import CONTEXT_WINDOW_CHARS, ContextWindow, context_window_chars
from events.conversation_fold import TURN_END_TYPES, ConversationFold
from events.envelope import Envelope
from events.facts import Decision
from events.view_types import Diagnostics, PendingToolCall, TimelineEvent

__all__ = [
    "DECISION_TYPES",
    "PROJECTION_KEYS",
    "TURN_END_TYPES",
    "LlmContextFold",
    "conversation_events",
    "conversation_status",
    "diagnostics",
    "fold_status",
    "get_projection",
    "in_seq_order",
    "llm_context",
    "orchestration_enabled",
    "pending_tool_calls",
    "timeline",
]

PROJECTION_KEYS: Final[tuple[str, ...]] = (
    "diagnostics",
    "llm_context",
    "pending_tool_calls",
    "timeline",
)
"""The projection names ``get_projection`` accepts, sorted."""

DECISION_TYPES: Final[dict[str, Decision]] = {
    name: cls.facts.decision for name, cls in PAYLOAD_TYPES.items() if cls.facts.decision
}
"""Event types that record a policy decision, mapped to the decision they record (their
facts' ``decision``: ``policy.allowed``, ``policy.denied``, ``tool.approval_requested``)."""


# --- ordering and selection -------------------------------------------------------------


def in_seq_order(events: Iterable[Envelope]) -> list[Envelope]:
    """Return ``events`` sorted by ``seq`` (ties, which a sound journal never has, by id)."""
    return sorted(events, key=lambda event: (event.seq, event.event_id))


def conversation_events(events: Iterable[Envelope], conversation_id: str) -> list[Envelope]:
    """Return the conversation's events and signals, in ``seq`` order."""
    return [event for event in in_seq_order(events) if event.conversation_id == conversation_id]


_STARTS: Final = type_names(ev.ProjectStarted)
_CONTEXT_READS: Final = type_names(
    ev.UserMessage,
    ev.LlmStarted,
    ev.AssistantMessage,
    ev.ToolRequested,
    ev.ToolCompleted,
    ev.ToolFailed,
    ev.ToolCancelled,
    ev.LlmCompleted,
    ev.LlmFailed,
    ev.BudgetExceeded,
    ev.ConversationCancel,
)


def orchestration_enabled(events: Iterable[Envelope]) -> bool:
    """Return whether the model loop runs: the last ``project.started``'s ``orchestration``.

    True when there is no ``project.started`` or its options do not say ``false``.
    """
    enabled = True
    for event in in_seq_order(events):
        if event.type not in _STARTS:
            continue
        match decode_data(event.type, event.data):
            case ev.ProjectStarted(options=options):
                enabled = options.get("orchestration") is not False
    return enabled


def _text(value: Any) -> str:
    """Return ``value`` as text: strings as they are, anything else as canonical JSON."""
    return value if isinstance(value, str) else canonical_json(value).decode()


# --- timeline and pending calls ---------------------------------------------------------


def timeline(events: Iterable[Envelope], conversation_id: str) -> list[TimelineEvent]:
    """Return the conversation's events (signals included) in ``seq`` order, as dicts."""
    return [msgspec.to_builtins(event) for event in conversation_events(events, conversation_id)]


def pending_tool_calls(events: Iterable[Envelope], conversation_id: str) -> list[PendingToolCall]:
    """Return the calls requested and not yet closed by a terminal event.

    Each is ``{call_id, name, args, run_mode, status, requested_seq}``, sorted by
    ``requested_seq``. ``status`` is ``awaiting_approval`` from ``tool.approval_requested``
    until a decision (``tool.approved``, ``tool.rejected``, ``policy.*``) or
    ``tool.started``, and ``running`` otherwise (a rejected call stays ``running`` until the
    runtime writes its terminal ``tool.failed``). A terminal event closes its call whatever
    its position; the first ``tool.requested`` of a ``call_id`` is the one kept. The fold is
    :class:`events.conversation_fold.ConversationFold`, the live conversation's own.
    """
    return ConversationFold.of(events, conversation_id).pending_calls()


# --- the model's context ----------------------------------------------------------------


def _tool_message(terminal: ev.ToolCompleted | ev.ToolFailed | ev.ToolCancelled) -> dict[str, Any]:
    content: Any
    match terminal:
        case ev.ToolCompleted(result=result):
            status, content, code = "ok", result, None
        case ev.ToolFailed(reason=reason):
            status, content, code = "error", reason, reason.get("code")
        case ev.ToolCancelled(reason=reason):
            status, content, code = "error", {"code": reason}, reason
    return {
        "role": "tool",
        "tool_call_id": terminal.call_id,
        "name": terminal.name,
        "status": status,
        "content": canonical_json(content).decode(),
        "code": code,
    }


class LlmContextFold:
    """The fold behind :func:`llm_context`, fed one event at a time, in ``seq`` order.

    A conversation keeps one and feeds it each committed event, so building a model
    request costs the new events, not the whole history (the history grows with every
    turn). It keeps only the context window (:mod:`events.context_window`): the latest
    messages within ``window_chars`` characters (0: every message). Positions
    (:meth:`settled`, :meth:`messages`) count every message the conversation ever had.
    :meth:`messages` returns copies: callers may change them freely.
    """

    def __init__(self, window_chars: int = CONTEXT_WINDOW_CHARS) -> None:
        self.window = ContextWindow(window_chars)
        """The kept messages."""
        self._open_rounds: dict[str, dict[str, Any]] = {}
        self._round_at: dict[str, int] = {}
        self._model_calls: dict[str, int] = {}
        """Each call the model asked for (in the window) and its round's position."""
        self._answered: set[str] = set()
        self.last_seq = 0
        """The ``seq`` of the last event applied."""

    @classmethod
    def of(
        cls,
        events: Iterable[Envelope],
        conversation_id: str,
        *,
        window_chars: int = CONTEXT_WINDOW_CHARS,
    ) -> LlmContextFold:
        """The fold of a conversation's events (in any order; they are sorted by ``seq``)."""
        fold = cls(window_chars)
        for event in conversation_events(events, conversation_id):
            fold.apply(event)
        return fold

    def apply(self, event: Envelope) -> None:
        """Fold one event (of the conversation, after every event applied before)."""
        self.last_seq = event.seq
        if event.type not in _CONTEXT_READS:
            return
        correlation = event.correlation_id
        window, open_rounds = self.window, self._open_rounds
        match decode_data(event.type, event.data):
            case ev.UserMessage(content=content):
                window.append({"role": "user", "content": _text(content)}, cut=True)
            case ev.LlmStarted():
                message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": []}
                open_rounds[correlation] = message
                self._round_at[correlation] = window.append(message, cut=False)
            case ev.AssistantMessage(content=content):
                text = _text(content)
                current = open_rounds.get(correlation)
                if current is None:
                    message = {"role": "assistant", "content": text, "tool_calls": []}
                    window.append(message, cut=False)
                else:
                    current["content"] = (
                        text if current["content"] is None else current["content"] + "\n" + text
                    )
                    window.changed(self._round_at[correlation])
            case ev.ToolRequested(call_id=call_id, name=name, args=args):
                current = open_rounds.get(correlation)
                if current is not None and call_id not in self._model_calls:
                    self._model_calls[call_id] = self._round_at[correlation]
                    current["tool_calls"].append(
                        {"id": call_id, "name": name, "args": msgspec.to_builtins(args)}
                    )
                    window.changed(self._round_at[correlation])
            case ev.ToolCompleted() | ev.ToolFailed() | ev.ToolCancelled() as terminal:
                call_id = terminal.call_id
                asked_at = self._model_calls.get(call_id)
                if asked_at is not None and call_id not in self._answered:
                    self._answered.add(call_id)
                    window.append(_tool_message(terminal), cut=False)
                    window.join(asked_at)
            case ev.LlmCompleted() | ev.LlmFailed() | ev.BudgetExceeded():
                open_rounds.pop(correlation, None)
                self._round_at.pop(correlation, None)
            case ev.ConversationCancel():
                open_rounds.clear()
                self._round_at.clear()
        for dropped in window.trim(self.settled()):
            for call in dropped.get("tool_calls") or ():
                self._model_calls.pop(call["id"], None)
                self._answered.discard(call["id"])

    def settled(self) -> int:
        """The position of the first message that may still change (the first open round's).

        Only an open round's message changes (its text, its calls); every message before
        it is as it will stay, so a caller may keep what it built from them.
        """
        return min(self._round_at.values(), default=self.window.end)

    def messages(self, start: int = 0, stop: int | None = None) -> list[dict[str, Any]]:
        """The context in the window (rounds with neither text nor calls left out), as copies.

        With ``start``/``stop``: only what the positions ``[start:stop]`` give (those
        before the window, dropped, give nothing).
        """
        window = self.window
        first = max(start, window.start) - window.start
        last = None if stop is None else max(stop - window.start, 0)
        out: list[dict[str, Any]] = []
        for message in window.messages[first:last]:
            if message["role"] != "assistant":
                out.append(dict(message))
            elif message["content"] is not None or message["tool_calls"]:
                out.append({**message, "tool_calls": list(message["tool_calls"])})
        return out


def llm_context(events: Iterable[Envelope], conversation_id: str) -> list[dict[str, Any]]:
    """Return the messages the model sees, in the OpenAI chat style.

    ``{"role": "user", "content"}`` per ``user.message``; one
    ``{"role": "assistant", "content", "tool_calls": [{id, name, args}]}`` per model round
    (the ``assistant.message`` text and the ``tool.requested`` of the round's correlation
    between its ``llm.started`` and the next one, or the end of the turn); and one
    ``{"role": "tool", "tool_call_id", "name", "status", "content", "code"}`` per terminal
    event of a call the model asked for. A round with neither text nor calls is left out;
    calls requested outside a model round (``run_tool``) are not part of the context. Only
    the context window is: the latest turns within the last ``project.started``'s
    ``context_window_chars`` (:mod:`events.context_window`).
    """
    events = list(events)
    return LlmContextFold.of(
        events, conversation_id, window_chars=context_window_chars(events)
    ).messages()


# --- status and diagnostics -------------------------------------------------------------


def fold_status(ordered: list[Envelope], *, orchestration: bool = True) -> str:
    """Return the status (see ``conversation_status``) from one conversation's own events.

    ``ordered`` must already be in ``seq`` order; ``orchestration`` says whether the model
    loop runs (``orchestration_enabled``).
    """
    fold = ConversationFold(orchestration=orchestration)
    for event in ordered:
        fold.apply(event)
    return fold.status()


def _fold(events: Iterable[Envelope], conversation_id: str) -> ConversationFold:
    ordered = in_seq_order(events)
    return ConversationFold.of(
        ordered, conversation_id, orchestration=orchestration_enabled(ordered)
    )


def conversation_status(events: Iterable[Envelope], conversation_id: str) -> str:
    """Return ``idle``, ``running``, ``awaiting_approval`` or ``cancelled``.

    ``cancelled`` from ``conversation.cancel`` until ``conversation.resume``. Otherwise
    ``awaiting_approval`` when there are pending calls and every one awaits approval;
    ``running`` when a call is pending or a turn is open (a ``user.message`` whose
    correlation has no ``llm.completed``, ``llm.failed`` or ``budget.exceeded`` yet; a cancel
    or a stop closes every open turn; with ``orchestration`` off no turn opens); else ``idle``.
    The fold is :class:`events.conversation_fold.ConversationFold`, the live one's own.
    """
    return _fold(events, conversation_id).status()


def diagnostics(events: Iterable[Envelope], conversation_id: str) -> Diagnostics:
    """Return ``{event_count, pending_tool_call_count, last_event_type, status}``."""
    return _fold(events, conversation_id).diagnostics()


# --- dispatch ---------------------------------------------------------------------------

_PROJECTIONS: Final[dict[str, Callable[[Iterable[Envelope], str], Any]]] = {
    "diagnostics": diagnostics,
    "llm_context": llm_context,
    "pending_tool_calls": pending_tool_calls,
    "timeline": timeline,
}


def get_projection(events: Iterable[Envelope], conversation_id: str, key: str) -> Any:
    """Return the projection named ``key`` (one of ``PROJECTION_KEYS``) for a conversation.

    Raises ``KeyError`` naming the valid keys when ``key`` is not one of them.
    """
    try:
        projection = _PROJECTIONS[key]
    except KeyError:
        raise KeyError(
            f"unknown projection {key!r}; expected one of: {', '.join(PROJECTION_KEYS)}"
        ) from None
    return projection(events, conversation_id)
