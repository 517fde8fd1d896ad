"""The bridge from synchronous tools to the async SDKs: deadlines, cancels, settling.

Real coroutines on the real loop thread; generous waits, and no assertion on how long
anything took beyond "not before the thing it waits for".
"""

from __future__ import annotations

import asyncio
import threading

import pytest

from runtime.errors import ToolError
from runtime.tools.sdk_loop import child_answers, gather_by_name, submit


async def _answer(value: str, after_s: float = 0.0) -> str:
    await asyncio.sleep(after_s)
    return value


class _Remote:
    """A coroutine that learns an id after a while, then runs until cancelled."""

    def __init__(self, learn_after_s: float) -> None:
        self.learn_after_s = learn_after_s
        self.task_id = ""
        self.cancelled = threading.Event()

    async def run(self) -> str:
        try:
            await asyncio.sleep(self.learn_after_s)
            self.task_id = "task-1"
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        return "never"


def test_a_coroutine_that_finishes_in_time_gives_its_result() -> None:
    assert submit(_answer("ok"), 30, threading.Event(), "the agent") == "ok"


def test_a_timeout_cancels_the_coroutine() -> None:
    remote = _Remote(learn_after_s=3600)
    with pytest.raises(ToolError) as caught:
        submit(remote.run(), 0.1, threading.Event(), "the agent")
    assert caught.value.code == "timeout"
    assert caught.value.message == "the agent did not answer within 100 ms"
    assert remote.cancelled.wait(30)


def test_a_cancel_waits_to_learn_the_id_when_asked_to_settle() -> None:
    remote = _Remote(learn_after_s=0.3)
    cancelled = threading.Event()
    cancelled.set()  # cancelled before the id is known
    with pytest.raises(ToolError) as caught:
        submit(
            remote.run(),
            30,
            cancelled,
            "the agent",
            settled=lambda: bool(remote.task_id),
            settle_s=30,
        )
    assert caught.value.code == "conversation_cancelled"
    assert remote.task_id == "task-1"  # it gave up only once the id was known
    assert remote.cancelled.wait(30)


def test_settling_gives_up_after_settle_s() -> None:
    remote = _Remote(learn_after_s=3600)
    with pytest.raises(ToolError) as caught:
        submit(remote.run(), 0.05, threading.Event(), "x", settled=lambda: False, settle_s=0.2)
    assert caught.value.code == "timeout" and remote.task_id == ""
    assert remote.cancelled.wait(30)


def test_every_entry_gets_its_answer_or_its_error_by_name() -> None:
    async def one(entry: dict[str, object]) -> dict[str, object]:
        if entry["name"] == "bad":
            raise ValueError("no card")
        if entry["name"] == "late":
            await asyncio.sleep(3600)
        return {"card": entry["name"]}

    entries = [{"name": "good"}, {"name": "bad"}, {"name": "late"}]
    answers = asyncio.run(gather_by_name(entries, one, 0.2, "agent card"))
    assert answers == {
        "good": {"card": "good"},
        "bad": {"error": {"code": "tool_error", "message": "ValueError: no card"}},
        "late": {"error": {"code": "tool_error", "message": "no agent card within 0.2 s"}},
    }


def test_a_child_that_gives_no_json_fails_every_name() -> None:
    answers = child_answers("runtime.no_such_module", {}, ["a", "b"], 60, "agent card fetch")
    assert set(answers) == {"a", "b"}
    assert answers["a"]["error"]["message"].startswith("the agent card fetch failed: ")
