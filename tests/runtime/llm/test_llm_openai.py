"""The OpenAI-compatible adapter against a real chat-completions server on loopback."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.llm.adapters import make_adapter
from runtime.llm.base import ModelError, ModelRequest, ToolCallRequest
from runtime.llm.openai import OpenAIAdapter
from runtime.llm.openai_wire import ToolNameMap, iter_sse_data, wire_tool_name
from runtime.llm.resilience import CircuitBreaker, ResilientAdapter, RetryPolicy
from tests.runtime.chat_server import (
    ChatServer,
    ErrorReply,
    JsonReply,
    RawReply,
    StreamReply,
    ToolCallReply,
)

KEY_ENV = "ROOST_TEST_LLM_KEY"
KEY = "sk-test-0123456789abcdef"
USAGE = {"prompt_tokens": 11, "completion_tokens": 4, "total_tokens": 15}
TOOLS = [
    {
        "name": "fs.read",
        "description": "Read a file.",
        "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
    },
    {"name": "command.run", "description": "Run a command.", "input_schema": {"type": "object"}},
]


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with ChatServer() as chat:
        yield chat


def adapter_for(server: ChatServer, **settings: Any) -> OpenAIAdapter:
    settings.setdefault("model", "gpt-test")
    settings.setdefault("api_key_env", KEY_ENV)
    settings.setdefault("environ", {KEY_ENV: KEY})
    return OpenAIAdapter(base_url=server.base_url, **settings)


def request(*messages: dict[str, Any], **fields: Any) -> ModelRequest:
    fields.setdefault("timeout_s", 10.0)
    return ModelRequest(messages=list(messages) or [{"role": "user", "content": "hi"}], **fields)


def resilient_for(server: ChatServer, sleeps: list[float], **options: Any) -> ResilientAdapter:
    adapter = make_adapter(
        {
            "llm_adapter": "openai",
            "llm_base_url": server.base_url,
            "llm_model": "gpt-test",
            "llm_api_key_env": KEY_ENV,
            **options,
        },
        environ={KEY_ENV: KEY},
        sleep=sleeps.append,
    )
    assert isinstance(adapter, ResilientAdapter)
    return adapter


def test_streamed_text_arrives_as_deltas_with_the_servers_usage(server: ChatServer) -> None:
    server.add(StreamReply(content=["Hel", "lo, ", "world"], usage=USAGE))
    reply = adapter_for(server).complete(request())
    assert reply.deltas == ["Hel", "lo, ", "world"]
    assert reply.text == "Hello, world"
    assert reply.tool_calls == []
    assert reply.finish_reason == "stop"
    assert reply.usage == USAGE


def test_usage_is_estimated_when_the_server_sends_none(server: ChatServer) -> None:
    server.add(StreamReply(content=["abcdefgh", "i"]))
    reply = adapter_for(server).complete(request())
    # One token per four characters: the body's messages JSON, then the 9 characters of text.
    prompt = (len('[{"role":"user","content":"hi"}]') + 3) // 4
    assert reply.usage == {"prompt_tokens": prompt, "completion_tokens": 3, "total_tokens": 11}


def test_streamed_tool_calls_are_put_together_from_fragments(server: ChatServer) -> None:
    server.add(
        StreamReply(
            content=["Let me look."],
            tool_calls=[
                ToolCallReply(name="fs__read", arguments=['{"pa', 'th": "do', 'cs/a.md"}']),
                ToolCallReply(name="command__run", arguments='{"command": "ls -l"}', id="c-9"),
            ],
            usage=USAGE,
        )
    )
    reply = adapter_for(server).complete(request(tools=TOOLS))
    assert reply.tool_calls == [
        ToolCallRequest(id="call_0", name="fs.read", args={"path": "docs/a.md"}),
        ToolCallRequest(id="c-9", name="command.run", args={"command": "ls -l"}),
    ]
    assert reply.text == "Let me look."
    assert reply.finish_reason == "tool_calls"


def test_a_tool_call_with_empty_arguments_gets_an_empty_object(server: ChatServer) -> None:
    server.add(StreamReply(tool_calls=[ToolCallReply(name="asset__list", arguments="")]))
    reply = adapter_for(server).complete(request())
    assert reply.tool_calls == [ToolCallRequest(id="call_0", name="asset.list", args={})]


def test_the_request_body_uses_the_openai_wire_format(server: ChatServer) -> None:
    server.add(StreamReply(content=["ok"]))
    adapter = adapter_for(server, system_prompt="You are Roost.", temperature=0.2, max_tokens=99)
    adapter.complete(
        request(
            {"role": "user", "content": "read a"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "call-1", "name": "fs.read", "args": {"path": "a"}}],
            },
            {
                "role": "tool",
                "tool_call_id": "call-1",
                "name": "fs.read",
                "status": "ok",
                "content": "<data>hello</data>",
                "code": None,
            },
            {"role": "assistant", "content": "Read it."},
            {"role": "user", "content": "run it"},
            {
                "role": "assistant",
                "content": "Running.",
                "tool_calls": [{"id": "call-2", "name": "command.run", "args": {}}],
            },
            {
                "role": "tool",
                "tool_call_id": "call-2",
                "name": "command.run",
                "status": "error",
                "content": "",
                "code": "timeout",
            },
            tools=TOOLS,
        )
    )
    (recorded,) = server.wait_for_requests(1)
    assert (recorded.method, recorded.path) == ("POST", "/v1/chat/completions")
    assert recorded.body == {
        "model": "gpt-test",
        "messages": [
            {"role": "system", "content": "You are Roost."},
            {"role": "user", "content": "read a"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call-1",
                        "type": "function",
                        "function": {"name": "fs__read", "arguments": '{"path":"a"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call-1", "content": "<data>hello</data>"},
            {"role": "assistant", "content": "Read it."},
            {"role": "user", "content": "run it"},
            {
                "role": "assistant",
                "content": "Running.",
                "tool_calls": [
                    {
                        "id": "call-2",
                        "type": "function",
                        "function": {"name": "command__run", "arguments": "{}"},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call-2", "content": "error: timeout"},
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "fs__read",
                    "description": "Read a file.",
                    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
                },
            },
            {
                "type": "function",
                "function": {
                    "name": "command__run",
                    "description": "Run a command.",
                    "parameters": {"type": "object"},
                },
            },
        ],
        "temperature": 0.2,
        "max_tokens": 99,
        "stream": True,
        "stream_options": {"include_usage": True},
    }


def test_request_settings_win_over_the_adapters(server: ChatServer) -> None:
    server.add(StreamReply(content=["ok"]))
    adapter = adapter_for(server, system_prompt="old", temperature=0.2, max_tokens=99)
    adapter.complete(
        request(model="other-model", system_prompt="new", temperature=0.0, max_tokens=5)
    )
    body = server.wait_for_requests(1)[0].body
    assert (body["model"], body["messages"][0], body["temperature"], body["max_tokens"]) == (
        "other-model",
        {"role": "system", "content": "new"},
        0.0,
        5,
    )


def test_unset_model_and_sampling_settings_are_left_out(server: ChatServer) -> None:
    server.add(StreamReply(content=["ok"]))
    adapter_for(server, model=None).complete(request())
    body = server.wait_for_requests(1)[0].body
    assert sorted(body) == ["messages", "stream", "stream_options"]


def test_the_key_is_sent_as_a_bearer_token_from_the_named_variable(server: ChatServer) -> None:
    server.add(StreamReply(content=["ok"]))
    adapter_for(server).complete(request())
    headers = server.wait_for_requests(1)[0].headers
    assert headers["authorization"] == f"Bearer {KEY}"
    assert headers["content-type"] == "application/json"


def test_no_authorization_header_is_sent_when_no_key_variable_is_named(server: ChatServer) -> None:
    server.add(StreamReply(content=["ok"]))
    adapter_for(server, api_key_env=None).complete(request())
    assert "authorization" not in server.wait_for_requests(1)[0].headers


def test_a_named_but_unset_key_variable_fails_before_any_request(server: ChatServer) -> None:
    sleeps: list[float] = []
    adapter = make_adapter(
        {"llm_adapter": "openai", "llm_base_url": server.base_url, "llm_api_key_env": KEY_ENV},
        environ={},
        sleep=sleeps.append,
    )
    with pytest.raises(ModelError) as caught:
        adapter.complete(request())
    assert (caught.value.reason, caught.value.retryable) == ("auth_missing", False)
    assert caught.value.message == (
        f"the API key variable {KEY_ENV} is not set; export it in the daemon's environment "
        "or change llm_api_key_env"
    )
    assert server.requests == []
    assert sleeps == []


def test_a_rejected_key_is_not_retried_and_the_key_is_not_in_the_message(
    server: ChatServer,
) -> None:
    server.add(ErrorReply(status=401, message="Incorrect API key provided"))
    sleeps: list[float] = []
    with pytest.raises(ModelError) as caught:
        resilient_for(server, sleeps).complete(request())
    error = caught.value
    assert (error.reason, error.status, error.retryable) == ("provider_error", 401, False)
    assert error.message == (
        f"HTTP 401 from {server.base_url}/chat/completions: Incorrect API key provided "
        f"(check the API key in {KEY_ENV})"
    )
    assert KEY not in error.message
    assert sleeps == []


def test_a_rate_limit_is_retried_after_the_backoff_then_succeeds(server: ChatServer) -> None:
    server.add(ErrorReply(status=429, message="slow down"), StreamReply(content=["done"]))
    sleeps: list[float] = []
    reply = resilient_for(server, sleeps).complete(request())
    assert reply.text == "done"
    assert sleeps == [0.2]
    assert len(server.requests) == 2


def test_a_rate_limit_waits_as_long_as_retry_after_asks(server: ChatServer) -> None:
    server.add(ErrorReply(status=429, headers={"Retry-After": "1.5"}), StreamReply(content=["ok"]))
    sleeps: list[float] = []
    assert resilient_for(server, sleeps).complete(request()).text == "ok"
    assert sleeps == [1.5]


def test_server_errors_are_retried_until_the_attempts_run_out(server: ChatServer) -> None:
    server.add(*[ErrorReply(status=500, message="boom")] * 3, StreamReply(content=["late"]))
    sleeps: list[float] = []
    with pytest.raises(ModelError) as caught:
        resilient_for(server, sleeps).complete(request())
    error = caught.value
    assert (error.reason, error.status, error.retryable, error.attempts) == (
        "provider_error",
        500,
        True,
        3,
    )
    assert error.message == (
        f"HTTP 500 from {server.base_url}/chat/completions: boom (after 3 attempts)"
    )
    assert sleeps == [0.2, 0.4]
    assert len(server.requests) == 3


def test_a_bad_request_is_not_retried(server: ChatServer) -> None:
    server.add(ErrorReply(status=400, message="tools[0].name is invalid"), StreamReply())
    sleeps: list[float] = []
    with pytest.raises(ModelError) as caught:
        resilient_for(server, sleeps).complete(request())
    assert (caught.value.reason, caught.value.status, caught.value.retryable) == (
        "provider_error",
        400,
        False,
    )
    assert caught.value.message.endswith(": tools[0].name is invalid")
    assert len(server.requests) == 1
    assert sleeps == []


def test_a_server_slower_than_the_timeout_gives_a_timeout(server: ChatServer) -> None:
    server.add(StreamReply(content=["too late"], delay_s=30.0))
    sleeps: list[float] = []
    started = time.monotonic()
    with pytest.raises(ModelError) as caught:
        resilient_for(server, sleeps).complete(request(timeout_s=0.5))
    elapsed = time.monotonic() - started
    assert (caught.value.reason, caught.value.retryable) == ("timeout", True)
    assert caught.value.message == (
        f"no complete answer from {server.base_url}/chat/completions within 0.5s"
    )
    assert sleeps == []  # the budget was spent: no retry
    assert elapsed < 25.0  # well before the server's 30 s: cut at the deadline, not waited out


def test_a_stream_that_trickles_past_the_deadline_is_cut_off(server: ChatServer) -> None:
    server.add(StreamReply(content=["x"] * 300, chunk_delay_s=0.1))
    started = time.monotonic()
    with pytest.raises(ModelError) as caught:
        adapter_for(server).complete(request(timeout_s=0.6))
    assert caught.value.reason == "timeout"
    assert time.monotonic() - started < 20.0  # the whole stream would take 30 s


def test_an_unreachable_endpoint_is_a_retryable_provider_error() -> None:
    with ChatServer() as gone:
        base_url = gone.base_url
    adapter = OpenAIAdapter(base_url=base_url)
    with pytest.raises(ModelError) as caught:
        adapter.complete(request())
    assert (caught.value.reason, caught.value.retryable, caught.value.status) == (
        "provider_error",
        True,
        None,
    )
    assert caught.value.message.startswith(
        f"cannot reach {base_url}/chat/completions: ConnectError"
    )


def test_the_breaker_opens_after_repeated_failures_and_a_probe_closes_it(
    server: ChatServer,
) -> None:
    now = [0.0]
    breaker = CircuitBreaker(failure_threshold=2, reset_after_s=30.0, clock=lambda: now[0])
    adapter = ResilientAdapter(
        adapter_for(server), RetryPolicy(max_attempts=1), breaker, sleep=lambda s: None
    )
    server.add(ErrorReply(status=503), ErrorReply(status=502), StreamReply(content=["back"]))
    for status in (503, 502):
        with pytest.raises(ModelError) as caught:
            adapter.complete(request())
        assert caught.value.status == status
    with pytest.raises(ModelError) as caught:
        adapter.complete(request())
    assert caught.value.reason == "circuit_open"
    assert len(server.requests) == 2
    now[0] = 30.0
    assert breaker.state == "half_open"
    assert adapter.complete(request()).text == "back"
    assert breaker.snapshot().state == "closed"
    assert len(server.requests) == 3


def test_invalid_tool_call_json_is_a_bad_response_and_not_retried(server: ChatServer) -> None:
    server.add(
        StreamReply(tool_calls=[ToolCallReply(name="fs__read", arguments=['{"path": ', '"a"'])]),
        StreamReply(content=["unused"]),
    )
    sleeps: list[float] = []
    with pytest.raises(ModelError) as caught:
        resilient_for(server, sleeps).complete(request())
    assert (caught.value.reason, caught.value.retryable) == ("bad_response", False)
    assert caught.value.message == (
        'tool call fs__read has invalid JSON arguments: \'{"path": "a"\''
    )
    assert len(server.requests) == 1


def test_tool_call_arguments_must_be_a_json_object(server: ChatServer) -> None:
    server.add(StreamReply(tool_calls=[ToolCallReply(name="fs__read", arguments="[1, 2]")]))
    with pytest.raises(ModelError) as caught:
        adapter_for(server).complete(request())
    assert caught.value.message == "tool call fs__read arguments are not a JSON object: '[1, 2]'"


def test_tool_call_arguments_with_an_integer_the_journal_cannot_store_are_a_bad_response(
    server: ChatServer,
) -> None:
    server.add(
        StreamReply(
            tool_calls=[
                ToolCallReply(name="fs__read", arguments='{"n": [1, 1e2, 99999999999999999999]}')
            ]
        )
    )
    with pytest.raises(ModelError) as caught:
        adapter_for(server).complete(request())
    assert caught.value.reason == "bad_response"
    assert "integer the journal cannot store at $.n[2]" in caught.value.message


def test_usage_counts_beyond_64_bits_are_no_counts(server: ChatServer) -> None:
    server.add(
        StreamReply(
            content=["ok"],
            usage={"prompt_tokens": 2**70, "completion_tokens": 3, "total_tokens": 2**70},
        )
    )
    reply = adapter_for(server).complete(request())
    assert reply.usage == {"prompt_tokens": 0, "completion_tokens": 3, "total_tokens": 3}


def test_a_chunk_that_is_not_json_is_a_bad_response(server: ChatServer) -> None:
    server.add(RawReply(body=b"data: {not json\n\n"))
    with pytest.raises(ModelError) as caught:
        adapter_for(server).complete(request())
    assert (caught.value.reason, caught.value.message) == (
        "bad_response",
        "stream chunk is not JSON: '{not json'",
    )


def test_a_stream_that_stops_before_finishing_is_a_bad_response(server: ChatServer) -> None:
    chunk = b'data: {"choices": [{"index": 0, "delta": {"content": "Hal"}}]}\n\n'
    server.add(RawReply(body=chunk))
    with pytest.raises(ModelError) as caught:
        adapter_for(server).complete(request())
    assert (caught.value.reason, caught.value.message) == (
        "bad_response",
        "the stream ended before the completion finished",
    )


def test_an_error_inside_the_stream_is_a_retryable_provider_error(server: ChatServer) -> None:
    server.add(RawReply(body=b'data: {"error": {"message": "overloaded"}}\n\n'))
    with pytest.raises(ModelError) as caught:
        adapter_for(server).complete(request())
    assert (caught.value.reason, caught.value.retryable, caught.value.message) == (
        "provider_error",
        True,
        'error in the stream: {"message":"overloaded"}',
    )


def test_a_length_finish_is_reported(server: ChatServer) -> None:
    server.add(StreamReply(content=["cut"], finish_reason="length"))
    assert adapter_for(server).complete(request()).finish_reason == "length"


def test_a_non_streamed_json_completion_is_understood(server: ChatServer) -> None:
    server.add(
        JsonReply(
            content="Reading.",
            tool_calls=[ToolCallReply(name="fs__read", arguments='{"path": "a"}')],
            usage=USAGE,
        )
    )
    reply = adapter_for(server).complete(request(tools=TOOLS))
    assert (reply.text, reply.deltas, reply.finish_reason, reply.usage) == (
        "Reading.",
        ["Reading."],
        "tool_calls",
        USAGE,
    )
    assert reply.tool_calls == [ToolCallRequest(id="call_0", name="fs.read", args={"path": "a"})]


def test_a_base_url_with_a_trailing_slash_posts_to_the_same_path(server: ChatServer) -> None:
    server.add(StreamReply(content=["ok"]))
    OpenAIAdapter(base_url=server.base_url + "/").complete(request())
    assert server.wait_for_requests(1)[0].path == "/v1/chat/completions"


def test_dotted_tool_names_map_to_wire_names_and_back() -> None:
    assert wire_tool_name("fs.read") == "fs__read"
    assert wire_tool_name("command.run.my-tool_x") == "command__run__my-tool_x"
    names = ToolNameMap(["fs.read"])
    assert names.from_wire("fs__read") == "fs.read"
    assert names.from_wire("asset__list") == "asset.list"


def test_names_that_would_be_invalid_or_collide_get_a_hashed_wire_name() -> None:
    names = ToolNameMap(["a.b", "a__b", "wörk.flow", "x" * 80])
    wires = [names.to_wire(n) for n in ("a.b", "a__b", "wörk.flow", "x" * 80)]
    assert wires[0] == "a__b"
    assert re.fullmatch(r"a__b_[0-9a-f]{8}", wires[1])
    assert re.fullmatch(r"w_rk__flow_[0-9a-f]{8}", wires[2])
    assert re.fullmatch(r"x{55}_[0-9a-f]{8}", wires[3])
    assert [names.from_wire(w) for w in wires] == ["a.b", "a__b", "wörk.flow", "x" * 80]


@settings(max_examples=200)
@given(st.lists(st.text(min_size=0, max_size=80), max_size=8, unique=True))
def test_every_tool_name_gets_a_valid_distinct_wire_name_that_maps_back(names: list[str]) -> None:
    mapping = ToolNameMap(names)
    wires = [mapping.to_wire(n) for n in names]
    assert all(re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", w) for w in wires)
    assert len(set(wires)) == len(wires)
    assert [mapping.from_wire(w) for w in wires] == names


def test_server_sent_events_join_data_lines_and_skip_other_fields() -> None:
    lines = [": keep-alive", "event: chunk", "data: one", "data:two", "", "id: 7", "data: three"]
    assert list(iter_sse_data(lines)) == ["one\ntwo", "three"]


def test_a_name_with_a_trailing_newline_is_not_sent_as_it_is() -> None:
    """``$`` matches before a final newline: the check must match the whole name."""
    mapping = ToolNameMap(["0\n", "0"])
    wires = [mapping.to_wire(n) for n in ("0\n", "0")]
    assert all(re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", w) for w in wires), wires
    assert len(set(wires)) == 2
