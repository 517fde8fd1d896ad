"""The chat-completions request Roost sends, as ``TypedDict`` shapes.

:func:`runtime.llm.openai_wire.request_body` builds a plain dict (encoded as it is); these
types say which keys it and its messages have.
"""

from __future__ import annotations

from typing import NotRequired, TypedDict

__all__ = [
    "ChatBody",
    "WireFunction",
    "WireFunctionCall",
    "WireMessage",
    "WireTool",
    "WireToolCall",
]


class WireFunctionCall(TypedDict):
    """The ``function`` of a tool call in a chat-completions assistant message."""

    name: str
    """The tool's wire name (:func:`wire_tool_name`)."""
    arguments: str
    """The arguments as JSON text."""


class WireToolCall(TypedDict):
    """A tool call in a chat-completions assistant message."""

    id: object
    """The call id as the model gave it."""
    type: str
    """Always ``function``."""
    function: WireFunctionCall
    """The call."""


class WireMessage(TypedDict):
    """A chat-completions message as sent to the provider."""

    role: object
    """``system``, ``user``, ``assistant`` or ``tool`` (other roles are passed on as given)."""
    tool_call_id: NotRequired[object]
    """The call a ``tool`` message answers."""
    content: object
    """The text (``None`` for an assistant message with tool calls)."""
    tool_calls: NotRequired[list[WireToolCall]]
    """An assistant message's tool calls."""


class WireFunction(TypedDict):
    """A tool as chat completions describes it."""

    name: str
    """Its wire name."""
    description: object
    """One sentence for the model."""
    parameters: object
    """JSON Schema of its arguments."""


class WireTool(TypedDict):
    """One entry of a chat-completions body's ``tools``."""

    type: str
    """Always ``function``."""
    function: WireFunction
    """The tool."""


class ChatBody(TypedDict, total=False):
    """A streamed chat-completions request body; unset options are left out."""

    model: str
    """The model name."""
    messages: list[WireMessage]
    """The chat, the system prompt first."""
    tools: list[WireTool]
    """The tools the model may call (left out when none)."""
    temperature: float
    """Sampling temperature."""
    max_tokens: int
    """Completion token cap."""
    stream: bool
    """Always true."""
    stream_options: dict[str, bool]
    """``{include_usage: true}``."""
