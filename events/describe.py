"""The describers: one-line summaries of events, what an operator reads next to an event.

Each payload class names its describer in its facts (``events.catalog``);
``events.report.describe_event`` picks it (``generic`` when there is none) and runs it
through ``summarize``, which sets how far quoted values are cut. ``clip`` and
``cut_at_word`` are how such text is cut. Pure: the same input gives the same text.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextvars import ContextVar
from typing import Final

import msgspec

__all__ = [
    "SUMMARY_MAX_CHARS",
    "a2a_task",
    "actor",
    "approval",
    "breaker",
    "budget",
    "call",
    "cancelled",
    "clip",
    "completed",
    "cut_at_word",
    "failed",
    "generic",
    "llm_completed",
    "llm_failed",
    "llm_retried",
    "llm_started",
    "message",
    "plain",
    "policy",
    "quote",
    "reason_only",
    "requested",
    "summarize",
    "timeout",
]

SUMMARY_MAX_CHARS: Final = 160
"""Longest quoted value (message text, arguments) shown in a one-line summary."""


_SORTED_JSON: Final = msgspec.json.Encoder(order="sorted")
"""``events.codecs.canonical_json``'s encoding (the catalog imports this module, so it
cannot import the codecs, which read the envelopes, which read the catalog)."""

_LIMIT: ContextVar[int | None] = ContextVar("summary_limit", default=SUMMARY_MAX_CHARS)


def clip(text: str, limit: int | None = None) -> str:
    """Return ``text`` cut to ``limit`` characters, ending in an ellipsis when cut.

    Without ``limit``, the one :func:`summarize` was given (None: never cut).
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


def _quote(value: object) -> str:
    """Return ``value`` as clipped JSON: strings quoted, newlines and quotes escaped."""
    return clip(_SORTED_JSON.encode(value).decode())


def _plain(value: object) -> str:
    return value if isinstance(value, str) else _SORTED_JSON.encode(value).decode()


def call(data: Mapping[str, object]) -> str:
    """``name call_id`` of a call's event."""
    name, call_id = data.get("name") or data.get("tool"), data.get("call_id")
    return " ".join(_plain(part) for part in (name, call_id) if part is not None)


def _reason_code(reason: object) -> str:
    if isinstance(reason, dict) and "code" in reason:
        return _plain(reason["code"])
    return _plain(reason)


def _suffix(value: object, template: str) -> str:
    return template.format(_plain(value)) if value is not None else ""


def message(data: Mapping[str, object]) -> str:
    """A message's text, quoted and cut."""
    return _quote(data.get("content", ""))


def llm_started(data: Mapping[str, object]) -> str:
    """``round N (provider/model)``."""
    provider = _plain(data.get("provider", "?"))
    model = data.get("model")
    where = provider if model is None else f"{provider}/{_plain(model)}"
    return f"round {_plain(data.get('round', 1))} ({where})"


def requested(data: Mapping[str, object]) -> str:
    """The call and its arguments, quoted and cut."""
    return f"{call(data)} {_quote(data.get('args', {}))}"


def approval(data: Mapping[str, object]) -> str:
    """The call and the person's note."""
    return _plain(data.get("call_id", "?")) + _suffix(data.get("reason"), ": {}")


def completed(data: Mapping[str, object]) -> str:
    """The call and how long it ran."""
    return f"{call(data)} ok in {_plain(data.get('duration_ms', 0))} ms"


def failed(data: Mapping[str, object]) -> str:
    """The call and its failure's code."""
    return f"{call(data)}: {_reason_code(data.get('reason', {}))}"


def cancelled(data: Mapping[str, object]) -> str:
    """The call and why it was cancelled."""
    return f"{call(data)}: {_plain(data.get('reason', 'conversation_cancelled'))}"


def llm_completed(data: Mapping[str, object]) -> str:
    """How the turn finished and how many calls it made."""
    finish = _plain(data.get("finish_reason", "stop"))
    return f"{finish}, {_plain(data.get('tool_call_count', 0))} tool call(s)"


def budget(data: Mapping[str, object]) -> str:
    """Which budget stopped the turn, and how much of it was used."""
    used, limit = _plain(data.get("used", "?")), _plain(data.get("limit", "?"))
    return f"{_plain(data.get('budget', '?'))} used {used} of {limit}"


def policy(data: Mapping[str, object]) -> str:
    """The tool, the call, the reason and who decided."""
    tool = _plain(data.get("tool", "?"))
    call = _suffix(data.get("call_id"), " {}")
    reason, source = _plain(data.get("reason", "?")), _plain(data.get("source", "policy"))
    return f"{tool}{call}: {reason} (source {source})"


def timeout(data: Mapping[str, object]) -> str:
    """The tool, the call and how many timeouts it has had."""
    tool = _suffix(data.get("tool"), "{} ")
    call, count = _plain(data.get("call_id", "?")), _plain(data.get("timeout_count", 1))
    return f"{tool}{call} (timeout #{count})"


def actor(data: Mapping[str, object]) -> str:
    """The actor, why, and its restart count."""
    actor, reason = _plain(data.get("actor", "?")), _plain(data.get("reason", "?"))
    return f"{actor}: {reason} (restart count {_plain(data.get('restart_count', 0))})"


def reason_only(data: Mapping[str, object]) -> str:
    """The event's ``reason``."""
    return _plain(data.get("reason", "?"))


def llm_failed(data: Mapping[str, object]) -> str:
    """The model's failure: its code and message."""
    message = data.get("message")
    return clip(reason_only(data) + (f": {_plain(message)}" if message else ""))


def llm_retried(data: Mapping[str, object]) -> str:
    """A retried attempt: its error, status and wait."""
    status = _suffix(data.get("status"), " (HTTP {})")
    after = _suffix(data.get("retry_after_ms"), ", Retry-After {} ms")
    wait = f"waited {_plain(data.get('delay_ms', 0))} ms{after}"
    attempt = _plain(data.get("attempt", 1))
    message = _suffix(data.get("message") or None, ": {}")
    return clip(f"attempt {attempt} {reason_only(data)}{status}, {wait}{message}")


def breaker(data: Mapping[str, object]) -> str:
    """A circuit breaker's transition and why."""
    provider, state = _plain(data.get("provider", "?")), _plain(data.get("state", "?"))
    failures = _plain(data.get("consecutive_failures", 0))
    threshold = _plain(data.get("failure_threshold", 0))
    last = _suffix(data.get("last_error") or None, "; last error {}")
    previous = _plain(data.get("previous", "?"))
    return clip(f"{provider} {previous} → {state} ({failures}/{threshold} failures){last}")


def a2a_task(data: Mapping[str, object]) -> str:
    """A remote task's new state."""
    agent, task = _plain(data.get("agent", "?")), _plain(data.get("task_id", "?"))
    detail = _suffix(data.get("detail") or None, " ({})")
    return f"{agent} task {task}: {_plain(data.get('state', '?'))}{detail}"


def generic(data: Mapping[str, object]) -> str:
    """Return the payload's set fields as sorted ``key=value`` pairs (empty values left out)."""
    pairs = [
        f"{key}={_plain(value)}"
        for key, value in sorted(data.items())
        if value is not None and value not in ([], {})
    ]
    return clip(" ".join(pairs))


def summarize(
    describer: Callable[[Mapping[str, object]], str],
    data: Mapping[str, object],
    limit: int | None = SUMMARY_MAX_CHARS,
) -> str:
    """Return ``describer(data)`` with quoted values and messages cut to ``limit`` (None: whole)."""
    token = _LIMIT.set(limit)
    try:
        return describer(data)
    finally:
        _LIMIT.reset(token)


def plain(value: object) -> str:
    """A value as text: a string as is, anything else as canonical JSON."""
    return _plain(value)


def quote(value: object) -> str:
    """A value quoted and cut as the report's summaries are."""
    return _quote(value)
