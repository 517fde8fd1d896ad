"""Building the model adapter a project's options ask for (``llm_adapter``).

The adapters import :mod:`runtime.llm.base`'s types; this module imports the adapters, so
the base never imports them back.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from runtime.errors import InvalidRuntimeOptError
from runtime.llm.base import ModelAdapter
from runtime.llm.deterministic import DeterministicAdapter
from runtime.llm.openai import DEFAULT_BASE_URL, OpenAIAdapter
from runtime.llm.resilience import CircuitBreaker, ResilientAdapter, RetryPolicy
from runtime.option_table import RuntimeOptions

__all__ = ["make_adapter"]


def make_adapter(
    options: Mapping[str, Any],
    *,
    environ: Mapping[str, str] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    asleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> ModelAdapter:
    """Build the adapter the normalized runtime ``options`` ask for.

    ``llm_adapter`` picks ``deterministic`` (default) or ``openai``; the latter reads
    ``llm_base_url``, ``llm_model``, ``llm_api_key_env``, ``llm_system_prompt``,
    ``llm_temperature`` and ``llm_max_tokens``, and is wrapped in a fresh
    :class:`runtime.llm.resilience.ResilientAdapter` (its own circuit breaker). The API key
    is looked up in ``environ`` (default ``os.environ``) at each call, never stored.
    ``sleep`` (blocking calls), ``asleep`` (async calls) and ``clock`` drive the retry
    backoff and the breaker (tests inject fakes).
    """
    settings = RuntimeOptions.of(options)
    kind = settings.llm_adapter
    build = _BUILDERS.get(kind)
    if build is None:
        raise InvalidRuntimeOptError(
            f"llm_adapter must be 'deterministic' or 'openai', got {kind!r}",
            key="llm_adapter",
            reason="invalid_entry",
        )
    return build(settings, os.environ if environ is None else environ, sleep, asleep, clock)


def _openai(
    settings: RuntimeOptions,
    environ: Mapping[str, str],
    sleep: Callable[[float], None],
    asleep: Callable[[float], Awaitable[None]],
    clock: Callable[[], float],
) -> ModelAdapter:
    """The OpenAI-compatible adapter, in a resilient one with its own breaker."""
    inner = OpenAIAdapter(
        base_url=settings.llm_base_url or DEFAULT_BASE_URL,
        model=settings.llm_model,
        api_key_env=settings.llm_api_key_env,
        system_prompt=settings.llm_system_prompt,
        temperature=settings.llm_temperature,
        max_tokens=settings.llm_max_tokens,
        environ=environ,
    )
    return ResilientAdapter(
        inner,
        RetryPolicy(),
        CircuitBreaker(clock=clock),
        sleep=sleep,
        asleep=asleep,
        clock=clock,
    )


_BUILDERS: dict[str, Callable[..., ModelAdapter]] = {
    "deterministic": lambda *_: DeterministicAdapter(),
    "openai": _openai,
}
"""Each ``llm_adapter``'s builder: ``(settings, environ, sleep, asleep, clock)``."""
