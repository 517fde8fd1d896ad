"""What every model adapter shares: the request, the reply, the error and the factory.

The agent loop builds a :class:`ModelRequest` from the ``llm_context`` projection, calls
``adapter.complete(request)`` and turns the :class:`ModelReply` into events
(``assistant.delta``, ``tool.requested``, ``assistant.message``, ``llm.completed``). A
failure is a :class:`ModelError` whose ``reason`` is stable and becomes ``llm.failed``.

Adapters are plain objects with no actor or event knowledge. Every one blocks in
``complete``; one that talks to the network also has a coroutine ``acomplete`` on a shared
``httpx.AsyncClient`` (:class:`AsyncModelAdapter`), which :class:`runtime.llm.caller.ModelCaller`
runs on its event loop so that a slow model never blocks the host that asked:

- :class:`runtime.llm.deterministic.DeterministicAdapter`, the offline default;
- :class:`runtime.llm.openai.OpenAIAdapter`, any OpenAI-compatible chat-completions
  endpoint, wrapped by :func:`make_adapter` in a
  :class:`runtime.llm.resilience.ResilientAdapter` (retries and a circuit breaker).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

import msgspec

from runtime.errors import RoostError

if TYPE_CHECKING:
    import httpx

__all__ = [
    "MODEL_ERROR_REASONS",
    "AsyncModelAdapter",
    "ModelAdapter",
    "ModelError",
    "ModelReply",
    "ModelRequest",
    "ToolCallRequest",
]

MODEL_ERROR_REASONS: frozenset[str] = frozenset(
    {"timeout", "provider_error", "rate_limited", "circuit_open", "bad_response", "auth_missing"}
)
"""Every ``ModelError.reason``."""


class ToolCallRequest(msgspec.Struct, frozen=True, kw_only=True):
    """A tool call the model asked for."""

    id: str | None
    """The provider's call id, or ``None``; the agent loop assigns the ``call_id``."""
    name: str
    """Dotted tool name, e.g. ``fs.read``."""
    args: dict[str, Any]
    """Decoded arguments (always a JSON object)."""
    run_mode: str = "sync"
    """``sync`` or ``async``."""


class ModelRequest(msgspec.Struct, frozen=True, kw_only=True):
    """One model round: the conversation so far and what the model may call.

    ``messages`` are the ``llm_context`` projection's messages:
    ``{"role": "user", "content"}``,
    ``{"role": "assistant", "content": str | None, "tool_calls": [{"id", "name", "args"}]}``,
    ``{"role": "tool", "tool_call_id", "name", "status": "ok" | "error", "content", "code"}``.
    """

    messages: Sequence[Mapping[str, Any]]
    """The chat so far, oldest first."""
    tools: Sequence[Mapping[str, Any]] = []
    """Tools the model may call: ``{name, description, input_schema}``."""
    round: int = 1
    """Model round within the turn, from 1."""
    directives: Mapping[str, Any] | None = None
    """The ``user.message``'s ``data.llm`` (round 1 only); the deterministic model obeys it."""
    model: str | None = None
    """Model name; ``None`` uses the adapter's configured model."""
    system_prompt: str | None = None
    """System prompt; ``None`` uses the adapter's configured one."""
    temperature: float | None = None
    """Sampling temperature; ``None`` uses the adapter's setting (or the provider default)."""
    max_tokens: int | None = None
    """Completion token cap; ``None`` uses the adapter's setting (or the provider default)."""
    timeout_s: float = 120.0
    """Seconds the whole call may take, retries included."""


class ModelReply(msgspec.Struct, frozen=True, kw_only=True):
    """What the model answered in one round."""

    text: str
    """The full assistant text (may be empty)."""
    deltas: list[str] = []
    """The streamed chunks; ``"".join(deltas) == text``."""
    tool_calls: list[ToolCallRequest] = []
    """Tool calls requested in this round, in order."""
    finish_reason: str = "stop"
    """``stop``, ``tool_calls`` or ``length``."""
    usage: dict[str, int] = {}
    """``{prompt_tokens, completion_tokens, total_tokens}``."""


class ModelError(RoostError):
    """A model call failed; ``reason`` is one of :data:`MODEL_ERROR_REASONS`.

    ``ModelError("rate_limited", "HTTP 429 from http://...", retryable=True, status=429)``.
    ``last_error`` (``circuit_open``): the provider's own last error, ``reason: message``.
    """

    code: ClassVar[str] = "model_error"

    def __init__(
        self,
        reason: str,
        message: str,
        *,
        retryable: bool = False,
        status: int | None = None,
        retry_after_s: float | None = None,
        attempts: int = 1,
        last_error: str | None = None,
    ) -> None:
        if reason not in MODEL_ERROR_REASONS:
            raise ValueError(f"unknown model error reason {reason!r}")
        extra = {} if last_error is None else {"last_error": last_error}
        super().__init__(message, reason=reason, retryable=retryable, status=status, **extra)
        self.reason = reason
        self.retryable = retryable
        self.status = status
        self.retry_after_s = retry_after_s
        self.attempts = attempts

    def describe(self) -> str:
        """Return ``"<reason>: <message>"`` (``llm.failed`` records both, in two fields)."""
        return f"{self.reason}: {self.message}"


@runtime_checkable
class ModelAdapter(Protocol):
    """Anything that completes a :class:`ModelRequest`."""

    @property
    def provider(self) -> str:
        """Adapter name for ``llm.started`` (``deterministic``, ``openai``)."""
        ...

    @property
    def model(self) -> str | None:
        """Configured model name, if any."""
        ...

    def complete(self, request: ModelRequest) -> ModelReply:
        """Run one model round; raise :class:`ModelError` on failure."""
        ...


@runtime_checkable
class AsyncModelAdapter(ModelAdapter, Protocol):
    """An adapter that can also run a round without blocking a thread."""

    async def acomplete(
        self, request: ModelRequest, *, client: httpx.AsyncClient | None = None
    ) -> ModelReply:
        """Run one model round on ``client`` (the shared pool); raise :class:`ModelError`."""
        ...
