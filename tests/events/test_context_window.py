"""The model's context window: the latest whole turns within a budget, pairs kept together."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from events import catalog as ev
from events.context_window import CONTEXT_WINDOW_CHARS, context_window_chars, message_chars
from events.envelope import Envelope
from events.projections import LlmContextFold, in_seq_order, llm_context
from tests.events.test_projections import Journal, journals, started_project


def turn(j: Journal, n: int, *, result: str = "x" * 50) -> None:
    """A turn of ``n``: the user asks, the model reads a file, then answers."""
    corr = f"t{n}"
    j.add(ev.UserMessage(content=f"turn {n}"), correlation_id=corr)
    j.add(ev.LlmStarted(provider="deterministic", round=1), correlation_id=corr)
    j.add(
        ev.ToolRequested(call_id=f"call-{n}", name="fs.read", args={"p": "a"}), correlation_id=corr
    )
    j.add(ev.AssistantMessage(content="", round=1), correlation_id=corr)
    j.add(
        ev.ToolCompleted(call_id=f"call-{n}", name="fs.read", result={"c": result}),
        correlation_id=corr,
    )
    j.add(ev.LlmStarted(provider="deterministic", round=2), correlation_id=corr)
    j.add(ev.AssistantMessage(content=f"done {n}", round=2), correlation_id=corr)
    j.add(ev.LlmCompleted(), correlation_id=corr)


def fold(j: Journal, budget: int) -> LlmContextFold:
    return LlmContextFold.of(j.events, "c1", window_chars=budget)


def pairs_hold(messages: list[dict[str, Any]]) -> bool:
    """Every tool message answers a call of an assistant message before it in the list."""
    asked: set[str] = set()
    for message in messages:
        if message["role"] == "assistant":
            asked.update(call["id"] for call in message["tool_calls"])
        elif message["role"] == "tool" and message["tool_call_id"] not in asked:
            return False
    return True


def test_the_window_keeps_the_latest_whole_turns_within_the_budget() -> None:
    j = started_project()
    for n in range(6):
        turn(j, n)
    whole = fold(j, 0)
    per_turn = whole.window.chars // 6
    windowed = fold(j, per_turn * 2 + per_turn // 2)
    assert windowed.messages() == whole.messages()[-8:]  # the last two turns, four messages each
    assert windowed.messages()[0] == {"role": "user", "content": "turn 4"}
    assert windowed.window.chars <= per_turn * 2 + per_turn // 2
    assert windowed.window.start == 16


def test_a_turn_over_the_budget_is_kept_alone_and_whole() -> None:
    j = started_project()
    turn(j, 0)
    turn(j, 1, result="y" * 5000)
    windowed = fold(j, 100)
    assert [m["role"] for m in windowed.messages()] == ["user", "assistant", "tool", "assistant"]
    assert windowed.messages()[0]["content"] == "turn 1"


def test_no_window_keeps_every_message() -> None:
    j = started_project()
    for n in range(50):
        turn(j, n)
    assert len(fold(j, 0).messages()) == 200
    assert fold(j, 0).window.start == 0


def test_a_user_message_while_a_call_is_unanswered_is_no_place_to_start() -> None:
    j = started_project()
    turn(j, 0)
    j.add(ev.UserMessage(content="first"), correlation_id="a")
    j.add(ev.LlmStarted(provider="deterministic", round=1), correlation_id="a")
    j.add(ev.ToolRequested(call_id="slow", name="fs.read", args={}), correlation_id="a")
    j.add(ev.LlmCompleted(), correlation_id="a")  # the round closes with its call unanswered
    j.add(ev.UserMessage(content="queued " + "q" * 40), correlation_id="b")
    j.add(
        ev.ToolCompleted(call_id="slow", name="fs.read", result={"c": "r" * 40}), correlation_id="a"
    )
    messages = fold(j, 80).messages()  # the queued message fits; with the result it would not
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "tool"]
    assert messages[0]["content"] == "first"
    assert pairs_hold(messages)


def test_a_result_whose_call_left_the_window_is_not_sent() -> None:
    j = started_project()
    j.add(ev.UserMessage(content="first"), correlation_id="a")
    j.add(ev.LlmStarted(provider="deterministic", round=1), correlation_id="a")
    j.add(ev.ToolRequested(call_id="slow", name="fs.read", args={}), correlation_id="a")
    j.add(ev.LlmCompleted(), correlation_id="a")
    j.add(ev.UserMessage(content="second " + "s" * 40), correlation_id="b")  # over: "a" goes
    j.add(
        ev.ToolCompleted(call_id="slow", name="fs.read", result={"c": "late"}), correlation_id="a"
    )
    context = fold(j, 50)
    assert context.messages() == [{"role": "user", "content": "second " + "s" * 40}]
    assert context._model_calls == {} and context._answered == set()


def test_an_open_round_is_never_dropped() -> None:
    j = started_project()
    turn(j, 0)
    j.add(ev.UserMessage(content="now"), correlation_id="n")
    j.add(ev.LlmStarted(provider="deterministic", round=1), correlation_id="n")
    j.add(ev.UserMessage(content="later " + "l" * 200), correlation_id="m")
    messages = fold(j, 10).messages()
    assert messages[0] == {"role": "user", "content": "now"}


def test_the_budget_comes_from_the_last_project_started() -> None:
    j = started_project()
    assert context_window_chars(j.events) == CONTEXT_WINDOW_CHARS
    j.add(
        ev.ProjectStarted(root="/srv", options={"context_window_chars": 7}),
        conversation_id=None,
    )
    assert context_window_chars(j.events) == 7
    j.add(
        ev.ProjectStarted(root="/srv", options={"context_window_chars": True}), conversation_id=None
    )
    assert context_window_chars(j.events) == CONTEXT_WINDOW_CHARS
    j.add(ev.ProjectStarted(root="/srv", options={"context_window_chars": 0}), conversation_id=None)
    assert context_window_chars(j.events) == 0
    for n in range(3):
        turn(j, n)
    assert llm_context(j.events, "c1") == fold(j, 0).messages()


def test_a_message_counts_its_text_and_its_calls() -> None:
    assert message_chars({"role": "user", "content": "hello"}) == 5
    call = {"id": "c", "name": "fs.read", "args": {"path": "a"}}
    assert message_chars({"role": "assistant", "content": None, "tool_calls": [call]}) == 7 + 12
    tool = {"role": "tool", "tool_call_id": "c", "name": "fs.read", "content": '{"a":1}'}
    assert message_chars(tool) == 7 + 7


@settings(max_examples=80, deadline=None)
@given(journals(), st.integers(0, 120))
def test_after_every_event_the_window_holds_its_rules_and_equals_a_replay(
    journal: Journal, budget: int
) -> None:
    live = LlmContextFold(budget)
    seen: list[Envelope] = []
    for event in in_seq_order(journal.events):
        seen.append(event)
        if event.conversation_id != "c1":
            continue
        live.apply(event)
        messages = live.messages()
        window = live.window
        assert messages == LlmContextFold.of(seen, "c1", window_chars=budget).messages()
        assert pairs_hold(messages)
        if window.start:  # something was dropped: the window starts at a user message
            assert window.messages[0]["role"] == "user"
        if budget and window.chars > budget:  # over: no later place to start was free
            assert not [c for c in window.cuts if c <= live.settled()]
        assert set(live._model_calls) >= live._answered
        assert all(at >= window.start for at in live._model_calls.values())
