"""The deterministic model's word counts: the same usage, without recounting a settled prefix."""

from __future__ import annotations

from typing import Any

from runtime.llm.base import ModelRequest
from runtime.llm.deterministic import DeterministicAdapter, word_count


def _request(messages: list[dict[str, Any]]) -> ModelRequest:
    return ModelRequest(messages=messages, round=2)


def _plain(messages: list[dict[str, Any]]) -> int:
    return sum(word_count(m.get("content")) for m in messages)


def test_prompt_words_equal_a_full_count_whatever_the_requests_share() -> None:
    adapter = DeterministicAdapter()
    prefix = [{"role": "user", "content": f"message number {i}"} for i in range(50)]

    def prompt(messages: list[dict[str, Any]]) -> int:
        usage = adapter.complete(_request(messages)).usage
        return int(usage["prompt_tokens"])

    baseline = prompt(list(prefix))
    assert baseline == _plain(prefix)
    longer = [*prefix, {"role": "assistant", "content": "a b c d"}]  # the prefix shared
    assert prompt(longer) == _plain(longer)
    fresh = [dict(m) for m in prefix[:10]]  # equal texts, other objects: counted again
    fresh[3] = {"role": "user", "content": "now with seven words in it"}
    assert prompt(fresh) == _plain(fresh)
    assert prompt(prefix[:20]) == _plain(prefix[:20])  # shorter than what was counted
    edited = list(prefix)
    edited[49] = {"role": "user", "content": "one"}  # the last differs
    assert prompt(edited) == _plain(edited)
    assert prompt([]) == 0


def test_a_sliding_window_counts_only_the_messages_it_did_not_hold(monkeypatch) -> None:
    from runtime.llm import deterministic

    adapter = DeterministicAdapter()
    window = [{"role": "user", "content": f"message number {i}"} for i in range(40)]
    adapter.complete(_request(window))
    counted: list[object] = []

    def counting(text: object) -> int:
        counted.append(text)
        return word_count(text)

    monkeypatch.setattr(deterministic, "word_count", counting)
    slid = [*window[3:], {"role": "tool", "content": "the file's text, many words long"}]
    usage = adapter.complete(_request(slid)).usage
    assert usage["prompt_tokens"] == _plain(slid)
    held = {m["content"] for m in window}
    assert "the file's text, many words long" in counted
    assert not held & {text for text in counted if isinstance(text, str)}  # none counted again
