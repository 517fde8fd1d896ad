"""One-line summaries of events: what an operator reads next to an event in a report.

``describe_event`` gives the short text of the report's causal chain and problem lists
(and of ``project events``); ``clip`` and ``cut_at_word`` are how such text is cut. Pure:
the same input gives the same text. ``events.report`` re-exports them.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from typing import Any, Final

from events.codecs import canonical_json

__all__ = ["SUMMARY_MAX_CHARS", "clip", "cut_at_word", "describe_event", "plain", "quote"]

SUMMARY_MAX_CHARS: Final = 160
"""Longest quoted value (message text, arguments) shown in a one-line summary."""


_LIMIT: ContextVar[int | None] = ContextVar("summary_limit", default=SUMMARY_MAX_CHARS)


def clip(text: str, limit: int | None = None) -> str:
    """Return ``text`` cut to ``limit`` characters, ending in an ellipsis when cut.

    Without ``limit``, the one :func:`describe_event` was given (None: never cut).
    """
    limit = _LIMIT.get() if limit is None else limit
    return text if limit is None or len(text) <= limit else text[: limit - 1] + "…"


def cut_at_word(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters at a word boundary, with an ellipsis.

    The cut falls after the last space within the limit (or mid-word when the text has no
    space in its second half), so a message never ends in half a word.
    """
    if len(text) <= limit:
        return text
    head = text[: limit - 1]
    space = head.rfind(" ")
    if space >= limit // 2:
        head = head[:space]
    return head.rstrip() + "…"


def _quote(value: Any) -> str:
    """Return ``value`` as clipped JSON: strings quoted, newlines and quotes escaped."""
    return clip(canonical_json(value).decode())


def _plain(value: Any) -> str:
    return value if isinstance(value, str) else canonical_json(value).decode()


def _call(data: dict[str, Any]) -> str:
    name, call_id = data.get("name") or data.get("tool"), data.get("call_id")
    return " ".join(_plain(part) for part in (name, call_id) if part is not None)


def _reason_code(reason: Any) -> str:
    if isinstance(reason, dict) and "code" in reason:
        return _plain(reason["code"])
    return _plain(reason)


def _suffix(value: Any, template: str) -> str:
    return template.format(_plain(value)) if value is not None else ""


def _message(data: dict[str, Any]) -> str:
    return _quote(data.get("content", ""))


def _llm_started(data: dict[str, Any]) -> str:
    provider = _plain(data.get("provider", "?"))
    model = data.get("model")
    where = provider if model is None else f"{provider}/{_plain(model)}"
    return f"round {_plain(data.get('round', 1))} ({where})"


def _requested(data: dict[str, Any]) -> str:
    return f"{_call(data)} {_quote(data.get('args', {}))}"


def _approval(data: dict[str, Any]) -> str:
    return _plain(data.get("call_id", "?")) + _suffix(data.get("reason"), ": {}")


def _completed(data: dict[str, Any]) -> str:
    return f"{_call(data)} ok in {_plain(data.get('duration_ms', 0))} ms"


def _failed(data: dict[str, Any]) -> str:
    return f"{_call(data)}: {_reason_code(data.get('reason', {}))}"


def _cancelled(data: dict[str, Any]) -> str:
    return f"{_call(data)}: {_plain(data.get('reason', 'conversation_cancelled'))}"


def _llm_completed(data: dict[str, Any]) -> str:
    finish = _plain(data.get("finish_reason", "stop"))
    return f"{finish}, {_plain(data.get('tool_call_count', 0))} tool call(s)"


def _budget(data: dict[str, Any]) -> str:
    used, limit = _plain(data.get("used", "?")), _plain(data.get("limit", "?"))
    return f"{_plain(data.get('budget', '?'))} used {used} of {limit}"


def _policy(data: dict[str, Any]) -> str:
    tool = _plain(data.get("tool", "?"))
    call = _suffix(data.get("call_id"), " {}")
    reason, source = _plain(data.get("reason", "?")), _plain(data.get("source", "policy"))
    return f"{tool}{call}: {reason} (source {source})"


def _timeout(data: dict[str, Any]) -> str:
    tool = _suffix(data.get("tool"), "{} ")
    call, count = _plain(data.get("call_id", "?")), _plain(data.get("timeout_count", 1))
    return f"{tool}{call} (timeout #{count})"


def _actor(data: dict[str, Any]) -> str:
    actor, reason = _plain(data.get("actor", "?")), _plain(data.get("reason", "?"))
    return f"{actor}: {reason} (restart count {_plain(data.get('restart_count', 0))})"


def _reason_only(data: dict[str, Any]) -> str:
    return _plain(data.get("reason", "?"))


def _llm_failed(data: dict[str, Any]) -> str:
    message = data.get("message")
    return clip(_reason_only(data) + (f": {_plain(message)}" if message else ""))


def _llm_retried(data: dict[str, Any]) -> str:
    status = _suffix(data.get("status"), " (HTTP {})")
    after = _suffix(data.get("retry_after_ms"), ", Retry-After {} ms")
    wait = f"waited {_plain(data.get('delay_ms', 0))} ms{after}"
    attempt = _plain(data.get("attempt", 1))
    message = _suffix(data.get("message") or None, ": {}")
    return clip(f"attempt {attempt} {_reason_only(data)}{status}, {wait}{message}")


def _breaker(data: dict[str, Any]) -> str:
    provider, state = _plain(data.get("provider", "?")), _plain(data.get("state", "?"))
    failures = _plain(data.get("consecutive_failures", 0))
    threshold = _plain(data.get("failure_threshold", 0))
    last = _suffix(data.get("last_error") or None, "; last error {}")
    previous = _plain(data.get("previous", "?"))
    return clip(f"{provider} {previous} → {state} ({failures}/{threshold} failures){last}")


def _a2a_task(data: dict[str, Any]) -> str:
    agent, task = _plain(data.get("agent", "?")), _plain(data.get("task_id", "?"))
    detail = _suffix(data.get("detail") or None, " ({})")
    return f"{agent} task {task}: {_plain(data.get('state', '?'))}{detail}"


def _generic(data: dict[str, Any]) -> str:
    """Return the payload's set fields as sorted ``key=value`` pairs (empty values left out)."""
    pairs = [
        f"{key}={_plain(value)}"
        for key, value in sorted(data.items())
        if value is not None and value not in ([], {})
    ]
    return clip(" ".join(pairs))


_DESCRIBERS: Final[dict[str, Callable[[dict[str, Any]], str]]] = {
    "user.message": _message,
    "assistant.delta": _message,
    "assistant.message": _message,
    "llm.started": _llm_started,
    "tool.requested": _requested,
    "tool.approval_requested": _approval,
    "tool.approved": _approval,
    "tool.rejected": _approval,
    "tool.started": _call,
    "tool.completed": _completed,
    "tool.failed": _failed,
    "tool.cancelled": _cancelled,
    "llm.completed": _llm_completed,
    "llm.failed": _llm_failed,
    "llm.retried": _llm_retried,
    "llm.breaker_changed": _breaker,
    "budget.exceeded": _budget,
    "conversation.cancel": _reason_only,
    "conversation.stopped": _reason_only,
    "policy.allowed": _policy,
    "policy.denied": _policy,
    "tool.timeout": _timeout,
    "actor.crashed": _actor,
    "actor.restarted": _actor,
    "actor.escalated": _actor,
    "a2a.task_updated": _a2a_task,
}


def describe_event(
    event_type: str, data: dict[str, Any], limit: int | None = SUMMARY_MAX_CHARS
) -> str:
    """Return a one-line summary of an event's payload (empty when there is nothing to say).

    Quoted values and messages are cut to ``limit`` characters (None: the whole text).
    """
    describer = _DESCRIBERS.get(event_type, _generic)
    token = _LIMIT.set(limit)
    try:
        return describer(data)
    finally:
        _LIMIT.reset(token)


def plain(value: Any) -> str:
    """A value as text: a string as is, anything else as canonical JSON."""
    return _plain(value)


def quote(value: Any) -> str:
    """A value quoted and cut as the report's summaries are."""
    return _quote(value)
