"""The OpenAI chat-completions wire format: request bodies out, streamed chunks in.

Pure functions, an event parser and one accumulator, no I/O: :mod:`runtime.llm.openai` does the
HTTP, blocking and async, and both paths read through the same code here.

Tool names: Roost's are dotted (``fs.read``) but OpenAI only accepts
``^[a-zA-Z0-9_-]{1,64}$``, so a dot is sent as ``__`` (``fs__read``). A name that would
still be invalid, too long, or collide with another tool's wire name is sent as a sanitized
prefix plus a hash of the real name; :class:`ToolNameMap` remembers every name it sent so
the reply maps back exactly.
"""

from __future__ import annotations

import hashlib
import itertools
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import msgspec

from runtime.llm.base import ModelError, ModelReply, ModelRequest, ToolCallRequest
from runtime.llm.chat_shapes import ChatBody, WireMessage
from runtime.wire.protocol import unstorable_int_path

__all__ = [
    "SseEvents",
    "StreamAccumulator",
    "ToolNameMap",
    "estimate_prompt_tokens",
    "iter_sse_data",
    "request_body",
    "wire_messages",
    "wire_tool_name",
]

_VALID_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
_MAX_NAME = 64


def wire_tool_name(name: str) -> str:
    """Return the OpenAI-safe name for a Roost tool name (``fs.read`` → ``fs__read``)."""
    mechanical = name.replace(".", "__")
    return mechanical if _VALID_NAME.fullmatch(mechanical) else _hashed_name(name)


def _hashed_name(name: str) -> str:
    """Return a valid wire name: a sanitized prefix plus 8 hex digits of a hash."""
    safe = re.sub(r"[^a-zA-Z0-9_-]", "_", name.replace(".", "__"))
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{safe[: _MAX_NAME - 9]}_{digest}"


class ToolNameMap:
    """Maps tool names to wire names and back, for one request."""

    def __init__(self, names: Iterable[str] = ()) -> None:
        self._to_wire: dict[str, str] = {}
        self._from_wire: dict[str, str] = {}
        for name in names:
            self.to_wire(name)

    def to_wire(self, name: str) -> str:
        """Return (and remember) the wire name of ``name``."""
        if name in self._to_wire:
            return self._to_wire[name]
        wire = wire_tool_name(name)
        salt = 0
        while self._from_wire.get(wire, name) != name:  # taken by another name
            wire = _hashed_name(f"{name}#{salt}" if salt else name)
            salt += 1
        self._to_wire[name] = wire
        self._from_wire[wire] = name
        return wire

    def from_wire(self, wire: str) -> str:
        """Return the tool name a wire name stands for (``fs__read`` → ``fs.read``)."""
        if wire in self._from_wire:
            return self._from_wire[wire]
        return wire.replace("__", ".")


def _json(value: Any) -> str:
    """Compact JSON text."""
    return msgspec.json.encode(value).decode()


def _assistant(message: Mapping[str, Any], names: ToolNameMap) -> WireMessage:
    """A model round: its text and the calls it asked for (no text and no calls: "")."""
    wire: WireMessage = {"role": "assistant", "content": message.get("content")}
    calls = message.get("tool_calls") or []
    if calls:
        wire["tool_calls"] = [
            {
                "id": call.get("id"),
                "type": "function",
                "function": {
                    "name": names.to_wire(str(call.get("name"))),
                    "arguments": _json(call.get("args") or {}),
                },
            }
            for call in calls
        ]
    elif wire["content"] is None:
        wire["content"] = ""
    return wire


def _tool(message: Mapping[str, Any], names: ToolNameMap) -> WireMessage:
    """A tool result; a failed one with no content says its code."""
    content = message.get("content") or ""
    if not content and message.get("status") == "error":
        content = f"error: {message.get('code') or 'tool_error'}"
    return {"role": "tool", "tool_call_id": message.get("tool_call_id"), "content": content}


def _plain(message: Mapping[str, Any], names: ToolNameMap) -> WireMessage:
    """Any other message: its role (``user`` when it has none) and its text."""
    return {"role": message.get("role") or "user", "content": message.get("content") or ""}


_BY_ROLE: dict[object, Callable[[Mapping[str, Any], ToolNameMap], WireMessage]] = {
    "assistant": _assistant,
    "tool": _tool,
}
"""The roles whose messages change shape on the wire; the others are :func:`_plain`."""


def wire_messages(
    messages: Sequence[Mapping[str, Any]], system_prompt: str | None, names: ToolNameMap
) -> list[WireMessage]:
    """Convert ``llm_context`` messages to chat-completions messages."""
    out: list[WireMessage] = []
    if system_prompt:
        out.append({"role": "system", "content": system_prompt})
    out.extend(_BY_ROLE.get(m.get("role"), _plain)(m, names) for m in messages)
    return out


def request_body(
    request: ModelRequest,
    *,
    model: str | None,
    system_prompt: str | None,
    temperature: float | None,
    max_tokens: int | None,
) -> tuple[ChatBody, ToolNameMap]:
    """Return the streamed chat-completions body for ``request`` and its tool-name map.

    The request's ``model``, ``system_prompt``, ``temperature`` and ``max_tokens`` win over
    the adapter's settings passed here; ``None`` everywhere leaves the field out.
    """
    names = ToolNameMap(str(tool.get("name")) for tool in request.tools)
    body: ChatBody = {}
    chosen_model = request.model or model
    if chosen_model:
        body["model"] = chosen_model
    body["messages"] = wire_messages(
        request.messages,
        request.system_prompt if request.system_prompt is not None else system_prompt,
        names,
    )
    if request.tools:
        body["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": names.to_wire(str(tool.get("name"))),
                    "description": tool.get("description") or "",
                    "parameters": tool.get("input_schema") or {"type": "object", "properties": {}},
                },
            }
            for tool in request.tools
        ]
    chosen: tuple[tuple[Literal["temperature", "max_tokens"], float | None, float | None], ...] = (
        ("temperature", request.temperature, temperature),
        ("max_tokens", request.max_tokens, max_tokens),
    )
    for key, asked, setting in chosen:  # the request's value wins; None leaves the key out
        value = asked if asked is not None else setting
        if value is not None:
            body[key] = value
    body["stream"] = True
    body["stream_options"] = {"include_usage": True}
    return body, names


class SseEvents:
    """Server-sent events put together line by line: the sync and async readers share it.

    Feed each line (without its newline) to :meth:`line`; it returns the data of the event
    a blank line ends (its ``data:`` lines joined by newlines), as a list of at most one.
    :meth:`end` returns the data of an event the stream ended inside.
    """

    def __init__(self) -> None:
        self._data: list[str] = []

    def line(self, line: str) -> list[str]:
        """Take one line; return the data of the event it ended ([] when it ended none)."""
        if not line:
            return self.end()
        if line.startswith("data:"):
            value = line[5:]
            self._data.append(value[1:] if value.startswith(" ") else value)
        # "event:", "id:", "retry:" and ":" comment lines carry nothing we use.
        return []

    def end(self) -> list[str]:
        """Return the data gathered since the last event ([] when there is none)."""
        if not self._data:
            return []
        data, self._data = "\n".join(self._data), []
        return [data]


def iter_sse_data(lines: Iterable[str]) -> Iterator[str]:
    """Yield the data of each server-sent event (``data:`` lines joined by newlines)."""
    events = SseEvents()
    for line in itertools.chain(lines, [""]):  # the stream's end ends an event too
        yield from events.line(line)


@dataclass
class _PartialCall:
    """A streamed tool call being put together from its fragments."""

    id: str | None = None
    name: list[str] = field(default_factory=list)
    arguments: list[str] = field(default_factory=list)


@dataclass
class StreamAccumulator:
    """Folds chat-completion chunks (streamed, or one whole response) into a reply."""

    deltas: list[str] = field(default_factory=list)
    """Content chunks in arrival order."""
    calls: dict[int, _PartialCall] = field(default_factory=dict)
    """Tool calls by their ``index``."""
    finish_reason: str | None = None
    """The provider's finish reason, once sent."""
    usage: dict[str, int] | None = None
    """The provider's usage, when sent."""
    done: bool = False
    """``[DONE]`` was received."""

    def feed_data(self, data: str) -> None:
        """Take one SSE data payload (a JSON chunk or ``[DONE]``)."""
        if data.strip() == "[DONE]":
            self.done = True
            return
        try:
            chunk = msgspec.json.decode(data)
        except msgspec.DecodeError as e:
            raise ModelError("bad_response", f"stream chunk is not JSON: {data[:200]!r}") from e
        if not isinstance(chunk, dict):
            raise ModelError("bad_response", f"stream chunk is not an object: {data[:200]!r}")
        self.feed(chunk)

    def feed_completion(self, payload: str) -> None:
        """Take a whole JSON completion (from a server that ignores ``stream``)."""
        self.feed_data(payload)
        self.done = True

    def feed(self, chunk: Mapping[str, Any]) -> None:
        """Take one decoded chunk."""
        if chunk.get("error"):
            detail = _json(chunk["error"])[:300]
            raise ModelError("provider_error", f"error in the stream: {detail}", retryable=True)
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self.usage = _usage(usage)
        choices = chunk.get("choices") or []
        choice = next((c for c in choices if isinstance(c, dict) and c.get("index", 0) == 0), None)
        if choice is None:
            return
        delta = choice.get("delta") or choice.get("message") or {}
        content = delta.get("content")
        if isinstance(content, str) and content:
            self.deltas.append(content)
        for position, fragment in enumerate(delta.get("tool_calls") or []):
            self._feed_call(position, fragment)
        if choice.get("finish_reason"):
            self.finish_reason = str(choice["finish_reason"])

    def _feed_call(self, position: int, fragment: Any) -> None:
        """Add one tool-call fragment (``index``-keyed id/name/arguments pieces)."""
        if not isinstance(fragment, dict):
            raise ModelError("bad_response", f"tool call fragment is not an object: {fragment!r}")
        index = fragment.get("index", position)
        if not isinstance(index, int):
            raise ModelError("bad_response", f"tool call fragment has a bad index: {index!r}")
        partial = self.calls.setdefault(index, _PartialCall())
        if fragment.get("id") and partial.id is None:
            partial.id = str(fragment["id"])
        function = fragment.get("function") or {}
        if function.get("name"):
            partial.name.append(str(function["name"]))
        if function.get("arguments"):
            arguments = function["arguments"]
            partial.arguments.append(arguments if isinstance(arguments, str) else _json(arguments))

    def reply(self, names: ToolNameMap, estimated_prompt_tokens: int) -> ModelReply:
        """Return the finished reply; raise ``bad_response`` for a truncated stream or bad args."""
        if not self.done and self.finish_reason is None:
            raise ModelError("bad_response", "the stream ended before the completion finished")
        text = "".join(self.deltas)
        calls = [self._finish_call(self.calls[i], names) for i in sorted(self.calls)]
        if calls:
            finish = "tool_calls"
        elif self.finish_reason == "length":
            finish = "length"
        else:
            finish = "stop"
        usage = self.usage
        if usage is None:
            completion = _estimate(text) + sum(_estimate(_json(c.args)) for c in calls)
            usage = _usage(
                {"prompt_tokens": estimated_prompt_tokens, "completion_tokens": completion}
            )
        return ModelReply(
            text=text, deltas=list(self.deltas), tool_calls=calls, finish_reason=finish, usage=usage
        )

    @staticmethod
    def _finish_call(partial: _PartialCall, names: ToolNameMap) -> ToolCallRequest:
        """Decode a complete tool call's arguments and map its name back."""
        wire_name = "".join(partial.name)
        if not wire_name:
            raise ModelError("bad_response", "a streamed tool call has no function name")
        raw = "".join(partial.arguments).strip() or "{}"
        try:
            args = msgspec.json.decode(raw)
        except msgspec.DecodeError as e:
            raise ModelError(
                "bad_response", f"tool call {wire_name} has invalid JSON arguments: {raw[:200]!r}"
            ) from e
        if not isinstance(args, dict):
            raise ModelError(
                "bad_response",
                f"tool call {wire_name} arguments are not a JSON object: {raw[:200]!r}",
            )
        unstorable = unstorable_int_path(args)
        if unstorable is not None:
            raise ModelError(
                "bad_response",
                f"tool call {wire_name} has an integer the journal cannot store at "
                f"{unstorable} (outside -2**63..2**64-1): {raw[:200]!r}",
            )
        return ToolCallRequest(id=partial.id, name=names.from_wire(wire_name), args=args)


def _usage(raw: Mapping[str, Any]) -> dict[str, int]:
    """Normalize a usage object to the three integer counts."""
    prompt = _count(raw.get("prompt_tokens"))
    completion = _count(raw.get("completion_tokens"))
    total = raw.get("total_tokens")
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": total if _count(total) == total else prompt + completion,
    }


_MAX_COUNT = 2**63 - 1


def _count(value: Any) -> int:
    """A token count as the server sent it; 0 for a negative, a non-integer, or one too large.

    The journal stores integers up to 64 bits: a count beyond that is no count.
    """
    return value if isinstance(value, int) and 0 <= value <= _MAX_COUNT else 0


def _estimate(text: str) -> int:
    """Estimate tokens as one per four characters (rounded up)."""
    return (len(text) + 3) // 4


def estimate_prompt_tokens(body: ChatBody) -> int:
    """Estimate the prompt tokens of a request body (its messages and tools as JSON)."""
    tools = body.get("tools")
    return _estimate(_json(body.get("messages", []))) + (_estimate(_json(tools)) if tools else 0)
