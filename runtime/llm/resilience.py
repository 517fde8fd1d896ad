"""Retries with exponential backoff and a circuit breaker around a model adapter.

:class:`ResilientAdapter` wraps any :class:`runtime.llm.base.ModelAdapter`:

- a retryable :class:`~runtime.llm.base.ModelError` (``timeout``, ``rate_limited``,
  ``provider_error`` for 5xx and connection failures) is retried up to
  ``RetryPolicy.max_attempts`` times, waiting ``base_delay_s * 2**(n-1)`` capped at
  ``max_delay_s`` (at least the provider's ``Retry-After``), and never past the request's
  ``timeout_s``: each attempt gets the time that is left, and a wait that would end after
  the deadline is not started;
- every attempt reports to a :class:`CircuitBreaker`: ``failure_threshold`` consecutive
  retryable failures open it, and while open every call fails at once with
  ``ModelError("circuit_open")`` without reaching the provider; after ``reset_after_s`` one
  probe call is let through (half-open) and its outcome closes or reopens the breaker.

Time is injected (``clock``, ``sleep``) so tests never wait for real.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from typing import Literal

import msgspec

from runtime.llm.base import ModelAdapter, ModelError, ModelReply, ModelRequest

__all__ = ["BreakerSnapshot", "BreakerState", "CircuitBreaker", "ResilientAdapter", "RetryPolicy"]

BreakerState = Literal["closed", "open", "half_open"]
"""A circuit breaker's state."""


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


class BreakerSnapshot(msgspec.Struct, frozen=True, kw_only=True):
    """A circuit breaker's observable state at one moment."""

    state: BreakerState
    """``closed``, ``open`` or ``half_open``."""
    consecutive_failures: int
    """Retryable failures since the last success."""
    failure_threshold: int
    """Consecutive failures that open the breaker."""
    retry_in_s: float | None
    """While open, seconds until a probe is let through; otherwise ``None``."""


class CircuitBreaker:
    """Stops calling a provider that keeps failing; thread-safe.

    ``closed``: calls go through. ``failure_threshold`` consecutive failures open it.
    ``open``: :meth:`allow` refuses until ``reset_after_s`` have passed on ``clock``.
    ``half_open``: one probe is allowed; its success closes the breaker, its failure opens
    it again for another ``reset_after_s``.
    """

    def __init__(
        self,
        failure_threshold: int = 5,
        reset_after_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if failure_threshold < 1:
            raise ValueError(f"failure_threshold must be at least 1, got {failure_threshold}")
        self.failure_threshold = failure_threshold
        self.reset_after_s = reset_after_s
        self._clock = clock
        self._lock = threading.Lock()
        self._failures = 0
        self._opened_at: float | None = None
        self._probing = False

    @property
    def state(self) -> BreakerState:
        """The current state."""
        with self._lock:
            return self._state()

    def _state(self) -> BreakerState:
        if self._opened_at is None:
            return "closed"
        if self._clock() - self._opened_at < self.reset_after_s:
            return "open"
        return "half_open"

    def allow(self) -> bool:
        """Return whether a call may go to the provider now (claims the half-open probe)."""
        with self._lock:
            state = self._state()
            if state == "closed":
                return True
            if state == "open" or self._probing:
                return False
            self._probing = True
            return True

    def record_success(self) -> None:
        """Record that the provider answered: close the breaker, forget past failures."""
        with self._lock:
            self._failures = 0
            self._opened_at = None
            self._probing = False

    def record_failure(self) -> None:
        """Record a retryable failure; open the breaker at the threshold (or a failed probe)."""
        with self._lock:
            self._failures += 1
            if self._probing or self._failures >= self.failure_threshold:
                self._opened_at = self._clock()
            self._probing = False

    def release(self) -> None:
        """Free the half-open probe of a call that told nothing about the provider."""
        with self._lock:
            self._probing = False

    def snapshot(self) -> BreakerSnapshot:
        """Return the breaker's state as a frozen snapshot."""
        with self._lock:
            state = self._state()
            retry_in = None
            if state == "open" and self._opened_at is not None:
                retry_in = self.reset_after_s - (self._clock() - self._opened_at)
            return BreakerSnapshot(
                state=state,
                consecutive_failures=self._failures,
                failure_threshold=self.failure_threshold,
                retry_in_s=retry_in,
            )


class ResilientAdapter:
    """A :class:`~runtime.llm.base.ModelAdapter` that retries and breaks the circuit."""

    def __init__(
        self,
        inner: ModelAdapter,
        retry: RetryPolicy | None = None,
        breaker: CircuitBreaker | None = None,
        *,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.inner = inner
        self.retry = retry or RetryPolicy()
        self.breaker = breaker or CircuitBreaker(clock=clock)
        self._sleep = sleep
        self._clock = clock

    @property
    def provider(self) -> str:
        """The wrapped adapter's provider."""
        return self.inner.provider

    @property
    def model(self) -> str | None:
        """The wrapped adapter's model."""
        return self.inner.model

    def complete(self, request: ModelRequest) -> ModelReply:
        """Call the wrapped adapter, retrying retryable errors within ``request.timeout_s``."""
        deadline = self._clock() + request.timeout_s
        attempt = 0
        while True:
            attempt += 1
            if not self.breaker.allow():
                raise self._circuit_open(attempt - 1)
            remaining = max(0.0, deadline - self._clock())
            try:
                reply = self.inner.complete(msgspec.structs.replace(request, timeout_s=remaining))
            except ModelError as error:
                self._record(error)
                delay = self._next_delay(error, attempt)
                if delay is None or self._clock() + delay >= deadline:
                    if attempt == 1:
                        raise
                    raise _final(error, attempt) from error
                self._sleep(delay)
                continue
            except BaseException:
                self.breaker.release()
                raise
            self.breaker.record_success()
            return reply

    def _record(self, error: ModelError) -> None:
        """Tell the breaker what the failed attempt says about the provider."""
        if error.retryable:
            self.breaker.record_failure()
        elif error.status is not None or error.reason == "bad_response":
            self.breaker.record_success()  # the provider is up; the request was refused
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
        return ModelError(
            "circuit_open",
            f"{self.provider} circuit breaker is open after {snap.consecutive_failures} "
            f"consecutive failures{wait}",
            attempts=attempts,
        )


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
