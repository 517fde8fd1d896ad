"""The model caller: many calls on one event loop thread and one pool, against real servers."""

from __future__ import annotations

import asyncio
import os
import pickle
import queue
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import httpx
import pytest

from runtime.llm.adapters import make_adapter
from runtime.llm.base import ModelAdapter, ModelError, ModelReply, ModelRequest
from runtime.llm.caller import (
    ModelCaller,
    ModelCallerClosedError,
    ModelOutcome,
    complete_now,
    is_instant,
)
from runtime.llm.deterministic import DeterministicAdapter
from runtime.llm.pool_shards import PoolShards
from runtime.llm.resilience import ResilientAdapter
from tests.runtime.chat_server import ChatServer, ErrorReply, StreamReply

ROOT = Path(__file__).resolve().parents[3]
WAIT_S = 120.0


def request(content: str = "hi", timeout_s: float = 60.0) -> ModelRequest:
    return ModelRequest(messages=[{"role": "user", "content": content}], timeout_s=timeout_s)


def openai_for(base_url: str) -> ModelAdapter:
    return make_adapter({"llm_adapter": "openai", "llm_base_url": base_url, "llm_model": "m"})


@dataclass
class Outcomes:
    """Collects ``done`` calls: the outcome and the thread it came on, by key."""

    cond: threading.Condition = field(default_factory=threading.Condition)
    by_key: dict[Any, ModelOutcome] = field(default_factory=dict)
    threads: set[threading.Thread] = field(default_factory=set)
    calls: int = 0

    def done(self, key: Any) -> Any:
        def record(outcome: ModelOutcome) -> None:
            with self.cond:
                self.calls += 1
                self.by_key[key] = outcome
                self.threads.add(threading.current_thread())
                self.cond.notify_all()

        return record

    def wait(self, count: int) -> dict[Any, ModelOutcome]:
        with self.cond:
            assert self.cond.wait_for(lambda: len(self.by_key) >= count, WAIT_S), self.by_key
            return dict(self.by_key)


@dataclass
class HeldAdapter:
    """An async adapter whose calls wait until released; counts how many run at once."""

    provider: str = "held"
    model: str | None = "held-1"
    running: int = 0
    most: int = 0
    release: asyncio.Event | None = None
    loop: asyncio.AbstractEventLoop | None = None

    def complete(self, request: ModelRequest) -> ModelReply:
        raise AssertionError("the caller must use the async path")

    def release_all(self) -> None:
        """Let every call end (from any thread: the event is set on its own loop)."""
        assert self.loop is not None and self.release is not None
        self.loop.call_soon_threadsafe(self.release.set)

    async def acomplete(
        self, request: ModelRequest, *, client: httpx.AsyncClient | None = None
    ) -> ModelReply:
        self.loop = asyncio.get_running_loop()
        self.release = self.release or asyncio.Event()
        self.running += 1
        self.most = max(self.most, self.running)
        try:
            await self.release.wait()
        finally:
            self.running -= 1
        return ModelReply(text=str(request.messages[-1]["content"]))


@dataclass
class BlockingAdapter:
    """A blocking adapter without an async path: waits for ``release`` or raises ``error``."""

    release: threading.Event = field(default_factory=threading.Event)
    error: Exception | None = None
    provider: str = "blocking"
    model: str | None = None
    threads: list[str] = field(default_factory=list)

    def complete(self, request: ModelRequest) -> ModelReply:
        self.threads.append(threading.current_thread().name)
        if self.error is not None:
            raise self.error
        self.release.wait(WAIT_S)
        return ModelReply(text="done")


@pytest.fixture
def caller() -> Iterator[ModelCaller]:
    with ModelCaller(timeout_grace_s=0.2) as model_caller:
        yield model_caller


def test_a_call_to_a_real_server_ends_with_its_reply_on_the_callers_thread(
    caller: ModelCaller,
) -> None:
    outcomes = Outcomes()
    with ChatServer([StreamReply(content=["Hel", "lo"])]) as server:
        caller.submit(openai_for(server.base_url), request(), outcomes.done("a"))
        outcome = outcomes.wait(1)["a"]
    assert outcome.ok and outcome.reply is not None
    assert (outcome.reply.text, outcome.reply.deltas) == ("Hello", ["Hel", "lo"])
    assert (outcome.reason, outcome.notes) == (None, [])
    assert outcomes.threads == {caller.thread}


def test_a_retried_call_brings_its_notes_and_a_failed_one_its_reason(caller: ModelCaller) -> None:
    outcomes = Outcomes()
    script = [ErrorReply(status=500, message="boom"), StreamReply(content=["ok"])]
    with ChatServer([*script, ErrorReply(status=400, message="bad tools")]) as server:
        adapter = openai_for(server.base_url)
        caller.submit(adapter, request(), outcomes.done("retried"))
        outcomes.wait(1)
        caller.submit(adapter, request(), outcomes.done("refused"))
        done = outcomes.wait(2)
    retried, refused = done["retried"], done["refused"]
    assert retried.reply is not None and retried.reply.text == "ok"
    assert [(n.kind, n.attempt, n.status) for n in retried.notes] == [("retry", 1, 500)]
    assert (refused.ok, refused.reason, refused.notes) == (False, "provider_error", [])
    assert refused.message == f"HTTP 400 from {server.base_url}/chat/completions: bad tools"


def test_a_model_slower_than_the_timeout_ends_with_timeout(caller: ModelCaller) -> None:
    outcomes = Outcomes()
    with ChatServer([StreamReply(content=["late"], delay_s=30.0)]) as server:
        caller.submit(openai_for(server.base_url), request(timeout_s=0.5), outcomes.done("a"))
        outcome = outcomes.wait(1)["a"]
    assert (outcome.reason, outcome.message) == (
        "timeout",
        f"no complete answer from {server.base_url}/chat/completions within 0.5s",
    )


def test_an_adapter_that_ignores_its_timeout_is_ended_by_the_caller(caller: ModelCaller) -> None:
    outcomes = Outcomes()
    held, blocking = HeldAdapter(), BlockingAdapter()
    caller.submit(held, request(timeout_s=0.3), outcomes.done("async"))
    caller.submit(blocking, request(timeout_s=0.3), outcomes.done("blocking"))
    done = outcomes.wait(2)
    blocking.release.set()
    assert {key: outcome.reason for key, outcome in done.items()} == {
        "async": "timeout",
        "blocking": "timeout",
    }
    assert done["async"].message == "no answer from held within 0.3s"


def test_calls_beyond_the_limit_wait_for_a_slot() -> None:
    outcomes = Outcomes()
    held = HeldAdapter()
    with ModelCaller(max_concurrent=2) as caller:
        for n in range(5):
            caller.submit(held, request(f"m{n}"), outcomes.done(n))
        for _ in range(1000):  # the first two run, the rest queue (the loop takes them)
            if held.running == 2 and caller.in_flight == 5:
                break
            threading.Event().wait(0.01)
        assert (held.running, caller.in_flight) == (2, 5)
        held.release_all()
        done = outcomes.wait(5)
    assert held.most == 2
    assert [done[n].reply.text for n in range(5) if done[n].reply] == [f"m{n}" for n in range(5)]


def test_a_call_that_waits_its_whole_timeout_for_a_slot_ends_with_timeout() -> None:
    outcomes = Outcomes()
    held = HeldAdapter()
    with ModelCaller(max_concurrent=1) as caller:
        caller.submit(held, request("first"), outcomes.done("first"))
        caller.submit(held, request("second", timeout_s=0.3), outcomes.done("second"))
        second = outcomes.wait(1)["second"]
        held.release_all()
        first = outcomes.wait(2)["first"]
    assert (second.reason, second.message) == (
        "timeout",
        "no slot for the model call within 0.3s",
    )
    assert first.reply == ModelReply(text="first")
    assert held.most == 1


def test_close_cancels_running_and_queued_calls_and_refuses_new_ones() -> None:
    outcomes = Outcomes()
    held = HeldAdapter()
    caller = ModelCaller(max_concurrent=1)
    with ChatServer([StreamReply(content=["never"], delay_s=60.0)]) as server:
        caller.submit(openai_for(server.base_url), request(), outcomes.done("http"))
        for n in range(3):
            caller.submit(held, request(), outcomes.done(n))
        server.wait_for_requests(1)  # the HTTP call holds the only slot; the others queue
        caller.close()
        done = outcomes.wait(4)
    assert {key: outcome.reason for key, outcome in done.items()} == dict.fromkeys(
        ["http", 0, 1, 2], "cancelled"
    )
    assert outcomes.calls == 4  # once each
    assert not caller.thread.is_alive()
    with pytest.raises(ModelCallerClosedError) as caught:
        caller.submit(held, request(), outcomes.done("late"))
    assert caught.value.code == "model_caller_closed"
    caller.close()  # idempotent


def test_an_adapter_bug_is_an_adapter_error_and_a_failing_done_does_not_stop_the_caller(
    caller: ModelCaller,
) -> None:
    outcomes = Outcomes()

    def broken_done(outcome: ModelOutcome) -> None:
        raise RuntimeError("host bug")

    caller.submit(DeterministicAdapter(), request(), broken_done)
    caller.submit(BlockingAdapter(error=KeyError("k")), request(), outcomes.done("bug"))
    caller.submit(DeterministicAdapter(), request("read a.md"), outcomes.done("after"))
    done = outcomes.wait(2)
    assert (done["bug"].reason, done["bug"].message) == ("adapter_error", "KeyError: 'k'")
    assert done["after"].reply is not None
    assert done["after"].reply.tool_calls[0].args == {"path": "a.md"}


def test_the_deterministic_adapter_is_instant_and_runs_inline() -> None:
    adapter = DeterministicAdapter()
    assert is_instant(adapter)
    assert not is_instant(openai_for("http://127.0.0.1:9/v1"))
    assert not is_instant(BlockingAdapter())
    outcome = complete_now(adapter, request("hello"))
    assert outcome.reply is not None and outcome.reply.text == "Acknowledged: hello"
    directives = {"tool_call": []}
    bad = ModelRequest(messages=[{"role": "user", "content": "x"}], directives=directives)
    assert complete_now(adapter, bad).reason == "bad_response"


def test_a_blocking_adapter_runs_on_a_worker_thread_not_the_loop(caller: ModelCaller) -> None:
    outcomes = Outcomes()
    blocking = BlockingAdapter()
    blocking.release.set()
    caller.submit(blocking, request(), outcomes.done("a"))
    assert outcomes.wait(1)["a"].reply == ModelReply(text="done")
    assert blocking.threads[0].startswith("model-caller-blocking")


def test_complete_now_returns_a_resilient_adapters_notes() -> None:
    with ChatServer([ErrorReply(status=503), StreamReply(content=["ok"])]) as server:
        adapter = openai_for(server.base_url)
        assert isinstance(adapter, ResilientAdapter)
        outcome = complete_now(adapter, request())
    assert outcome.reply is not None and outcome.reply.text == "ok"
    assert [(n.kind, n.status) for n in outcome.notes] == [("retry", 503)]


def test_a_model_error_outcome_keeps_its_reason_and_message() -> None:
    error = ModelError("rate_limited", "HTTP 429", retryable=True, status=429)
    assert ModelOutcome.failed(error) == ModelOutcome(reason="rate_limited", message="HTTP 429")


def test_an_outcome_with_its_notes_survives_pickling_as_an_actor_message_does() -> None:
    with ChatServer([ErrorReply(status=503), StreamReply(content=["ok"])]) as server:
        outcome = complete_now(openai_for(server.base_url), request())
    assert outcome.notes
    assert pickle.loads(pickle.dumps(outcome)) == outcome


SLOW_SERVER = textwrap.dedent(
    """
    import sys, threading
    from tests.runtime.chat_server import ChatServer, StreamReply

    expected = int(sys.argv[1])
    cond = threading.Condition()
    arrived = [0]

    def responder(recorded):
        with cond:
            arrived[0] += 1
            if arrived[0] == expected:
                print("all", flush=True)
                cond.notify_all()
            cond.wait_for(lambda: arrived[0] >= expected, 120)
        content = recorded.body["messages"][-1]["content"]
        return StreamReply(content=["echo ", content], delay_s=1.0)

    with ChatServer(responder=responder) as server:
        print(server.base_url, flush=True)
        sys.stdin.read()
    """
)


@pytest.mark.slow
def test_500_calls_at_once_on_one_loop_thread_all_complete() -> None:
    """A server that holds every answer until all 500 requests are in, then answers each 1 s
    later: only calls that are all in flight at once can complete. The server runs in its own
    process, so the threads counted here are the caller's alone."""
    count = 500
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with subprocess.Popen(
        [sys.executable, "-c", SLOW_SERVER, str(count)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    ) as server:
        assert server.stdin is not None and server.stdout is not None
        lines: queue.Queue[str] = queue.Queue()
        reader = threading.Thread(target=read_lines, args=(server.stdout, lines), daemon=True)
        reader.start()
        try:
            base_url = lines.get(timeout=WAIT_S)
            before = set(threading.enumerate())
            outcomes = Outcomes()
            adapter = openai_for(base_url)
            with ModelCaller() as caller:
                for n in range(count):
                    caller.submit(adapter, request(f"m{n}", timeout_s=WAIT_S), outcomes.done(n))
                assert lines.get(timeout=WAIT_S) == "all"
                during = set(threading.enumerate())
                in_flight = caller.in_flight
                done = outcomes.wait(count)
            after = set(threading.enumerate())
        finally:
            server.stdin.close()
            server.wait(30)
    assert during - before == {caller.thread}
    assert in_flight == count
    assert [done[n].reply.text if done[n].reply else done[n] for n in range(count)] == [
        f"echo m{n}" for n in range(count)
    ]
    assert outcomes.threads == {caller.thread}
    assert not after - before


def read_lines(stream: IO[str], lines: queue.Queue[str]) -> None:
    for line in stream:
        lines.put(line.strip())


def test_pool_shards_fill_in_order_and_a_full_shard_opens_the_next() -> None:
    """A quiet host uses one shard; a shard never holds more calls than its connections."""

    async def leases() -> tuple[list[int], int, int]:
        pools = PoolShards(2)
        clients = [pools.lease() for _ in range(5)]
        shards = [pools.shard_of(client) for client in clients]
        pools.release(clients[0])
        again = pools.lease()  # the first shard has a free connection again
        reused = pools.shard_of(again)
        made = pools.shards
        await pools.aclose()
        return shards, reused, made

    shards, reused, made = asyncio.run(leases())
    assert shards == [0, 0, 1, 1, 2]
    assert (reused, made) == (0, 3)


def test_a_pool_shard_of_no_connections_is_refused() -> None:
    with pytest.raises(ValueError, match="pool_size must be at least 1"):
        PoolShards(0)


def test_trailing_pool_shards_no_call_uses_are_closed_and_the_first_stays() -> None:
    """After a burst, the shards beyond the first close once idle; a shard in use stays."""

    async def burst() -> tuple[int, int, int]:
        pools = PoolShards(1, idle_s=0.05)
        clients = [pools.lease() for _ in range(3)]
        opened = pools.shards
        for client in clients[1:]:  # the first shard keeps its call
            pools.release(client)
        await asyncio.sleep(0.5)  # the sweeps (due at 0.05 s) run before this wakes
        idle_closed = pools.shards
        pools.release(clients[0])
        await asyncio.sleep(0.5)
        kept = pools.shards
        await pools.aclose()
        return opened, idle_closed, kept

    assert asyncio.run(burst()) == (3, 1, 1)


def test_a_shard_in_use_again_before_its_sweep_is_not_closed() -> None:
    async def reused() -> int:
        pools = PoolShards(1, idle_s=0.05)
        first, second = pools.lease(), pools.lease()
        pools.release(second)
        again = pools.lease()  # the second shard again, before the sweep
        await asyncio.sleep(0.5)
        shards = pools.shards
        for client in (first, again):
            pools.release(client)
        await pools.aclose()
        return shards

    assert asyncio.run(reused()) == 2
