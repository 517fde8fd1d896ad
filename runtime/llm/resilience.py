"""Retries with exponential backoff and a circuit breaker around a model adapter.

:class:`ResilientAdapter` wraps any :class:`runtime.llm.base.ModelAdapter`:

- a retryable :class:`~runtime.llm.base.ModelError` (``timeout``, ``rate_limited``,
  ``provider_error`` for 5xx and connection failures) is retried up to
  ``RetryPolicy.max_attempts`` times, waiting ``base_delay_s * 2**(n-1)`` capped at
  ``max_delay_s`` (at least the provider's ``Retry-After``), and never past the request's
  ``timeout_s``: each attempt gets the time that is left, and a wait that would end after
  the deadline is not started;
- every attempt reports to a :class:`CircuitBreaker`: ``failure_threshold`` consecutive
  retryable failures open it (the call whose failure opened it ends with that failure, not
  retried), and while open every call fails at once with
  ``ModelError("circuit_open")`` without reaching the provider; after ``reset_after_s`` one
  probe call is let through (half-open) and its outcome closes or reopens the breaker.

What happened on the way is kept as :class:`ModelNote` s (:meth:`ResilientAdapter.take_notes`):
each retry with its reason (status, ``Retry-After``, the wait, the provider's message) and
each breaker transition (``open``, ``half_open``, ``closed``) with the provider's last
error; the agent loop journals them as ``llm.retried`` and ``llm.breaker_changed`` with the
round's outcome. A call the open breaker refuses names that last error too, so the
provider's own words are not lost behind ``circuit_open``.

Calls may block (:meth:`ResilientAdapter.complete`) or not (:meth:`ResilientAdapter.acomplete`,
async sleeps between attempts); both share one breaker, and each call keeps the notes it made,
so many calls at once on one adapter do not mix them up
(:meth:`ResilientAdapter.acomplete_with_notes`).

Time is injected (``clock``, ``sleep``, ``asleep``) so tests never wait for real.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from typing import Literal

import httpx
import msgspec

from runtime.llm.base import (
    AsyncModelAdapter,
    ModelAdapter,
    ModelError,
    ModelReply,
    ModelRequest,
)
from runtime.llm.breaker import BreakerChange, BreakerSnapshot, BreakerState, CircuitBreaker

__all__ = [
    "BreakerChange",
    "BreakerSnapshot",
    "BreakerState",
    "CircuitBreaker",
    "ModelNote",
    "ResilientAdapter",
    "RetryPolicy",
]


class RetryPolicy(msgspec.Struct, frozen=True, kw_only=True):
    """How often and how patiently a retryable model error is retried."""

    max_attempts: int = 3
    """Attempts in all, the first one included."""
    base_delay_s: float = 0.2
    """Wait after the first failed attempt; doubled after each further one."""
    max_delay_s: float = 2.0
    """Cap on one wait (a longer ``Retry-After`` from the provider still wins)."""
    jitter: bool = False
    """Spread waits randomly over ``[delay/2, delay]`` so many clients do not retry at once."""

    def delay_s(self, attempt: int, rand: Callable[[], float] = random.random) -> float:
        """Return the wait after failed attempt ``attempt`` (1-based)."""
        delay = min(self.max_delay_s, self.base_delay_s * 2.0 ** (attempt - 1))
        return delay / 2 + delay / 2 * rand() if self.jitter else delay


class ModelNote(msgspec.Struct, frozen=True, kw_only=True):
    """What a model call met on the way: a retry, or a breaker transition."""

    kind: Literal["retry", "breaker"]
    """``retry`` (a failed attempt tried again) or ``breaker`` (a transition)."""
    elapsed_ms: int
    """When, in ms since the call started."""
    attempt: int = 0
    """``retry``: the attempt that failed (from 1)."""
    reason: str = ""
    """``retry``: the error's reason (``rate_limited``, ``provider_error``, ``timeout``)."""
    status: int | None = None
    """``retry``: the HTTP status, when there was one."""
    retry_after_s: float | None = None
    """``retry``: the provider's ``Retry-After``, when it sent one."""
    delay_s: float = 0.0
    """``retry``: the wait before the next attempt."""
    message: str = ""
    """``retry``: the provider's error; ``breaker``: its last error (``reason: message``)."""
    change: BreakerChange | None = None
    """``breaker``: the transition."""
    failure_threshold: int = 0
    """``breaker``: consecutive failures that open it."""
    provider: str = ""
    """``breaker``: the provider it guards."""


class ResilientAdapter:
    """A :class:`~runtime.llm.base.ModelAdapter` that retries and breaks the circuit.

    :meth:`complete` blocks (``sleep`` between attempts); :meth:`acomplete` and
    :meth:`acomplete_with_notes` are coroutines (``asleep`` between attempts) that call the
    wrapped adapter's ``acomplete`` on the shared ``client``, or its ``complete`` on a worker
    thread when it has no async path. Both paths share the breaker and the retry rules.
    Many calls may run at once on one instance: each call keeps its own notes, and
    :meth:`acomplete_with_notes` (or :meth:`complete_with_notes`) returns them with the
    outcome; :meth:`take_notes` gathers the notes of the calls made by :meth:`complete` and
    :meth:`acomplete`, for a caller that makes one call at a time.
    """

    def __init__(
        self,
        inner: ModelAdapter,
        retry: RetryPolicy | None = None,
        breaker: CircuitBreaker | None = None,
        *,
        sleep: Callable[[float], None] = time.sleep,
        asleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.inner = inner
        self.retry = retry or RetryPolicy()
        self.breaker = breaker or CircuitBreaker(clock=clock)
        self._sleep = sleep
        self._asleep = asleep
        self._clock = clock
        self._notes: list[ModelNote] = []
        self._last_error: ModelError | None = None
        self._started = 0.0

    @property
    def provider(self) -> str:
        """The wrapped adapter's provider."""
        return self.inner.provider

    @property
    def model(self) -> str | None:
        """The wrapped adapter's model."""
        return self.inner.model

    def take_notes(self) -> list[ModelNote]:
        """The retries and breaker transitions since the last call, oldest first."""
        elapsed_ms = max(0, round((self._clock() - self._started) * 1000))
        for change in self.breaker.take_changes():  # made on the breaker directly
            self._notes.append(self._breaker_note(change, elapsed_ms))
        notes, self._notes = self._notes, []
        return notes

    def _breaker_note(self, change: BreakerChange, elapsed_ms: int) -> ModelNote:
        last = "" if self._last_error is None else self._last_error.describe()
        return ModelNote(
            kind="breaker",
            elapsed_ms=elapsed_ms,
            change=change,
            failure_threshold=self.breaker.failure_threshold,
            message=last if change.state != "closed" else "",
            provider=self.provider,
        )

    def complete(self, request: ModelRequest) -> ModelReply:
        """Call the wrapped adapter, retrying retryable errors within ``request.timeout_s``."""
        call = _Call(self, request)
        self._started = call.started
        try:
            return self._drive(call)
        finally:
            self._notes.extend(call.finish())

    def complete_with_notes(
        self, request: ModelRequest
    ) -> tuple[ModelReply | ModelError, list[ModelNote]]:
        """:meth:`complete`, returning the reply or the error with this call's own notes."""
        call = _Call(self, request)
        try:
            reply = self._drive(call)
        except ModelError as error:
            return error, call.finish()
        return reply, call.finish()

    async def acomplete(
        self, request: ModelRequest, *, client: httpx.AsyncClient | None = None
    ) -> ModelReply:
        """:meth:`complete` as a coroutine; its notes go to :meth:`take_notes`."""
        call = _Call(self, request)
        self._started = call.started
        try:
            return await self._adrive(call, client)
        finally:
            self._notes.extend(call.finish())

    async def acomplete_with_notes(
        self, request: ModelRequest, *, client: httpx.AsyncClient | None = None
    ) -> tuple[ModelReply | ModelError, list[ModelNote]]:
        """Run one call without blocking; return the reply or the error with its own notes.

        ``client`` is the shared connection pool, passed to the wrapped adapter's
        ``acomplete``. An unexpected exception (or the call's cancellation) propagates.
        """
        call = _Call(self, request)
        try:
            reply = await self._adrive(call, client)
        except ModelError as error:
            return error, call.finish()
        return reply, call.finish()

    def _drive(self, call: _Call) -> ModelReply:
        """Make ``call``'s attempts, blocking; return the reply or raise the final error."""
        while True:
            attempt = call.next_attempt()
            try:
                reply = self.inner.complete(attempt)
            except ModelError as error:
                self._sleep(call.failed(error))
                continue
            except BaseException:
                call.aborted()
                raise
            return call.succeeded(reply)

    async def _adrive(self, call: _Call, client: httpx.AsyncClient | None) -> ModelReply:
        """:meth:`_drive` as a coroutine: async attempts, async waits between them."""
        while True:
            attempt = call.next_attempt()
            try:
                reply = await self._inner_acomplete(attempt, client)
            except ModelError as error:
                await self._asleep(call.failed(error))
                continue
            except BaseException:
                call.aborted()
                raise
            return call.succeeded(reply)

    async def _inner_acomplete(
        self, request: ModelRequest, client: httpx.AsyncClient | None
    ) -> ModelReply:
        """One attempt: the wrapped adapter's async path, or its blocking one on a thread."""
        if isinstance(self.inner, AsyncModelAdapter):
            return await self.inner.acomplete(request, client=client)
        return await asyncio.to_thread(self.inner.complete, request)

    def _record(self, error: ModelError, into: list[BreakerChange]) -> None:
        """Tell the breaker what the failed attempt says about the provider."""
        if error.retryable:
            self._last_error = error
            self.breaker.record_failure(into)
        elif error.status is not None or error.reason == "bad_response":
            self.breaker.record_success(into)  # the provider is up; the request was refused
        else:
            self.breaker.release()

    def _next_delay(self, error: ModelError, attempt: int) -> float | None:
        """Return the wait before the next attempt, or ``None`` when not retrying."""
        if not error.retryable or attempt >= self.retry.max_attempts:
            return None
        delay = self.retry.delay_s(attempt)
        if error.retry_after_s is not None:
            delay = max(delay, error.retry_after_s)
        return delay

    def _circuit_open(self, attempts: int) -> ModelError:
        """Return the error for a call refused by the open breaker."""
        snap = self.breaker.snapshot()
        wait = f"; next probe in {snap.retry_in_s:.1f}s" if snap.retry_in_s is not None else ""
        last = self._last_error
        cause = f"; last error: {last.describe()}" if last is not None else ""
        return ModelError(
            "circuit_open",
            f"{self.provider} circuit breaker is open after {snap.consecutive_failures} "
            f"consecutive failures{wait}{cause}",
            attempts=attempts,
            last_error=None if last is None else last.describe(),
            status=None if last is None else last.status,
        )


class _Call:
    """One call through a :class:`ResilientAdapter`: its deadline, attempts and notes.

    The blocking and the async paths drive the same steps: :meth:`next_attempt` (the
    breaker's permission and the time left), then :meth:`succeeded`, :meth:`failed` (the
    wait before the next attempt, or the call's final error raised) or :meth:`aborted`;
    :meth:`finish` returns the notes.
    """

    def __init__(self, adapter: ResilientAdapter, request: ModelRequest) -> None:
        self.adapter = adapter
        self.request = request
        self.started = adapter._clock()
        self.deadline = self.started + request.timeout_s
        self.attempt = 0
        self.notes: list[ModelNote] = []
        self.changes: list[BreakerChange] = []

    def next_attempt(self) -> ModelRequest:
        """Return the next attempt's request (the time left); raise ``circuit_open`` if refused."""
        self.attempt += 1
        if not self.adapter.breaker.allow(self.changes):
            raise self.adapter._circuit_open(self.attempt - 1)
        if self.attempt == 1:  # the whole budget, as asked (its error messages name it)
            return self.request
        remaining = max(0.0, self.deadline - self.adapter._clock())
        return msgspec.structs.replace(self.request, timeout_s=remaining)

    def succeeded(self, reply: ModelReply) -> ModelReply:
        """Record the provider's answer; return it."""
        self.adapter.breaker.record_success(self.changes)
        return reply

    def failed(self, error: ModelError) -> float:
        """Record a failed attempt; return the wait before the next, or raise the call's error."""
        adapter = self.adapter
        adapter._record(error, self.changes)
        delay = adapter._next_delay(error, self.attempt)
        # once the breaker is open, a retry would be refused: this error is the end
        opened = adapter.breaker.state == "open"
        if opened or delay is None or adapter._clock() + delay >= self.deadline:
            if self.attempt == 1:
                raise error
            raise _final(error, self.attempt) from error
        self._note_changes()  # a transition this failure caused comes first
        self.notes.append(
            ModelNote(
                kind="retry",
                elapsed_ms=self._elapsed_ms(),
                attempt=self.attempt,
                reason=error.reason,
                status=error.status,
                retry_after_s=error.retry_after_s,
                delay_s=round(delay, 3),
                message=error.message,
            )
        )
        return delay

    def aborted(self) -> None:
        """The attempt ended in neither a reply nor a model error: free a half-open probe."""
        self.adapter.breaker.release()

    def finish(self) -> list[ModelNote]:
        """Return the call's notes, its breaker transitions included."""
        self._note_changes()
        return self.notes

    def _elapsed_ms(self) -> int:
        return max(0, round((self.adapter._clock() - self.started) * 1000))

    def _note_changes(self) -> None:
        changes, self.changes = self.changes, []
        elapsed_ms = self._elapsed_ms()
        self.notes += [self.adapter._breaker_note(change, elapsed_ms) for change in changes]


def _final(error: ModelError, attempts: int) -> ModelError:
    """``error`` as the outcome of a call that made several ``attempts``."""
    return ModelError(
        error.reason,
        f"{error.message} (after {attempts} attempts)",
        retryable=error.retryable,
        status=error.status,
        retry_after_s=error.retry_after_s,
        attempts=attempts,
    )
