"""The OpenAI-compatible adapter's async path behaves as its blocking path, on a real server.

Each scenario runs through both paths (``path`` is ``sync`` or ``async``) against the same
loopback chat-completions server; the async path runs on a shared ``httpx.AsyncClient``.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from typing import Any, TypeVar

import httpx
import pytest

from runtime.llm.adapters import make_adapter
from runtime.llm.base import AsyncModelAdapter, ModelError, ModelReply, ModelRequest
from runtime.llm.base import ToolCallRequest as Call
from runtime.llm.openai import OpenAIAdapter, _afold_stream
from runtime.llm.openai_wire import StreamAccumulator
from runtime.llm.resilience import CircuitBreaker, ModelNote, ResilientAdapter, RetryPolicy
from tests.runtime.chat_server import (
    ChatServer,
    ErrorReply,
    JsonReply,
    RawReply,
    RecordedRequest,
    Reply,
    StreamReply,
    ToolCallReply,
)

KEY_ENV = "ROOST_TEST_LLM_KEY"
KEY = "sk-test-0123456789abcdef"
USAGE = {"prompt_tokens": 11, "completion_tokens": 4, "total_tokens": 15}
PATHS = ["sync", "async"]
T = TypeVar("T")


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with ChatServer() as chat:
        yield chat


def run(coroutine: Callable[[httpx.AsyncClient], Coroutine[Any, Any, T]]) -> T:
    """Run ``coroutine(client)`` on a fresh event loop with a shared client, as a host would."""

    async def main() -> T:
        async with httpx.AsyncClient() as client:
            return await coroutine(client)

    return asyncio.run(main())


def call(adapter: OpenAIAdapter | ResilientAdapter, request: ModelRequest, path: str) -> ModelReply:
    """One round through the blocking or the async path."""
    if path == "sync":
        return adapter.complete(request)
    return run(lambda client: adapter.acomplete(request, client=client))


def adapter_for(server: ChatServer, **settings: Any) -> OpenAIAdapter:
    settings.setdefault("model", "gpt-test")
    settings.setdefault("api_key_env", KEY_ENV)
    settings.setdefault("environ", {KEY_ENV: KEY})
    return OpenAIAdapter(base_url=server.base_url, **settings)


def resilient_for(server: ChatServer, sleeps: list[float]) -> ResilientAdapter:
    async def asleep(seconds: float) -> None:
        sleeps.append(seconds)

    adapter = make_adapter(
        {
            "llm_adapter": "openai",
            "llm_base_url": server.base_url,
            "llm_model": "gpt-test",
            "llm_api_key_env": KEY_ENV,
        },
        environ={KEY_ENV: KEY},
        sleep=sleeps.append,
        asleep=asleep,
    )
    assert isinstance(adapter, ResilientAdapter)
    return adapter


def request(content: str = "hi", **fields: Any) -> ModelRequest:
    fields.setdefault("timeout_s", 10.0)
    return ModelRequest(messages=[{"role": "user", "content": content}], **fields)


def test_the_openai_adapter_and_its_resilient_wrapper_have_an_async_path() -> None:
    adapter = OpenAIAdapter(base_url="http://127.0.0.1:9/v1")
    assert isinstance(adapter, AsyncModelAdapter)
    assert isinstance(ResilientAdapter(adapter), AsyncModelAdapter)


@pytest.mark.parametrize("path", PATHS)
def test_streamed_text_and_fragmented_tool_calls_are_put_together(
    server: ChatServer, path: str
) -> None:
    server.add(
        StreamReply(
            content=["Let ", "me look."],
            tool_calls=[
                ToolCallReply(name="fs__read", arguments=['{"pa', 'th": "do', 'cs/a.md"}']),
                ToolCallReply(name="command__run", arguments='{"command": "ls"}', id="c-9"),
            ],
            usage=USAGE,
        )
    )
    reply = call(adapter_for(server), request(tools=[{"name": "fs.read"}]), path)
    assert (reply.text, reply.deltas, reply.finish_reason, reply.usage) == (
        "Let me look.",
        ["Let ", "me look."],
        "tool_calls",
        USAGE,
    )
    assert reply.tool_calls == [
        Call(id="call_0", name="fs.read", args={"path": "docs/a.md"}),
        Call(id="c-9", name="command.run", args={"command": "ls"}),
    ]
    (recorded,) = server.wait_for_requests(1)
    assert recorded.headers["authorization"] == f"Bearer {KEY}"
    assert recorded.body["stream"] is True


@pytest.mark.parametrize("path", PATHS)
def test_a_non_streamed_json_completion_is_understood(server: ChatServer, path: str) -> None:
    server.add(JsonReply(content="Whole.", usage=USAGE))
    reply = call(adapter_for(server), request(), path)
    assert (reply.text, reply.deltas, reply.usage) == ("Whole.", ["Whole."], USAGE)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize(
    ("body", "reason", "message"),
    [
        (b"data: {not json\n\n", "bad_response", "stream chunk is not JSON: '{not json'"),
        (
            b'data: {"choices": [{"index": 0, "delta": {"content": "Hal"}}]}\n\n',
            "bad_response",
            "the stream ended before the completion finished",
        ),
        (
            b'data: {"error": {"message": "overloaded"}}\n\n',
            "provider_error",
            'error in the stream: {"message":"overloaded"}',
        ),
    ],
)
def test_a_malformed_stream_fails_the_same_way(
    server: ChatServer, path: str, body: bytes, reason: str, message: str
) -> None:
    server.add(RawReply(body=body))
    with pytest.raises(ModelError) as caught:
        call(adapter_for(server), request(), path)
    assert (caught.value.reason, caught.value.message) == (reason, message)


@pytest.mark.parametrize("path", PATHS)
def test_invalid_tool_call_arguments_are_a_bad_response_not_retried(
    server: ChatServer, path: str
) -> None:
    server.add(
        StreamReply(tool_calls=[ToolCallReply(name="fs__read", arguments=['{"path": ', '"a"'])]),
        StreamReply(content=["unused"]),
    )
    sleeps: list[float] = []
    with pytest.raises(ModelError) as caught:
        call(resilient_for(server, sleeps), request(), path)
    assert (caught.value.reason, caught.value.retryable) == ("bad_response", False)
    assert caught.value.message == (
        'tool call fs__read has invalid JSON arguments: \'{"path": "a"\''
    )
    assert (len(server.requests), sleeps) == (1, [])


@pytest.mark.parametrize("path", PATHS)
def test_a_rate_limit_waits_as_long_as_retry_after_asks(server: ChatServer, path: str) -> None:
    server.add(ErrorReply(status=429, headers={"Retry-After": "1.5"}), StreamReply(content=["ok"]))
    sleeps: list[float] = []
    assert call(resilient_for(server, sleeps), request(), path).text == "ok"
    assert sleeps == [1.5]
    assert len(server.requests) == 2


@pytest.mark.parametrize("path", PATHS)
def test_server_errors_are_retried_until_the_attempts_run_out(
    server: ChatServer, path: str
) -> None:
    server.add(*[ErrorReply(status=500, message="boom")] * 3, StreamReply(content=["late"]))
    sleeps: list[float] = []
    with pytest.raises(ModelError) as caught:
        call(resilient_for(server, sleeps), request(), path)
    error = caught.value
    assert (error.reason, error.status, error.attempts) == ("provider_error", 500, 3)
    assert error.message == (
        f"HTTP 500 from {server.base_url}/chat/completions: boom (after 3 attempts)"
    )
    assert sleeps == [0.2, 0.4]


@pytest.mark.parametrize("path", PATHS)
def test_a_rejected_key_is_not_retried(server: ChatServer, path: str) -> None:
    server.add(ErrorReply(status=401, message="Incorrect API key provided"))
    sleeps: list[float] = []
    with pytest.raises(ModelError) as caught:
        call(resilient_for(server, sleeps), request(), path)
    assert (caught.value.reason, caught.value.status, caught.value.retryable) == (
        "provider_error",
        401,
        False,
    )
    assert caught.value.message.endswith(f"(check the API key in {KEY_ENV})")
    assert sleeps == []


@pytest.mark.parametrize("path", PATHS)
def test_a_named_but_unset_key_fails_before_any_request(server: ChatServer, path: str) -> None:
    with pytest.raises(ModelError) as caught:
        call(adapter_for(server, environ={}), request(), path)
    assert caught.value.reason == "auth_missing"
    assert server.requests == []


@pytest.mark.parametrize("path", PATHS)
def test_a_server_slower_than_the_timeout_gives_a_timeout(server: ChatServer, path: str) -> None:
    server.add(StreamReply(content=["too late"], delay_s=30.0))
    sleeps: list[float] = []
    started = time.monotonic()
    with pytest.raises(ModelError) as caught:
        call(resilient_for(server, sleeps), request(timeout_s=0.5), path)
    assert (caught.value.reason, caught.value.retryable) == ("timeout", True)
    assert caught.value.message == (
        f"no complete answer from {server.base_url}/chat/completions within 0.5s"
    )
    assert sleeps == []  # the budget was spent: no retry
    assert time.monotonic() - started < 25.0  # cut at the deadline, not the server's 30 s


@pytest.mark.parametrize("path", PATHS)
def test_a_stream_that_trickles_past_the_deadline_is_cut_off(server: ChatServer, path: str) -> None:
    server.add(StreamReply(content=["x"] * 300, chunk_delay_s=0.1))
    started = time.monotonic()
    with pytest.raises(ModelError) as caught:
        call(adapter_for(server), request(timeout_s=0.6), path)
    assert caught.value.reason == "timeout"
    assert time.monotonic() - started < 20.0  # the whole stream would take 30 s


@pytest.mark.parametrize("path", PATHS)
def test_an_unreachable_endpoint_is_a_retryable_provider_error(path: str) -> None:
    with ChatServer() as gone:
        base_url = gone.base_url
    with pytest.raises(ModelError) as caught:
        call(OpenAIAdapter(base_url=base_url), request(), path)
    assert (caught.value.reason, caught.value.retryable) == ("provider_error", True)
    assert caught.value.message.startswith(
        f"cannot reach {base_url}/chat/completions: ConnectError"
    )


@pytest.mark.parametrize("path", PATHS)
def test_the_breaker_opens_after_repeated_failures_and_a_probe_closes_it(
    server: ChatServer, path: str
) -> None:
    now = [0.0]
    breaker = CircuitBreaker(failure_threshold=2, reset_after_s=30.0, clock=lambda: now[0])
    adapter = ResilientAdapter(
        adapter_for(server), RetryPolicy(max_attempts=1), breaker, clock=lambda: now[0]
    )
    server.add(ErrorReply(status=503), ErrorReply(status=502), StreamReply(content=["back"]))
    for status in (503, 502):
        with pytest.raises(ModelError) as caught:
            call(adapter, request(), path)
        assert caught.value.status == status
    with pytest.raises(ModelError) as caught:
        call(adapter, request(), path)
    assert caught.value.reason == "circuit_open"
    assert len(server.requests) == 2
    now[0] = 30.0
    assert call(adapter, request(), path).text == "back"
    assert breaker.snapshot().state == "closed"
    changes = [(n.change.previous, n.change.state) for n in adapter.take_notes() if n.change]
    assert changes == [("closed", "open"), ("open", "half_open"), ("half_open", "closed")]


def test_a_retried_call_returns_its_notes_with_the_reply(server: ChatServer) -> None:
    server.add(ErrorReply(status=500, message="boom"), StreamReply(content=["fine"]))
    sleeps: list[float] = []
    adapter = resilient_for(server, sleeps)
    reply, notes = run(lambda client: adapter.acomplete_with_notes(request(), client=client))
    assert isinstance(reply, ModelReply) and reply.text == "fine"
    assert [(n.kind, n.attempt, n.reason, n.status, n.delay_s) for n in notes] == [
        ("retry", 1, "provider_error", 500, 0.2)
    ]
    assert adapter.take_notes() == []  # given to the caller, not kept on the adapter


def test_a_failed_call_returns_its_error_with_its_notes(server: ChatServer) -> None:
    server.add(*[ErrorReply(status=503)] * 3)
    adapter = resilient_for(server, [])
    error, notes = run(lambda client: adapter.acomplete_with_notes(request(), client=client))
    assert isinstance(error, ModelError)
    assert (error.reason, error.attempts) == ("provider_error", 3)
    assert [n.attempt for n in notes] == [1, 2]


def test_concurrent_calls_on_one_adapter_each_get_their_own_notes(server: ChatServer) -> None:
    """Three calls at once; only the one named ``flaky`` meets a 500 first."""
    failed: set[str] = set()

    def responder(recorded: RecordedRequest) -> Reply:
        content = recorded.body["messages"][-1]["content"]
        if content == "flaky" and content not in failed:
            failed.add(content)
            return ErrorReply(status=500, message="flaky once")
        return StreamReply(content=[f"echo {content}"], delay_s=0.2)

    server.responder = responder
    adapter = resilient_for(server, [])

    async def three(client: httpx.AsyncClient) -> list[tuple[Any, list[ModelNote]]]:
        calls = [
            adapter.acomplete_with_notes(request(name), client=client)
            for name in ("steady-1", "flaky", "steady-2")
        ]
        return list(await asyncio.gather(*calls))

    outcomes = run(three)
    assert [reply.text for reply, _ in outcomes] == ["echo steady-1", "echo flaky", "echo steady-2"]
    assert [[(n.kind, n.message) for n in notes] for _, notes in outcomes] == [
        [],
        [("retry", f"HTTP 500 from {server.base_url}/chat/completions: flaky once")],
        [],
    ]


def test_calls_in_a_row_reuse_one_connection_of_the_shared_pool(server: ChatServer) -> None:
    """The body's end after ``[DONE]`` is read, so the connection goes back to the pool.

    Against a real provider a connection left unread is a new TCP and TLS handshake for
    every model round.
    """
    server.add(*[StreamReply(content=[f"answer {i}"], keep_alive=True) for i in range(3)])
    adapter = adapter_for(server)

    async def three(client: httpx.AsyncClient) -> list[str | None]:
        return [(await adapter.acomplete(request(f"q{i}"), client=client)).text for i in range(3)]

    assert run(three) == ["answer 0", "answer 1", "answer 2"]
    assert server.connections == 1


def test_a_server_that_goes_on_after_done_costs_the_connection_not_the_reply(
    server: ChatServer,
) -> None:
    """Lines after ``[DONE]`` beyond what is read to reuse a connection: the reply stands."""
    noise = [f"data: late {i}" for i in range(40)]
    server.add(*[StreamReply(content=["done"], keep_alive=True, after_done=noise)] * 2)
    adapter = adapter_for(server)

    async def two(client: httpx.AsyncClient) -> list[str | None]:
        return [(await adapter.acomplete(request("q"), client=client)).text for _ in range(2)]

    assert run(two) == ["done", "done"]
    assert server.connections == 2  # each response was closed with its connection


def test_a_server_that_stalls_after_done_costs_the_connection_not_the_reply(
    server: ChatServer,
) -> None:
    """The body's end never comes: the drain gives up (0.5 s), the reply stands."""
    server.add(StreamReply(content=["whole"], keep_alive=True, stall_after_done_s=60))
    server.add(StreamReply(content=["next"], keep_alive=True))
    adapter = adapter_for(server)

    async def two(client: httpx.AsyncClient) -> list[str | None]:
        return [(await adapter.acomplete(request("q"), client=client)).text for _ in range(2)]

    assert run(two) == ["whole", "next"]
    assert server.connections == 2


def test_the_call_deadline_passing_while_the_body_ends_keeps_the_whole_reply() -> None:
    """The answer was whole at ``[DONE]``: a deadline that passes in the drain is lifted.

    The deadline (0.2 s) always passes before the drain's own bound (0.5 s from ``[DONE]``).
    """
    chunk = '{"choices": [{"index": 0, "delta": {"content": "kept"}, "finish_reason": "stop"}]}'

    async def stalling() -> AsyncIterator[str]:
        for line in (f"data: {chunk}", "", "data: [DONE]", ""):
            yield line
        await asyncio.sleep(30)  # the body's end does not come
        yield ""

    async def fold() -> StreamAccumulator:
        accumulator = StreamAccumulator()
        lines = stalling()
        async with contextlib.aclosing(lines), asyncio.timeout(0.2) as deadline:
            await _afold_stream(lines, accumulator, deadline)
        return accumulator

    accumulator = asyncio.run(fold())
    assert accumulator.done
    assert accumulator.reply({}, 0).text == "kept"
