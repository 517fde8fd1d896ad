"""The circuit breaker that stops calling a model provider that keeps failing.

:class:`CircuitBreaker` is shared by every call through one
:class:`runtime.llm.resilience.ResilientAdapter`, blocking or async, on any thread. Each
transition is a :class:`BreakerChange`; a call passes its own list (``into``) so that, with
many calls at once, each keeps the transitions it caused.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Literal

import msgspec

__all__ = ["BreakerChange", "BreakerSnapshot", "BreakerState", "CircuitBreaker"]

BreakerState = Literal["closed", "open", "half_open"]
"""A circuit breaker's state."""


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


class BreakerChange(msgspec.Struct, frozen=True, kw_only=True):
    """One transition of a circuit breaker."""

    previous: BreakerState
    """The state it left."""
    state: BreakerState
    """The state it entered."""
    consecutive_failures: int
    """Retryable failures since the last success, at the transition."""


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
        self._changes: list[BreakerChange] = []

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

    def allow(self, into: list[BreakerChange] | None = None) -> bool:
        """Return whether a call may go to the provider now (claims the half-open probe).

        A transition this causes goes to ``into`` (the call's own list) when given, else to
        the breaker's log (:meth:`take_changes`); so do :meth:`record_success`'s and
        :meth:`record_failure`'s: with many calls at once, each keeps the transitions it caused.
        """
        with self._lock:
            return _ALLOW[self._state()](self, into)

    def _probe(self, into: list[BreakerChange] | None) -> bool:
        """Half open: the first call to ask is the probe; the others wait for its outcome."""
        if self._probing:
            return False
        self._probing = True
        self._changed("open", "half_open", into)
        return True

    def record_success(self, into: list[BreakerChange] | None = None) -> None:
        """Record that the provider answered: close the breaker, forget past failures."""
        with self._lock:
            self._changed(self._state(), "closed", into)
            self._failures = 0
            self._opened_at = None
            self._probing = False

    def record_failure(self, into: list[BreakerChange] | None = None) -> None:
        """Record a retryable failure; open the breaker at the threshold (or a failed probe)."""
        with self._lock:
            self._failures += 1
            if self._probing or self._failures >= self.failure_threshold:
                previous = self._state()
                self._opened_at = self._clock()
                self._changed(previous, "open", into)
            self._probing = False

    def _changed(
        self, previous: BreakerState, state: BreakerState, into: list[BreakerChange] | None
    ) -> None:
        """Record a transition (staying in a state is none)."""
        if previous == state:
            return
        change = BreakerChange(previous=previous, state=state, consecutive_failures=self._failures)
        (self._changes if into is None else into).append(change)

    def take_changes(self) -> list[BreakerChange]:
        """The transitions since the last call, oldest first (and forget them)."""
        with self._lock:
            changes, self._changes = self._changes, []
            return changes

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


_ALLOW: dict[BreakerState, Callable[[CircuitBreaker, list[BreakerChange] | None], bool]] = {
    "closed": lambda breaker, into: True,
    "open": lambda breaker, into: False,
    "half_open": CircuitBreaker._probe,
}
"""Whether a call may go to the provider, by the breaker's state."""
