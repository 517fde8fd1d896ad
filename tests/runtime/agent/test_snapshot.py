"""A conversation rehydrated from a snapshot is the conversation a full replay gives.

The loop runs on the harness of ``test_loop`` (in-memory journal, deterministic model,
scripted policy and tools). At a point of the history a snapshot is taken from a core that
folded the events so far; a core restored from it and fed the events after it must equal a
core that folded everything: same state bytes, same projections, same effects on recovery
(mid-turn states included: a call awaiting approval, a started call the restart fails as
``tool_crashed``). A snapshot that does not fit is refused with its reason code.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from events import catalog as ev
from events.envelope import Envelope
from runtime.agent.core import ConversationCore
from runtime.agent.effects import AppendBatch, CancelCalls
from runtime.agent.snapshot import CODEC, SNAPSHOT_FORMAT, SnapshotRejected, encode_snapshot
from runtime.agent.state import REMEMBERED_TURNS
from tests.runtime.agent.test_loop import Harness

LIVE_KEYS = ("diagnostics", "pending_tool_calls", "llm_context")


def snapshot_at(h: Harness, cut: int) -> bytes:
    """The snapshot of a core that folded the first ``cut`` events of the journal."""
    core = h.new_core()
    core.load(h.journal[:cut])
    return encode_snapshot(core)


def restored(h: Harness, cut: int) -> tuple[ConversationCore, list[object]]:
    """A core rehydrated from the snapshot at ``cut`` and the events after it."""
    core = h.new_core()
    effects = core.rehydrate(h.journal[cut:], [], recovering=True, snapshot=snapshot_at(h, cut))
    return core, list(effects)


def replayed(h: Harness) -> tuple[ConversationCore, list[object]]:
    """A core rehydrated from the whole journal."""
    core = h.new_core()
    effects = core.rehydrate(list(h.journal), [], recovering=True)
    return core, list(effects)


def same_effects(a: list[object], b: list[object]) -> None:
    """Effects equal but for the fresh ids and times of the events they would append."""

    def shape(effects: list[object]) -> list[object]:
        out: list[object] = []
        for effect in effects:
            if isinstance(effect, AppendBatch):
                out.append([(e.type, e.correlation_id, e.data) for e in effect.events])
            else:
                out.append(effect)
        return out

    assert shape(a) == shape(b)


def assert_same(h: Harness, cut: int) -> tuple[ConversationCore, list[object]]:
    snap_core, snap_effects = restored(h, cut)
    full_core, full_effects = replayed(h)
    assert encode_snapshot(snap_core) == encode_snapshot(full_core)
    for key in LIVE_KEYS:
        assert snap_core.projection(key) == full_core.projection(key), key
    assert (snap_core.status(), snap_core.turn, snap_core.tokens_used) == (
        full_core.status(),
        full_core.turn,
        full_core.tokens_used,
    )
    same_effects(snap_effects, full_effects)
    return snap_core, snap_effects


def test_every_cut_of_finished_turns_restores_the_replayed_state() -> None:
    h = Harness()
    h.send({"type": "user.message", "data": {"content": "read a"}})
    h.send({"type": "user.message", "data": {"content": "hello"}}, wait=True)
    for cut in range(len(h.journal) + 1):
        assert_same(h, cut)


def test_a_call_awaiting_approval_is_still_awaiting_after_a_snapshot() -> None:
    h = Harness()
    h.policy = lambda call: [ev.ToolApprovalRequested(call_id=call.call_id)]
    h.send({"type": "user.message", "data": {"content": "read a.txt"}, "correlation_id": "cp"})
    assert h.core.status() == "awaiting_approval"
    for cut in range(len(h.journal) + 1):
        core, effects = assert_same(h, cut)
        assert core.status() == "awaiting_approval"
        assert effects == []
    core, _ = restored(h, len(h.journal) - 1)
    h.core = core  # the restored conversation takes the approval and finishes the turn
    call_id = core.projection("pending_tool_calls")[0]["call_id"]
    h.send({"type": "tool.approved", "data": {"call_id": call_id}})
    assert h.types()[-1] == "llm.completed"


def test_a_started_call_cut_off_is_recovered_as_crashed_from_a_snapshot() -> None:
    h = Harness()
    h.hold_tools = True
    h.send({"type": "user.message", "data": {"content": "read a"}})
    assert h.types()[-1] == "tool.started"
    for cut in range(len(h.journal) + 1):
        _, effects = assert_same(h, cut)
        append = effects[0]
        assert isinstance(append, AppendBatch)
        assert [e.data["reason"]["code"] for e in append.events if e.type == "tool.failed"] == [
            "tool_crashed"
        ]
        assert isinstance(effects[-1], CancelCalls)


def test_a_waiter_of_a_turn_that_ended_before_the_snapshot_is_answered() -> None:
    h = Harness()
    h.send({"type": "user.message", "data": {"content": "hi"}, "correlation_id": "cw"})
    core = h.new_core()
    snapshot = snapshot_at(h, len(h.journal))
    effects = core.rehydrate([], [("cw", "waiting")], recovering=True, snapshot=snapshot)
    (answer,) = [e for e in effects if getattr(e, "to", None) == "waiting"]
    assert answer.result["outcome"] == "llm.completed"  # type: ignore[attr-defined]


def test_a_snapshot_of_another_conversation_or_format_or_orchestration_is_refused() -> None:
    h = Harness()
    h.send({"type": "user.message", "data": {"content": "hi"}})
    body = snapshot_at(h, len(h.journal))
    other = ConversationCore(
        project_id="p1", conversation_id="c2", options=h.options, clock=h.clock
    )
    with pytest.raises(SnapshotRejected) as info:
        other.rehydrate([], [], recovering=False, snapshot=body)
    assert info.value.reason == "snapshot_conversation"
    older = msgspec.msgpack.encode({**msgspec.msgpack.decode(body), "format": SNAPSHOT_FORMAT - 1})
    off = Harness(orchestration=False)
    names = {"project_id": "p1", "conversation_id": "c1"}
    assert CODEC.check(older, options=h.options, **names) == "snapshot_format"
    assert CODEC.check(b"\x93garbage", options=h.options, **names) == "snapshot_decode_error"
    assert CODEC.check(body, options=off.options, **names) == "snapshot_orchestration"
    assert CODEC.check(body, options=h.options, **names) is None


def test_the_codec_folds_new_events_onto_a_snapshot_as_a_replay_would() -> None:
    h = Harness()
    h.send({"type": "user.message", "data": {"content": "read a"}})
    h.send({"type": "user.message", "data": {"content": "hello"}})
    cut = len(h.journal) // 2
    names = {"project_id": "p1", "conversation_id": "c1", "options": h.options}
    events: list[Envelope] = list(h.journal)
    folded = CODEC.fold(snapshot_at(h, cut), events[cut:], **names)
    assert folded == CODEC.fold(None, events, **names) == snapshot_at(h, len(events))
    assert CODEC.fold(b"not a snapshot", events, **names) is None


def test_the_turn_records_stay_bounded_and_recent_turns_are_still_answered() -> None:
    h = Harness()
    for i in range(REMEMBERED_TURNS * 2):
        h.send({"type": "user.message", "data": {"content": f"hi {i}"}, "correlation_id": f"t{i}"})
    assert REMEMBERED_TURNS <= len(h.core.turns) <= REMEMBERED_TURNS + 64
    last = f"t{REMEMBERED_TURNS * 2 - 1}"
    core = h.new_core()
    effects = core.rehydrate(
        [], [(last, "waiting")], recovering=True, snapshot=snapshot_at(h, len(h.journal))
    )
    (answer,) = [e for e in effects if getattr(e, "to", None) == "waiting"]
    assert answer.result["correlation_id"] == last  # type: ignore[attr-defined]


def test_model_requests_keep_the_settled_context_and_match_the_llm_context() -> None:
    h = Harness()
    requests: list[list[dict[str, object]]] = []
    complete = h.model.complete

    def recording(request: Any) -> Any:
        requests.append(request.messages)
        return complete(request)

    h.model.complete = recording  # type: ignore[method-assign]
    for i in range(4):
        h.send({"type": "user.message", "data": {"content": f"read a{i}"}})
    context = h.core.projection("llm_context")
    last = requests[-1]
    assert [(m["role"], m.get("tool_call_id")) for m in last] == [
        (m["role"], m.get("tool_call_id")) for m in context[: len(last)]
    ]
    assert all(a is b for a, b in zip(requests[-2], last[: len(requests[-2]) - 1], strict=False))
    assert h.core._sent.wrapped == {}  # every wrapped result is in the settled prefix


def test_a_snapshot_folded_with_another_context_window_is_refused() -> None:
    h = Harness()
    h.send({"type": "user.message", "data": {"content": "hi"}})
    body = snapshot_at(h, len(h.journal))
    wider = Harness(context_window_chars=64000)
    names = {"project_id": "p1", "conversation_id": "c1"}
    assert CODEC.check(body, options=wider.options, **names) == "snapshot_window"
    assert CODEC.check(body, options=h.options, **names) is None


def test_the_snapshot_and_the_model_request_stay_bounded_as_history_grows() -> None:
    h = Harness(context_window_chars=2000, token_budget=10**9)
    requests: list[list[dict[str, Any]]] = []
    complete = h.model.complete

    def recording(request: Any) -> Any:
        requests.append(request.messages)
        return complete(request)

    h.model.complete = recording  # type: ignore[method-assign]
    sizes = []
    for i in range(900):  # the turn records reach their own bound (REMEMBERED_TURNS) first
        h.send({"type": "user.message", "data": {"content": f"read a{i}"}})
        if i + 1 in (400, 900):
            sizes.append(len(encode_snapshot(h.core)))
    assert sizes[1] <= sizes[0] * 1.05
    assert h.core._context.window.chars <= 2000
    assert h.core._context.window.start > 0
    assert requests[-1][0]["role"] == "user"
    assert max(map(len, requests[-200:])) <= max(map(len, requests[-1000:-800]))  # two a turn
    unbounded = Harness(context_window_chars=0, token_budget=10**9)
    for i in range(900):
        unbounded.send({"type": "user.message", "data": {"content": f"read a{i}"}})
    assert len(encode_snapshot(unbounded.core)) > 3 * sizes[1]
    core = h.new_core()  # and a core rebuilt from the whole journal keeps the same window
    core.load(list(h.journal))
    assert encode_snapshot(core) == encode_snapshot(h.core)
