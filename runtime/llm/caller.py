"""Model calls that never block the host: one event loop and one connection pool per process.

A host process runs many conversations; a model that takes seconds must not hold any of
them up. :class:`ModelCaller` owns one asyncio event loop on one daemon thread and one
connection pool per host (shards of ``httpx.AsyncClient``, see :class:`PoolShards`). The
host submits a call and goes on; when it ends, ``done`` is called on the caller's thread
with a :class:`ModelOutcome` (the reply, or the failure's ``reason`` and ``message``, and
the call's notes), and the host turns that into a message to itself::

    caller = ModelCaller()                           # one per host process
    if is_instant(adapter):                          # the deterministic model: no thread hop
        outcome = complete_now(adapter, request)
    else:
        caller.submit(adapter, request, done)        # done(outcome) later, on the caller's thread
    ...
    caller.close()                                   # in-flight calls end as ``cancelled``

How a call runs:

- an adapter with an async path (:class:`~runtime.llm.resilience.ResilientAdapter` over
  :class:`~runtime.llm.openai.OpenAIAdapter`) runs as a coroutine on the loop, on the
  shared pool; its retries wait with ``asyncio.sleep`` and its notes come back with it;
- an instant adapter (``instant = True``: the deterministic model) runs on the loop
  directly; any other blocking adapter runs on a small thread pool (``blocking_workers``);
- at most ``max_concurrent`` calls run at once; the others wait, in order, for a slot;
- a call's ``timeout_s`` is the adapter's to enforce; a wait for a slot spends it, and the
  caller ends any call still running ``timeout_grace_s`` after it with ``timeout``;
- an exception that is not a :class:`~runtime.llm.base.ModelError` ends the call with
  ``adapter_error`` (``TypeName: message``); :meth:`ModelCaller.close` ends every call
  not yet done with ``cancelled``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from collections.abc import Callable
from types import TracebackType

import msgspec

from runtime.errors import RoostError
from runtime.llm.base import AsyncModelAdapter, ModelAdapter, ModelError, ModelReply, ModelRequest
from runtime.llm.pool_shards import DEFAULT_POOL_SIZE, PoolShards
from runtime.llm.resilience import ModelNote
from runtime.logging import get_logger

__all__ = [
    "DEFAULT_MAX_CONCURRENT",
    "ModelCaller",
    "ModelCallerClosedError",
    "ModelOutcome",
    "complete_now",
    "is_instant",
]

DEFAULT_MAX_CONCURRENT = 2000
"""Calls one :class:`ModelCaller` runs at once; more wait for a slot."""

log = get_logger(__name__)


class ModelOutcome(msgspec.Struct, frozen=True, kw_only=True):
    """How one model call ended: a reply, or a failure's stable reason and message."""

    reply: ModelReply | None = None
    """The reply, when the call succeeded."""
    reason: str | None = None
    """When it failed: a ``ModelError.reason``, ``adapter_error`` or ``cancelled``."""
    message: str = ""
    """When it failed: the failure in words (the provider's own message when it sent one)."""
    notes: list[ModelNote] = []
    """The call's retries and breaker transitions, oldest first (journaled with it)."""

    @property
    def ok(self) -> bool:
        """Whether the call returned a reply."""
        return self.reply is not None

    @classmethod
    def failed(cls, error: BaseException, notes: list[ModelNote] | None = None) -> ModelOutcome:
        """The outcome of a call that raised ``error``."""
        if isinstance(error, ModelError):
            return cls(reason=error.reason, message=error.message, notes=notes or [])
        return cls(
            reason="adapter_error", message=f"{type(error).__name__}: {error}", notes=notes or []
        )

    @classmethod
    def noted(cls, result: ModelReply | ModelError, notes: list[ModelNote]) -> ModelOutcome:
        """The outcome of a call that gave its notes with its reply or its error."""
        if isinstance(result, ModelError):
            return cls.failed(result, notes)
        return cls(reply=result, notes=notes)


class ModelCallerClosedError(RoostError):
    """A call was submitted to a :class:`ModelCaller` after :meth:`ModelCaller.close`."""

    code = "model_caller_closed"


def is_instant(adapter: ModelAdapter) -> bool:
    """Whether ``adapter`` answers at once without I/O, so the host may call it inline."""
    return getattr(adapter, "instant", False) is True


def complete_now(adapter: ModelAdapter, request: ModelRequest) -> ModelOutcome:
    """Run one call on this thread (blocking) and return its outcome with its notes.

    For an instant adapter in the host, or a blocking one on a worker thread. An adapter
    with ``complete_with_notes`` (the resilient one) gives its notes with the outcome; one
    with only ``take_notes`` is asked right after the call.
    """
    with_notes = getattr(adapter, "complete_with_notes", None)
    try:
        if with_notes is not None:
            return ModelOutcome.noted(*with_notes(request))
        reply = adapter.complete(request)
    except Exception as e:
        return ModelOutcome.failed(e, _taken_notes(adapter))
    return ModelOutcome(reply=reply, notes=_taken_notes(adapter))


def _taken_notes(adapter: ModelAdapter) -> list[ModelNote]:
    take = getattr(adapter, "take_notes", None)
    return list(take()) if take is not None else []


class ModelCaller:
    """Runs model calls on one event loop thread and one connection pool; see the module.

    ``max_concurrent`` bounds the calls in flight (others queue, in submission order);
    ``pool_size`` is the connections of each of the pool's shards (see :class:`PoolShards`);
    ``blocking_workers`` threads run adapters that have no async path and are not instant.
    Thread-safe: :meth:`submit` may be called from any thread.
    """

    def __init__(
        self,
        *,
        max_concurrent: int = DEFAULT_MAX_CONCURRENT,
        pool_size: int = DEFAULT_POOL_SIZE,
        blocking_workers: int = 4,
        timeout_grace_s: float = 1.0,
        name: str = "model-caller",
    ) -> None:
        if max_concurrent < 1:
            raise ValueError(f"max_concurrent must be at least 1, got {max_concurrent}")
        self.max_concurrent = max_concurrent
        self.timeout_grace_s = timeout_grace_s
        self._pools = PoolShards(pool_size)
        self._blocking = concurrent.futures.ThreadPoolExecutor(
            max_workers=blocking_workers, thread_name_prefix=f"{name}-blocking"
        )
        self._lock = threading.Lock()
        self._closed = False
        self._tasks: set[asyncio.Task[None]] = set()
        self._loop = asyncio.new_event_loop()
        self._slots = asyncio.Semaphore(max_concurrent)
        started = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(started,), name=name, daemon=True)
        self._thread.start()
        started.wait()

    @property
    def thread(self) -> threading.Thread:
        """The thread the loop runs on (``done`` callbacks run on it)."""
        return self._thread

    @property
    def in_flight(self) -> int:
        """Calls started on the loop and not yet done (running or waiting for a slot)."""
        return len(self._tasks)

    def submit(
        self, adapter: ModelAdapter, request: ModelRequest, done: Callable[[ModelOutcome], None]
    ) -> None:
        """Start one call; ``done(outcome)`` is called once, on the caller's thread.

        Raises :class:`ModelCallerClosedError` after :meth:`close`. ``done`` must not block:
        hand the outcome on (a message to the host) and return. An exception in it is logged.
        """
        with self._lock:
            if self._closed:
                raise ModelCallerClosedError("the model caller is closed")
            self._loop.call_soon_threadsafe(self._start, adapter, request, done)

    def close(self, timeout_s: float = 10.0) -> None:
        """Cancel every call not yet done (``done`` gets ``cancelled``), close the pool, stop.

        Idempotent. Must not be called from a ``done`` callback (the caller's own thread).
        """
        if threading.current_thread() is self._thread:
            raise RuntimeError("ModelCaller.close() called from its own thread")
        with self._lock:
            if self._closed:
                return
            self._closed = True
        try:
            future = asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop)
            future.result(timeout_s)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout_s)
            self._blocking.shutdown(wait=False, cancel_futures=True)

    def __enter__(self) -> ModelCaller:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _run(self, started: threading.Event) -> None:
        """The loop thread (the pool's shards are made on it): serve until :meth:`close`."""
        asyncio.set_event_loop(self._loop)
        started.set()
        try:
            self._loop.run_forever()
        finally:
            self._loop.run_until_complete(self._loop.shutdown_asyncgens())
            self._loop.close()

    def _start(
        self,
        adapter: ModelAdapter,
        request: ModelRequest,
        done: Callable[[ModelOutcome], None],
    ) -> None:
        """On the loop: start the call's task; ``done`` is called exactly once, whatever ends it."""
        delivered = False

        def deliver(outcome: ModelOutcome) -> None:
            nonlocal delivered
            if not delivered:
                delivered = True
                _deliver(done, outcome)

        def finished(task: asyncio.Task[None]) -> None:
            self._tasks.discard(task)
            if task.cancelled():  # by close(), perhaps before it ever ran
                message = "the model call was cancelled: the model caller closed"
                deliver(ModelOutcome(reason="cancelled", message=message))
            elif (error := task.exception()) is not None:
                deliver(ModelOutcome.failed(error))

        task = self._loop.create_task(self._call(adapter, request, deliver))
        self._tasks.add(task)
        task.add_done_callback(finished)

    async def _call(
        self,
        adapter: ModelAdapter,
        request: ModelRequest,
        deliver: Callable[[ModelOutcome], None],
    ) -> None:
        """Wait for a slot, run the call within its time, hand the outcome on."""
        timeout_s = request.timeout_s
        if self._slots.locked():  # the wait for a slot spends the call's time
            queued = time.monotonic()
            try:
                async with asyncio.timeout(timeout_s):
                    await self._slots.acquire()
            except TimeoutError:
                message = f"no slot for the model call within {timeout_s:.3g}s"
                deliver(ModelOutcome(reason="timeout", message=message))
                return
            timeout_s -= time.monotonic() - queued
            request = msgspec.structs.replace(request, timeout_s=timeout_s)
        else:
            await self._slots.acquire()
        try:
            outcome = await self._bounded(adapter, request)
        finally:
            self._slots.release()
        deliver(outcome)

    async def _bounded(self, adapter: ModelAdapter, request: ModelRequest) -> ModelOutcome:
        """Run the call, with a guard ``timeout_grace_s`` past its ``timeout_s``."""
        try:
            async with asyncio.timeout(request.timeout_s + self.timeout_grace_s):
                return await self._outcome(adapter, request)
        except TimeoutError:
            return ModelOutcome(
                reason="timeout",
                message=f"no answer from {adapter.provider} within {request.timeout_s:.3g}s",
            )

    async def _outcome(self, adapter: ModelAdapter, request: ModelRequest) -> ModelOutcome:
        """Run the call the way its adapter allows (see the module docstring)."""
        with_notes = getattr(adapter, "acomplete_with_notes", None)
        if with_notes is not None or isinstance(adapter, AsyncModelAdapter):
            client = self._pools.lease()
            try:
                if with_notes is not None:
                    return ModelOutcome.noted(*await with_notes(request, client=client))
                assert isinstance(adapter, AsyncModelAdapter)  # narrowed above, for mypy
                return ModelOutcome(reply=await adapter.acomplete(request, client=client))
            except Exception as e:  # a ModelError, or an adapter's bug: both end the call
                return ModelOutcome.failed(e)
            finally:
                self._pools.release(client)
        if is_instant(adapter):
            return complete_now(adapter, request)
        return await self._loop.run_in_executor(self._blocking, complete_now, adapter, request)

    async def _shutdown(self) -> None:
        """On the loop: cancel the calls not yet done, wait for their ``done``, close the pool."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self._pools.aclose()


def _deliver(done: Callable[[ModelOutcome], None], outcome: ModelOutcome) -> None:
    """Call ``done``; log (never raise) what it raises, so the loop goes on."""
    try:
        done(outcome)
    except Exception as e:
        log.exception("model_call_done_failed", error=f"{type(e).__name__}: {e}")
