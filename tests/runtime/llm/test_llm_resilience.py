"""Retries with backoff and the circuit breaker, driven by a fake clock and a fake sleep."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.llm.base import ModelAdapter, ModelError, ModelReply, ModelRequest
from runtime.llm.resilience import (
    BreakerSnapshot,
    CircuitBreaker,
    ResilientAdapter,
    RetryPolicy,
)

OK = ModelReply(text="ok", deltas=["ok"])


def server_error() -> ModelError:
    return ModelError("provider_error", "HTTP 500", retryable=True, status=500)


@dataclass
class FakeClock:
    """Time that moves only when told (or when the fake sleep runs)."""

    now: float = 1000.0
    sleeps: list[float] = field(default_factory=list)

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


@dataclass
class ScriptedAdapter:
    """A ModelAdapter that plays a script of replies and errors; each call takes `cost_s`."""

    script: list[ModelReply | ModelError | BaseException]
    clock: FakeClock
    cost_s: float = 0.0
    provider: str = "scripted"
    model: str | None = "scripted-1"
    timeouts: list[float] = field(default_factory=list)

    def complete(self, request: ModelRequest) -> ModelReply:
        self.timeouts.append(request.timeout_s)
        self.clock.now += self.cost_s
        outcome = self.script.pop(0)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome


def resilient(
    *outcomes: ModelReply | ModelError | BaseException,
    retry: RetryPolicy | None = None,
    threshold: int = 5,
    cost_s: float = 0.0,
) -> tuple[ResilientAdapter, ScriptedAdapter, FakeClock]:
    clock = FakeClock()
    inner = ScriptedAdapter(list(outcomes), clock, cost_s=cost_s)
    breaker = CircuitBreaker(failure_threshold=threshold, reset_after_s=30.0, clock=clock)
    adapter = ResilientAdapter(inner, retry, breaker, sleep=clock.sleep, clock=clock)
    return adapter, inner, clock


REQUEST = ModelRequest(messages=[{"role": "user", "content": "hi"}], timeout_s=60.0)


def test_backoff_doubles_from_the_base_delay_up_to_the_cap() -> None:
    policy = RetryPolicy()
    assert [policy.delay_s(n) for n in range(1, 7)] == [0.2, 0.4, 0.8, 1.6, 2.0, 2.0]


def test_jitter_spreads_a_delay_over_its_upper_half() -> None:
    policy = RetryPolicy(base_delay_s=1.0, max_delay_s=10.0, jitter=True)
    assert policy.delay_s(2, rand=lambda: 0.0) == 1.0
    assert policy.delay_s(2, rand=lambda: 1.0) == 2.0
    assert policy.delay_s(2, rand=lambda: 0.5) == 1.5


@settings(max_examples=100)
@given(
    base=st.floats(min_value=0.001, max_value=5.0),
    cap=st.floats(min_value=0.001, max_value=10.0),
    attempts=st.integers(min_value=1, max_value=30),
)
def test_backoff_never_shrinks_and_never_exceeds_the_cap(
    base: float, cap: float, attempts: int
) -> None:
    policy = RetryPolicy(base_delay_s=base, max_delay_s=cap)
    delays = [policy.delay_s(n) for n in range(1, attempts + 1)]
    assert delays == sorted(delays)
    assert all(0 < d <= cap for d in delays)


def test_the_wrapper_reports_the_inner_provider_and_model() -> None:
    adapter, _, _ = resilient()
    assert (adapter.provider, adapter.model) == ("scripted", "scripted-1")
    assert isinstance(adapter, ModelAdapter)


def test_a_retryable_error_is_retried_after_the_backoff_and_the_reply_returned() -> None:
    adapter, inner, clock = resilient(server_error(), OK)
    assert adapter.complete(REQUEST) == OK
    assert clock.sleeps == [0.2]
    assert len(inner.timeouts) == 2


def test_a_non_retryable_error_is_raised_at_once() -> None:
    error = ModelError("provider_error", "HTTP 400", status=400)
    adapter, inner, clock = resilient(error, OK)
    with pytest.raises(ModelError) as caught:
        adapter.complete(REQUEST)
    assert caught.value is error
    assert clock.sleeps == []
    assert len(inner.timeouts) == 1


def test_retries_stop_after_max_attempts_with_the_last_error() -> None:
    adapter, inner, clock = resilient(server_error(), server_error(), server_error(), OK)
    with pytest.raises(ModelError) as caught:
        adapter.complete(REQUEST)
    error = caught.value
    assert (error.reason, error.status, error.retryable, error.attempts) == (
        "provider_error",
        500,
        True,
        3,
    )
    assert error.message == "HTTP 500 (after 3 attempts)"
    assert clock.sleeps == [0.2, 0.4]
    assert len(inner.timeouts) == 3


def test_a_longer_retry_after_from_the_provider_is_honoured() -> None:
    limited = ModelError("rate_limited", "HTTP 429", retryable=True, status=429, retry_after_s=5.0)
    adapter, _, clock = resilient(limited, OK)
    assert adapter.complete(REQUEST) == OK
    assert clock.sleeps == [5.0]


def test_each_attempt_gets_only_the_time_left_in_the_budget() -> None:
    adapter, inner, _ = resilient(server_error(), OK, cost_s=1.0)
    request = ModelRequest(messages=[], timeout_s=10.0)
    assert adapter.complete(request) == OK
    assert inner.timeouts == [10.0, pytest.approx(8.8)]


def test_no_retry_starts_a_wait_that_would_end_past_the_budget() -> None:
    timeout = ModelError("timeout", "slow", retryable=True)
    adapter, inner, clock = resilient(timeout, timeout, OK, cost_s=0.2)
    with pytest.raises(ModelError) as caught:
        adapter.complete(ModelRequest(messages=[], timeout_s=0.5))
    assert (caught.value.reason, caught.value.attempts) == ("timeout", 2)
    assert clock.sleeps == [0.2]
    assert inner.timeouts == [0.5, pytest.approx(0.1)]


def test_the_breaker_opens_after_consecutive_failures_and_refuses_without_calling() -> None:
    adapter, inner, _ = resilient(
        server_error(), server_error(), OK, retry=RetryPolicy(max_attempts=1), threshold=2
    )
    for _ in range(2):
        with pytest.raises(ModelError, match=r"^HTTP 500$"):
            adapter.complete(REQUEST)
    with pytest.raises(ModelError) as caught:
        adapter.complete(REQUEST)
    assert (caught.value.reason, caught.value.retryable) == ("circuit_open", False)
    assert caught.value.message == (
        "scripted circuit breaker is open after 2 consecutive failures; next probe in 30.0s; "
        "last error: provider_error: HTTP 500"
    )
    assert caught.value.details["last_error"] == "provider_error: HTTP 500"
    assert len(inner.timeouts) == 2
    assert adapter.breaker.state == "open"


def test_an_opening_breaker_stops_the_retries_of_the_call_in_progress() -> None:
    adapter, inner, clock = resilient(server_error(), server_error(), OK, threshold=2)
    with pytest.raises(ModelError) as caught:
        adapter.complete(REQUEST)
    # the call ends with the provider's own error, without a wait the breaker would refuse
    assert (caught.value.reason, caught.value.attempts) == ("provider_error", 2)
    assert caught.value.message == "HTTP 500 (after 2 attempts)"
    assert len(inner.timeouts) == 2
    assert clock.sleeps == [0.2]
    with pytest.raises(ModelError) as refused:
        adapter.complete(REQUEST)
    assert refused.value.reason == "circuit_open"
    assert refused.value.message.endswith("; last error: provider_error: HTTP 500")


def test_after_the_reset_time_one_probe_goes_through_and_its_success_closes_the_breaker() -> None:
    adapter, inner, clock = resilient(
        server_error(), OK, retry=RetryPolicy(max_attempts=1), threshold=1
    )
    with pytest.raises(ModelError):
        adapter.complete(REQUEST)
    clock.now += 29.9
    assert adapter.breaker.state == "open"
    clock.now += 0.1
    assert adapter.breaker.snapshot().state == "half_open"
    assert adapter.complete(REQUEST) == OK
    assert adapter.breaker.snapshot() == BreakerSnapshot(
        state="closed", consecutive_failures=0, failure_threshold=1, retry_in_s=None
    )
    assert len(inner.timeouts) == 2


def test_a_failed_probe_opens_the_breaker_for_another_reset_period() -> None:
    adapter, _, clock = resilient(
        server_error(), server_error(), retry=RetryPolicy(max_attempts=1), threshold=3
    )
    adapter.breaker.record_failure()
    adapter.breaker.record_failure()
    with pytest.raises(ModelError, match=r"^HTTP 500$"):
        adapter.complete(REQUEST)
    clock.now += 30.0
    with pytest.raises(ModelError, match=r"^HTTP 500$"):
        adapter.complete(REQUEST)
    assert adapter.breaker.snapshot() == BreakerSnapshot(
        state="open", consecutive_failures=4, failure_threshold=3, retry_in_s=30.0
    )


def test_a_refused_request_shows_the_provider_is_up_and_resets_the_failure_count() -> None:
    refused = ModelError("provider_error", "HTTP 400", status=400)
    adapter, _, _ = resilient(server_error(), refused, retry=RetryPolicy(max_attempts=1))
    for _ in range(2):
        with pytest.raises(ModelError):
            adapter.complete(REQUEST)
    assert adapter.breaker.snapshot().consecutive_failures == 0


def test_a_missing_key_tells_the_breaker_nothing() -> None:
    missing = ModelError("auth_missing", "no key")
    adapter, _, clock = resilient(missing, OK, retry=RetryPolicy(max_attempts=1), threshold=1)
    adapter.breaker.record_failure()
    clock.now += 30.0
    with pytest.raises(ModelError, match=r"^no key$"):
        adapter.complete(REQUEST)
    assert adapter.breaker.snapshot().consecutive_failures == 1
    assert adapter.complete(REQUEST) == OK  # the probe was freed, not lost
    assert adapter.breaker.state == "closed"


def test_an_unexpected_exception_frees_the_half_open_probe() -> None:
    adapter, _, clock = resilient(RuntimeError("bug"), OK, threshold=1)
    adapter.breaker.record_failure()
    clock.now += 30.0
    with pytest.raises(RuntimeError, match=r"^bug$"):
        adapter.complete(REQUEST)
    assert adapter.complete(REQUEST) == OK


def test_only_one_half_open_probe_is_allowed_at_a_time() -> None:
    clock = FakeClock()
    breaker = CircuitBreaker(failure_threshold=1, reset_after_s=10.0, clock=clock)
    breaker.record_failure()
    assert breaker.allow() is False
    clock.now += 10.0
    assert breaker.allow() is True
    assert breaker.allow() is False
    breaker.release()
    assert breaker.allow() is True


def test_a_closed_breaker_allows_every_call_and_counts_failures() -> None:
    breaker = CircuitBreaker(failure_threshold=3, clock=FakeClock())
    breaker.record_failure()
    breaker.record_failure()
    assert breaker.allow() is True
    assert breaker.snapshot() == BreakerSnapshot(
        state="closed", consecutive_failures=2, failure_threshold=3, retry_in_s=None
    )


def test_a_breaker_needs_a_positive_threshold() -> None:
    with pytest.raises(ValueError, match=r"^failure_threshold must be at least 1, got 0$"):
        CircuitBreaker(failure_threshold=0)


def test_model_errors_have_stable_reasons() -> None:
    with pytest.raises(ValueError, match=r"^unknown model error reason 'oops'$"):
        ModelError("oops", "x")
    error = ModelError("rate_limited", "HTTP 429", retryable=True, status=429)
    assert error.code == "model_error"
    assert error.describe() == "rate_limited: HTTP 429"
    assert error.details == {"reason": "rate_limited", "retryable": True, "status": 429}


def rate_limited(retry_after_s: float | None = None) -> ModelError:
    return ModelError(
        "rate_limited", "HTTP 429", retryable=True, status=429, retry_after_s=retry_after_s
    )


def test_every_retry_is_noted_with_its_reason_and_wait() -> None:
    adapter, _, _ = resilient(rate_limited(1.5), server_error(), OK)
    assert adapter.complete(REQUEST) == OK
    notes = adapter.take_notes()
    assert [(n.kind, n.attempt, n.reason, n.status) for n in notes] == [
        ("retry", 1, "rate_limited", 429),
        ("retry", 2, "provider_error", 500),
    ]
    assert (notes[0].retry_after_s, notes[0].delay_s, notes[0].message) == (1.5, 1.5, "HTTP 429")
    assert (notes[1].delay_s, notes[1].elapsed_ms) == (0.4, 1500)
    assert adapter.take_notes() == []  # taken once


def test_every_breaker_transition_is_noted_with_the_providers_last_error() -> None:
    adapter, _, clock = resilient(
        server_error(), server_error(), OK, retry=RetryPolicy(max_attempts=1), threshold=1
    )
    with pytest.raises(ModelError):
        adapter.complete(REQUEST)
    [opened] = adapter.take_notes()
    assert opened.kind == "breaker" and opened.change is not None
    assert (opened.change.previous, opened.change.state) == ("closed", "open")
    assert (opened.message, opened.failure_threshold) == ("provider_error: HTTP 500", 1)
    with pytest.raises(ModelError, match=r"last error: provider_error: HTTP 500$"):
        adapter.complete(REQUEST)
    assert adapter.take_notes() == []  # refused: nothing changed
    for _ in range(2):  # a failed probe, then a good one
        clock.now += 30.0
        with contextlib.suppress(ModelError):
            adapter.complete(REQUEST)
    changes = [(n.change.previous, n.change.state) for n in adapter.take_notes() if n.change]
    assert changes == [
        ("open", "half_open"),
        ("half_open", "open"),
        ("open", "half_open"),
        ("half_open", "closed"),
    ]
