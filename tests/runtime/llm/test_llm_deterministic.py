"""The deterministic model adapter: directives, rules, tool-result answers, usage."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.errors import InvalidRuntimeOptError
from runtime.llm.adapters import make_adapter
from runtime.llm.base import (
    ModelAdapter,
    ModelError,
    ModelReply,
    ModelRequest,
    ToolCallRequest,
)
from runtime.llm.deterministic import DeterministicAdapter
from runtime.llm.resilience import ResilientAdapter


def ask(*messages: dict[str, Any], round: int = 1, directives: Any = None) -> ModelReply:
    return DeterministicAdapter().complete(
        ModelRequest(messages=list(messages), round=round, directives=directives)
    )


def user(content: str) -> dict[str, Any]:
    return {"role": "user", "content": content}


def tool_result(name: str, status: str = "ok", code: str | None = None) -> dict[str, Any]:
    return {
        "role": "tool",
        "tool_call_id": f"call-{name}",
        "name": name,
        "status": status,
        "content": "some output",
        "code": code,
    }


def assistant_calling(*names: str) -> dict[str, Any]:
    calls = [{"id": f"call-{n}", "name": n, "args": {}} for n in names]
    return {"role": "assistant", "content": None, "tool_calls": calls}


def test_the_adapter_names_its_provider_and_model() -> None:
    adapter = DeterministicAdapter()
    assert (adapter.provider, adapter.model) == ("deterministic", "deterministic-1")
    assert isinstance(adapter, ModelAdapter)


def test_plain_text_is_acknowledged_verbatim() -> None:
    reply = ask(user("Hello there, Roost"))
    assert reply.text == "Acknowledged: Hello there, Roost"
    assert reply.deltas == ["Acknowledged: Hello there, Roost"]
    assert reply.tool_calls == []
    assert reply.finish_reason == "stop"


@pytest.mark.parametrize("kind", ["skills", "commands", "workflows"])
def test_list_asks_for_asset_list_of_that_type(kind: str) -> None:
    reply = ask(user(f"list {kind}"))
    assert reply.tool_calls == [ToolCallRequest(id=None, name="asset.list", args={"type": kind})]
    assert reply.text == ""
    assert reply.deltas == []
    assert reply.finish_reason == "tool_calls"


def test_rules_match_case_insensitively_and_ignore_surrounding_space() -> None:
    reply = ask(user("  LIST Skills  "))
    assert reply.tool_calls == [
        ToolCallRequest(id=None, name="asset.list", args={"type": "skills"})
    ]


def test_read_asks_for_fs_read_with_the_path_as_written() -> None:
    reply = ask(user("Read docs/My File.md"))
    assert reply.tool_calls == [
        ToolCallRequest(id=None, name="fs.read", args={"path": "docs/My File.md"})
    ]


def test_search_asks_for_fs_search_with_the_text_as_pattern() -> None:
    reply = ask(user("search TODO: fix"))
    assert reply.tool_calls == [
        ToolCallRequest(id=None, name="fs.search", args={"pattern": "TODO: fix"})
    ]


def test_a_rule_word_not_at_the_start_is_just_acknowledged() -> None:
    assert ask(user("please read README.md")).text == "Acknowledged: please read README.md"


def test_a_rule_word_alone_is_just_acknowledged() -> None:
    assert ask(user("read")).text == "Acknowledged: read"


def test_rules_look_at_the_last_user_message_only() -> None:
    reply = ask(
        user("read a.txt"),
        assistant_calling("fs.read"),
        tool_result("fs.read"),
        {"role": "assistant", "content": "Tool fs.read completed."},
        user("thanks"),
    )
    assert reply.text == "Acknowledged: thanks"
    assert reply.tool_calls == []


def test_a_successful_tool_result_is_reported_and_the_turn_ends() -> None:
    reply = ask(user("read a.txt"), assistant_calling("fs.read"), tool_result("fs.read"))
    assert reply.text == "Tool fs.read completed."
    assert reply.tool_calls == []
    assert reply.finish_reason == "stop"


def test_a_failed_tool_result_is_reported_with_its_code() -> None:
    reply = ask(
        user("read ../x"),
        assistant_calling("fs.read"),
        tool_result("fs.read", "error", "outside_root"),
    )
    assert reply.text == "Tool fs.read failed: outside_root"


def test_every_tool_result_of_the_round_gets_one_line_in_order() -> None:
    reply = ask(
        user("go"),
        assistant_calling("fs.read", "command.run"),
        tool_result("fs.read"),
        tool_result("command.run", "error", "timeout"),
    )
    assert reply.text == "Tool fs.read completed.\nTool command.run failed: timeout"
    assert reply.deltas == [reply.text]


def test_a_failed_result_without_a_code_reports_tool_error() -> None:
    reply = ask(user("go"), assistant_calling("x.y"), tool_result("x.y", "error", None))
    assert reply.text == "Tool x.y failed: tool_error"


def test_directive_assistant_text_is_sent_as_one_delta() -> None:
    reply = ask(user("anything"), directives={"assistant_text": "Scripted."})
    assert (reply.text, reply.deltas, reply.tool_calls) == ("Scripted.", ["Scripted."], [])
    assert reply.finish_reason == "stop"


def test_directive_delta_chunks_are_streamed_exactly_and_joined_into_the_text() -> None:
    reply = ask(user("anything"), directives={"delta_chunks": ["Hel", "", "lo"]})
    assert reply.deltas == ["Hel", "", "lo"]
    assert reply.text == "Hello"


def test_directive_text_and_matching_chunks_are_both_used() -> None:
    reply = ask(user("x"), directives={"assistant_text": "ab", "delta_chunks": ["a", "b"]})
    assert (reply.text, reply.deltas) == ("ab", ["a", "b"])


def test_directive_tool_calls_are_followed_with_no_ids() -> None:
    directives = {
        "assistant_text": "Calling.",
        "tool_calls": [
            {"name": "fs.read", "args": {"path": "a"}},
            {"name": "command.run", "args": {"command": "ls"}, "run_mode": "async"},
            {"name": "asset.list"},
        ],
    }
    reply = ask(user("list skills"), directives=directives)
    assert reply.tool_calls == [
        ToolCallRequest(id=None, name="fs.read", args={"path": "a"}),
        ToolCallRequest(id=None, name="command.run", args={"command": "ls"}, run_mode="async"),
        ToolCallRequest(id=None, name="asset.list", args={}),
    ]
    assert reply.text == "Calling."
    assert reply.finish_reason == "tool_calls"


def test_directives_are_ignored_after_the_first_round() -> None:
    reply = ask(
        user("read a"),
        assistant_calling("fs.read"),
        tool_result("fs.read"),
        round=2,
        directives={"assistant_text": "Scripted."},
    )
    assert reply.text == "Tool fs.read completed."


def test_empty_directives_fall_back_to_the_rules() -> None:
    assert ask(user("hi"), directives={}).text == "Acknowledged: hi"


@pytest.mark.parametrize(
    ("directives", "message"),
    [
        ({"assistant_text": 3}, "invalid llm directives: assistant_text must be a string, got int"),
        (
            {"delta_chunks": ["a", 1]},
            "invalid llm directives: delta_chunks must be a list of strings",
        ),
        (
            {"assistant_text": "ab", "delta_chunks": ["a"]},
            "invalid llm directives: delta_chunks must join to assistant_text when both are given",
        ),
        (
            {"tool_calls": {"name": "fs.read"}},
            "invalid llm directives: tool_calls must be a list of {name, args, run_mode?} objects",
        ),
        (
            {"tool_calls": [{"args": {}}]},
            "invalid llm directives: tool_calls[0] must be an object with a string name",
        ),
        (
            {"tool_calls": [{"name": "fs.read", "args": [1]}]},
            "invalid llm directives: tool_calls[0].args must be an object",
        ),
        (
            {"tool_calls": [{"name": "fs.read", "run_mode": "later"}]},
            "invalid llm directives: tool_calls[0].run_mode must be 'sync' or 'async', got 'later'",
        ),
        (
            {"tool_call": [{"name": "fs.read"}]},
            "invalid llm directives: unknown key 'tool_call'; the directives are "
            "assistant_text, delta_chunks, tool_calls",
        ),
        (
            {"other": 1, "assistant_text": "x", "arg": 2},
            "invalid llm directives: unknown keys 'arg', 'other'; the directives are "
            "assistant_text, delta_chunks, tool_calls",
        ),
        (
            {"tool_calls": [{"name": "fs.read", "arg": {"path": "a"}}]},
            "invalid llm directives: unknown key 'arg'; the keys of tool_calls[0] are "
            "name, args, run_mode",
        ),
    ],
)
def test_malformed_directives_fail_with_bad_response(directives: Any, message: str) -> None:
    with pytest.raises(ModelError) as caught:
        ask(user("x"), directives=directives)
    assert (caught.value.reason, caught.value.retryable, caught.value.message) == (
        "bad_response",
        False,
        message,
    )


def test_usage_counts_words_of_the_prompt_and_the_reply() -> None:
    request = ModelRequest(
        messages=[user("one two three"), {"role": "assistant", "content": None}, user("four")],
        system_prompt="be brief",
    )
    reply = DeterministicAdapter().complete(request)
    assert reply.text == "Acknowledged: four"
    assert reply.usage == {"prompt_tokens": 6, "completion_tokens": 2, "total_tokens": 8}


def test_usage_counts_one_completion_token_per_tool_call() -> None:
    reply = ask(user("search foo"), directives={"tool_calls": [{"name": "a"}, {"name": "b"}]})
    assert reply.usage == {"prompt_tokens": 2, "completion_tokens": 2, "total_tokens": 4}


messages_strategy = st.lists(
    st.one_of(
        st.builds(user, st.text(max_size=40)),
        st.builds(
            tool_result,
            st.sampled_from(["fs.read", "fs.search"]),
            st.sampled_from(["ok", "error"]),
            st.one_of(st.none(), st.just("timeout")),
        ),
        st.just(assistant_calling("fs.read")),
    ),
    max_size=6,
)


@settings(max_examples=100)
@given(messages=messages_strategy)
def test_replies_are_a_pure_function_of_the_request(messages: list[dict[str, Any]]) -> None:
    request = ModelRequest(messages=messages)
    first = DeterministicAdapter().complete(request)
    second = DeterministicAdapter().complete(request)
    assert first == second
    assert "".join(first.deltas) == first.text
    assert first.finish_reason == ("tool_calls" if first.tool_calls else "stop")
    usage = first.usage
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]


def test_make_adapter_builds_the_deterministic_adapter_by_default() -> None:
    assert isinstance(make_adapter({}), DeterministicAdapter)
    assert isinstance(make_adapter({"llm_adapter": "deterministic"}), DeterministicAdapter)


def test_make_adapter_wraps_the_openai_adapter_in_retries_and_a_breaker() -> None:
    adapter = make_adapter({"llm_adapter": "openai", "llm_model": "gpt-test"}, environ={})
    assert isinstance(adapter, ResilientAdapter)
    assert (adapter.provider, adapter.model) == ("openai", "gpt-test")
    other = make_adapter({"llm_adapter": "openai"}, environ={})
    assert isinstance(other, ResilientAdapter)
    assert other.breaker is not adapter.breaker


def test_make_adapter_rejects_an_unknown_adapter() -> None:
    with pytest.raises(InvalidRuntimeOptError) as caught:
        make_adapter({"llm_adapter": "magic"})
    assert (caught.value.key, caught.value.reason) == ("llm_adapter", "invalid_entry")
    assert caught.value.message == "llm_adapter must be 'deterministic' or 'openai', got 'magic'"
