"""The deterministic model: the offline default for demos, tests and the soak harness.

It is a pure function of the request (SPEC section 6):

1. On round 1, directives (the ``user.message``'s ``data.llm``) with any of
   ``assistant_text``, ``delta_chunks`` or ``tool_calls`` are followed exactly; any other
   key (a typo such as ``tool_call``) fails the round with ``bad_response`` naming it.
2. When the newest messages are tool results (``tool`` messages after the last assistant
   message) it answers one line per result, ``Tool NAME completed.`` or
   ``Tool NAME failed: CODE``, and ends the turn.
3. Otherwise rules on the last user message, matched case-insensitively at its start:
   ``list skills|commands|workflows`` → ``asset.list {type}``, ``read PATH`` →
   ``fs.read {path}``, ``search TEXT`` → ``fs.search {pattern}``; anything else →
   ``Acknowledged: <content>``.

Usage counts words so budgets can be tested: ``prompt_tokens`` is the number of
whitespace-separated words in the system prompt and every message's content,
``completion_tokens`` the words of the reply text plus one per tool call.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from runtime.llm.base import ModelError, ModelReply, ModelRequest, ToolCallRequest
from runtime.tools.rules import Check, check

__all__ = ["DeterministicAdapter", "word_count"]

_LIST = re.compile(r"^list\s+(skills|commands|workflows)\b", re.IGNORECASE)
_READ = re.compile(r"^read\s+(\S.*)$", re.IGNORECASE | re.DOTALL)
_SEARCH = re.compile(r"^search\s+(\S.*)$", re.IGNORECASE | re.DOTALL)
_RULES: tuple[tuple[re.Pattern[str], str, str, Callable[[str], str]], ...] = (
    (_LIST, "asset.list", "type", str.lower),
    (_READ, "fs.read", "path", str.strip),
    (_SEARCH, "fs.search", "pattern", str.strip),
)
"""The rules on the last user message: ``(pattern, tool, argument, clean)``, first match wins."""
_DIRECTIVE_KEYS = ("assistant_text", "delta_chunks", "tool_calls")
_CALL_KEYS = ("name", "args", "run_mode")
_RUN_MODES = ("sync", "async")


def word_count(text: object) -> int:
    """Return the number of whitespace-separated words in ``text`` (0 for non-strings)."""
    return len(text.split()) if isinstance(text, str) else 0


class DeterministicAdapter:
    """A model whose answer is a pure function of the request; see the module docstring."""

    provider: str = "deterministic"
    """Adapter name for ``llm.started``."""
    model: str | None = "deterministic-1"
    """The one model this adapter has."""
    instant: bool = True
    """It answers at once, without I/O: a host runs it inline (``caller.is_instant``)."""

    def __init__(self) -> None:
        self._counted: dict[int, tuple[Any, int]] = {}
        """The messages of the last request by ``id``: the message (so the id stays its
        own) and its words."""

    def complete(self, request: ModelRequest) -> ModelReply:
        """Answer one round; raise ``ModelError(bad_response)`` for malformed directives."""
        directives = request.directives
        if request.round == 1 and directives is not None:
            _check_keys(directives)
        if (
            request.round == 1
            and directives is not None
            and any(key in directives for key in _DIRECTIVE_KEYS)
        ):
            text, deltas, calls = _follow(directives)
        else:
            text, calls = _answer(request.messages)
            deltas = [text] if text else []
        return ModelReply(
            text=text,
            deltas=deltas,
            tool_calls=calls,
            finish_reason="tool_calls" if calls else "stop",
            usage=_usage(request, text, calls, self._message_words(request.messages)),
        )

    def _message_words(self, messages: Sequence[Mapping[str, Any]]) -> int:
        """The words of ``messages``, counting only the messages not counted last time.

        A conversation's settled context is the same message objects round after round
        (``runtime.agent.rounds``); only the rounds since are new, and once the context
        window slides the oldest go. A message the last request held (the same object) is
        not counted again: counting every message of the context on every call made a
        turn cost its whole context (a tool result holds a whole file).
        """
        last = self._counted
        counted: dict[int, tuple[Any, int]] = {}
        total = 0
        for message in messages:
            known = last.get(id(message))
            if known is not None and known[0] is message:
                words = known[1]
            else:
                words = word_count(message.get("content"))
            counted[id(message)] = (message, words)
            total += words
        self._counted = counted
        return total


def _check_keys(given: Mapping[str, object], known: tuple[str, ...] = (), where: str = "") -> None:
    """A key the adapter does not know is a mistake (a typo), not something to ignore."""
    known = known or _DIRECTIVE_KEYS
    unknown = sorted(str(key) for key in given if key not in known)
    if unknown:
        names = ", ".join(repr(key) for key in unknown)
        what = f"the keys of {where} are" if where else "the directives are"
        raise _bad(
            f"unknown key{'s' if len(unknown) > 1 else ''} {names}; {what} {', '.join(known)}"
        )


_FOLLOW_RULES = (
    Check(
        lambda text, **_: text is not None and not isinstance(text, str),
        "assistant_text must be a string, got {kind}",
    ),
    Check(
        lambda chunks, **_: (
            chunks is not None
            and not (isinstance(chunks, list) and all(isinstance(c, str) for c in chunks))
        ),
        "delta_chunks must be a list of strings",
    ),
    Check(
        lambda text, chunks, **_: (
            chunks is not None and text is not None and "".join(chunks) != text
        ),
        "delta_chunks must join to assistant_text when both are given",
    ),
)
"""What the text directives must be, checked in order."""

_CALL_SHAPE = (
    Check(
        lambda item, **_: not isinstance(item, dict) or not isinstance(item.get("name"), str),
        "tool_calls[{index}] must be an object with a string name",
    ),
)
"""What each ``tool_calls`` entry must be before its keys are read."""

_CALL_RULES = (
    Check(
        lambda args, **_: not isinstance(args, dict), "tool_calls[{index}].args must be an object"
    ),
    Check(
        lambda run_mode, **_: run_mode not in _RUN_MODES,
        "tool_calls[{index}].run_mode must be 'sync' or 'async', got {run_mode!r}",
    ),
)
"""What each entry's ``args`` and ``run_mode`` must be."""


def _follow(directives: Mapping[str, Any]) -> tuple[str, list[str], list[ToolCallRequest]]:
    """Return the text, deltas and tool calls the directives ask for."""
    text = directives.get("assistant_text")
    chunks = directives.get("delta_chunks")
    check(_FOLLOW_RULES, _bad, text=text, chunks=chunks, kind=type(text).__name__)
    if text is None:
        text = "".join(chunks or [])
    deltas = list(chunks) if chunks is not None else ([text] if text else [])
    return text, deltas, _directed_calls(directives.get("tool_calls"))


def _directed_calls(raw: object) -> list[ToolCallRequest]:
    """Validate and convert the ``tool_calls`` directive."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise _bad("tool_calls must be a list of {name, args, run_mode?} objects")
    calls = []
    for index, item in enumerate(raw):
        check(_CALL_SHAPE, _bad, item=item, index=index)
        _check_keys(item, _CALL_KEYS, f"tool_calls[{index}]")
        args = item.get("args") or {}
        run_mode = item.get("run_mode") or "sync"
        check(_CALL_RULES, _bad, args=args, run_mode=run_mode, index=index)
        calls.append(ToolCallRequest(id=None, name=item["name"], args=args, run_mode=run_mode))
    return calls


def _answer(messages: Sequence[Mapping[str, Any]]) -> tuple[str, list[ToolCallRequest]]:
    """Apply the tool-result rule, else the rules on the last user message."""
    results = _trailing_tool_results(messages)
    if results:
        return "\n".join(_result_line(m) for m in results), []
    content = _last_user_content(messages)
    stripped = content.strip()
    for pattern, tool, arg, clean in _RULES:
        if match := pattern.match(stripped):
            return "", [_call(tool, **{arg: clean(match.group(1))})]
    return f"Acknowledged: {content}", []


def _trailing_tool_results(messages: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Return the ``tool`` messages after the last assistant message, if the chat ends there."""
    results = list(itertools.takewhile(lambda m: m.get("role") == "tool", reversed(messages)))
    results.reverse()
    return results


def _result_line(message: Mapping[str, Any]) -> str:
    """``Tool NAME completed.`` or ``Tool NAME failed: CODE``."""
    name = message.get("name") or "unknown"
    if message.get("status") == "error":
        return f"Tool {name} failed: {message.get('code') or 'tool_error'}"
    return f"Tool {name} completed."


def _last_user_content(messages: Sequence[Mapping[str, Any]]) -> str:
    """Return the content of the last user message ("" when there is none)."""
    for message in reversed(messages):
        if message.get("role") == "user":
            content = message.get("content")
            return content if isinstance(content, str) else ""
    return ""


def _call(name: str, **args: Any) -> ToolCallRequest:
    """Return a synchronous tool call with no provider id."""
    return ToolCallRequest(id=None, name=name, args=args)


def _usage(
    request: ModelRequest, text: str, calls: list[ToolCallRequest], message_words: int
) -> dict[str, int]:
    """Word-count usage (``message_words``: the request's messages'); see the module doc."""
    prompt = word_count(request.system_prompt) + message_words
    completion = word_count(text) + len(calls)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def _bad(message: str) -> ModelError:
    """Return a non-retryable ``bad_response`` for malformed directives."""
    return ModelError("bad_response", f"invalid llm directives: {message}")
