"""The adapter for any OpenAI-compatible chat-completions endpoint (OpenAI, vLLM, Ollama, ...).

One call is one ``POST {base_url}/chat/completions`` with ``stream: true`` and
``stream_options.include_usage``; the server-sent events are folded into a
:class:`~runtime.llm.base.ModelReply` by :mod:`runtime.llm.openai_wire`. A server that
ignores ``stream`` and answers one JSON completion is understood too.

The API key is read at each call from the environment variable *named* by
``llm_api_key_env`` and sent as ``Authorization: Bearer``; it is never stored. With no
variable named, no ``Authorization`` header is sent (local servers).

Failures are :class:`~runtime.llm.base.ModelError`: HTTP 429 → ``rate_limited``
(retryable, ``Retry-After`` honoured), 408 and timeouts → ``timeout`` (retryable), 5xx and
connection failures → ``provider_error`` (retryable), other 4xx → ``provider_error`` (not
retryable), a malformed stream or tool-call arguments → ``bad_response``. The whole call,
streaming included, is bounded by ``request.timeout_s``: every network wait is, and a
watchdog cuts the stream at the deadline.

Two paths with one behaviour: :meth:`OpenAIAdapter.complete` blocks the calling thread (its
own connection per call); :meth:`OpenAIAdapter.acomplete` is a coroutine on an
``httpx.AsyncClient`` the caller shares (one connection pool per host process, see
:mod:`runtime.llm.caller`), bounded by ``asyncio.timeout``. Building the request, reading
the stream (:mod:`runtime.llm.openai_wire`) and mapping errors are the same code.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from types import TracebackType
from typing import cast

import httpx
import msgspec

from runtime.llm.base import ModelError, ModelReply, ModelRequest
from runtime.llm.chat_shapes import ChatBody
from runtime.llm.openai_wire import (
    SseEvents,
    StreamAccumulator,
    ToolNameMap,
    estimate_prompt_tokens,
    iter_sse_data,
    request_body,
)

__all__ = ["DEFAULT_BASE_URL", "OpenAIAdapter"]

DEFAULT_BASE_URL = "https://api.openai.com/v1"
"""Used when ``llm_base_url`` is null."""


class OpenAIAdapter:
    """Streams chat completions from an OpenAI-compatible endpoint; one attempt per call.

    Retries and the circuit breaker are :class:`runtime.llm.resilience.ResilientAdapter`'s
    job; :func:`runtime.llm.adapters.make_adapter` wraps this adapter in one.
    """

    provider: str = "openai"
    """Adapter name for ``llm.started``."""

    def __init__(
        self,
        *,
        base_url: str = DEFAULT_BASE_URL,
        model: str | None = None,
        api_key_env: str | None = None,
        system_prompt: str | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.model: str | None = model
        self.api_key_env = api_key_env
        self.system_prompt = system_prompt
        self.temperature = temperature
        self.max_tokens = max_tokens
        self._environ: Mapping[str, str] = {} if environ is None else environ

    @property
    def url(self) -> str:
        """The chat-completions URL."""
        return f"{self.base_url}/chat/completions"

    def complete(self, request: ModelRequest) -> ModelReply:
        """Run one streamed chat completion within ``request.timeout_s``."""
        headers, body, names = self._prepare(request)
        deadline = time.monotonic() + request.timeout_s
        watchdog: _Watchdog | None = None
        try:
            with (
                httpx.Client(timeout=httpx.Timeout(request.timeout_s)) as client,
                client.stream("POST", self.url, json=body, headers=headers) as response,
            ):
                if response.status_code >= 400:
                    response.read()
                    raise self._http_error(response)
                with _Watchdog(response, deadline - time.monotonic()) as watchdog:
                    return self._read(response, names, estimate_prompt_tokens(body), deadline)
        except httpx.TimeoutException as e:
            raise self._timeout(request.timeout_s) from e
        except (httpx.TransportError, ModelError) as e:
            if watchdog is not None and watchdog.fired.is_set():
                raise self._timeout(request.timeout_s) from e
            if isinstance(e, ModelError):
                raise
            raise self._unreachable(e) from e

    async def acomplete(
        self, request: ModelRequest, *, client: httpx.AsyncClient | None = None
    ) -> ModelReply:
        """Run one streamed chat completion within ``request.timeout_s``, without blocking.

        ``client`` is the shared connection pool; without one, a client is made for this call.
        The whole call is bounded by ``asyncio.timeout``: a trickling stream is cut at the
        deadline like the blocking path's watchdog cuts it.
        """
        headers, body, names = self._prepare(request)
        try:
            async with asyncio.timeout(request.timeout_s) as deadline:
                if client is not None:
                    return await self._apost(
                        client, request, headers, body, names, deadline=deadline
                    )
                async with httpx.AsyncClient() as own:
                    return await self._apost(own, request, headers, body, names, deadline=deadline)
        except (TimeoutError, httpx.TimeoutException) as e:
            raise self._timeout(request.timeout_s) from e
        except httpx.TransportError as e:
            raise self._unreachable(e) from e

    async def _apost(
        self,
        client: httpx.AsyncClient,
        request: ModelRequest,
        headers: dict[str, str],
        body: ChatBody,
        names: ToolNameMap,
        *,
        deadline: asyncio.Timeout,
    ) -> ModelReply:
        """POST the request on ``client`` and fold the streamed answer into a reply.

        ``deadline`` is the call's: once the answer is whole it no longer applies (see
        :func:`_afold_stream`).
        """
        timeout = httpx.Timeout(request.timeout_s)
        async with client.stream(
            "POST", self.url, json=body, headers=headers, timeout=timeout
        ) as response:
            if response.status_code >= 400:
                await response.aread()
                raise self._http_error(response)
            accumulator = StreamAccumulator()
            if _is_json(response):
                accumulator.feed_completion((await response.aread()).decode(errors="replace"))
            else:
                lines = cast(AsyncGenerator[str, None], response.aiter_lines())
                async with contextlib.aclosing(lines):  # closed here, even when left early
                    await _afold_stream(lines, accumulator, deadline)
            return accumulator.reply(names, estimate_prompt_tokens(body))

    def _prepare(self, request: ModelRequest) -> tuple[dict[str, str], ChatBody, ToolNameMap]:
        """Return the headers, body and tool-name map of ``request`` (or raise before sending)."""
        headers = {"Accept": "text/event-stream", **self._auth_headers()}
        body, names = request_body(
            request,
            model=self.model,
            system_prompt=self.system_prompt,
            temperature=self.temperature,
            max_tokens=self.max_tokens,
        )
        if request.timeout_s <= 0:
            raise ModelError("timeout", "no time left for the model call", retryable=True)
        return headers, body, names

    def _auth_headers(self) -> dict[str, str]:
        """Return ``Authorization: Bearer`` from the named variable; ``auth_missing`` if unset."""
        if not self.api_key_env:
            return {}
        key = self._environ.get(self.api_key_env)
        if not key:
            raise ModelError(
                "auth_missing",
                f"the API key variable {self.api_key_env} is not set; export it in the "
                "daemon's environment or change llm_api_key_env",
            )
        return {"Authorization": f"Bearer {key}"}

    def _read(
        self, response: httpx.Response, names: ToolNameMap, prompt_estimate: int, deadline: float
    ) -> ModelReply:
        """Fold the response (an SSE stream, or one JSON completion) into a reply."""
        accumulator = StreamAccumulator()
        if _is_json(response):
            accumulator.feed_completion(response.read().decode(errors="replace"))
        else:
            for data in iter_sse_data(response.iter_lines()):
                if time.monotonic() > deadline:
                    raise ModelError("timeout", "deadline passed mid-stream", retryable=True)
                accumulator.feed_data(data)
                if accumulator.done:
                    break
        return accumulator.reply(names, prompt_estimate)

    def _timeout(self, timeout_s: float) -> ModelError:
        """Return the error for a call that ran out of time."""
        return ModelError(
            "timeout", f"no complete answer from {self.url} within {timeout_s:.3g}s", retryable=True
        )

    def _unreachable(self, error: httpx.TransportError) -> ModelError:
        """Return the error for a connection that failed (refused, reset, closed early)."""
        return ModelError("provider_error", f"cannot reach {self.url}: {error!r}", retryable=True)

    def _http_error(self, response: httpx.Response) -> ModelError:
        """Map an HTTP error response to a :class:`ModelError`."""
        status = response.status_code
        message = f"HTTP {status} from {self.url}: {_error_detail(response)}"
        for answered, reason, wait in _RETRYABLE_STATUS:
            if answered(status):
                return ModelError(
                    reason, message, retryable=True, status=status, retry_after_s=wait(response)
                )
        if status in (401, 403):
            variable = self.api_key_env or "the variable named by llm_api_key_env"
            message += f" (check the API key in {variable})"
        return ModelError("provider_error", message, status=status)


async def _afold_stream(
    lines: AsyncIterator[str], accumulator: StreamAccumulator, deadline: asyncio.Timeout
) -> None:
    """Feed the events of an SSE stream to ``accumulator`` until ``[DONE]`` or its end.

    After ``[DONE]`` the rest of the body (the chunked encoding's last chunk, as a rule) is
    read too: a response left unread is closed with its connection, and the next call on
    the shared pool would pay a new connection (a TLS handshake, against a real provider).
    The answer is whole by then, so the call's ``deadline`` is lifted first: the drain's own
    bound (:data:`_DRAIN_S`) can cost the connection, never the reply.
    """
    events = SseEvents()
    async for line in lines:
        for data in events.line(line):
            accumulator.feed_data(data)
        if accumulator.done:
            deadline.reschedule(None)
            await _drain(lines)
            return
    for data in events.end():
        accumulator.feed_data(data)


_DRAIN_LINES = 16
"""Lines read after ``[DONE]`` at most before the connection is given up instead."""
_DRAIN_S = 0.5
"""Seconds the end of the body may take after ``[DONE]`` before the connection is given up."""


async def _drain(lines: AsyncIterator[str]) -> None:
    """Read ``lines`` to their end so the connection can be reused; the reply is complete.

    A server that keeps sending (or stalls) after ``[DONE]`` costs at most ``_DRAIN_LINES``
    lines or ``_DRAIN_S``: then the response is closed with its connection, as before.
    """
    with contextlib.suppress(TimeoutError, httpx.HTTPError):
        async with asyncio.timeout(_DRAIN_S):
            read = 0
            async for _ in lines:
                read += 1
                if read >= _DRAIN_LINES:
                    return


def _is_json(response: httpx.Response) -> bool:
    """Whether the server answered one JSON completion rather than an event stream."""
    content_type: str = response.headers.get("content-type", "")
    return content_type.startswith("application/json")


class _ErrorMessage(msgspec.Struct):
    """An error object that says what went wrong."""

    message: str
    """The provider's words."""


class _ErrorBody(msgspec.Struct):
    """An error response's JSON body, as OpenAI-compatible servers send it."""

    error: _ErrorMessage | str
    """``{"message": ...}``, or the message itself."""


def _error_detail(response: httpx.Response) -> str:
    """Return the provider's ``error.message`` from a JSON body, else the body's start."""
    try:
        error = msgspec.json.decode(response.content, type=_ErrorBody).error
    except msgspec.DecodeError:  # not JSON, or not such a body (a validation error too)
        return response.text[:200] or response.reason_phrase
    return (error if isinstance(error, str) else error.message)[:200]


def _retry_after(response: httpx.Response) -> float | None:
    """Seconds from a numeric ``Retry-After`` header, if any."""
    try:
        value = float(response.headers.get("retry-after", ""))
    except ValueError:
        return None
    return value if value >= 0 else None


_RETRYABLE_STATUS: tuple[
    tuple[Callable[[int], bool], str, Callable[[httpx.Response], float | None]], ...
] = (
    (lambda status: status == 429, "rate_limited", _retry_after),
    (lambda status: status == 408, "timeout", lambda response: None),
    (lambda status: status >= 500, "provider_error", lambda response: None),
)
"""The HTTP errors worth another attempt: ``(status test, reason, Retry-After)``, in order;
any other status is a ``provider_error`` not retried."""


class _Watchdog:
    """Shuts the response's socket down at the deadline, so a trickling stream cannot overrun.

    Blocking reads then end at once; ``fired`` tells the caller the error is a timeout.
    """

    def __init__(self, response: httpx.Response, remaining_s: float) -> None:
        self.fired = threading.Event()
        self._response = response
        self._timer = threading.Timer(max(0.0, remaining_s), self._fire)
        self._timer.daemon = True

    def __enter__(self) -> _Watchdog:
        self._timer.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._timer.cancel()

    def _fire(self) -> None:
        self.fired.set()
        stream = self._response.extensions.get("network_stream")
        sock = stream.get_extra_info("socket") if stream is not None else None
        if isinstance(sock, socket.socket):
            with contextlib.suppress(OSError):  # already closed: the stream has ended anyway
                sock.shutdown(socket.SHUT_RDWR)
