"""The live conversation's projections equal a replay of the journal, whatever happened.

The live side is a :class:`runtime.agent.ConversationCore` fed the conversation's committed
events one at a time (as the Conversation actor feeds it), answering ``projection(key)``
as the actor does (every projection but ``timeline``, which the gateway reads from the
journal), and a core rehydrated from a snapshot taken part-way plus the events after it;
the replay side is ``events.projections.get_projection`` over every event of the project
(``project.started`` included, which says whether orchestration is on and how large the
model's context window is: small ones here, so the window drops turns). A project restart
rebuilds the core from the conversation's events, with the options of the new
``project.started``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from events import catalog as ev
from events.envelope import Envelope
from events.projections import PROJECTION_KEYS, get_projection
from runtime.agent.core import ConversationCore
from runtime.agent.snapshot import encode_snapshot
from runtime.policy.options import validate_options
from tests.events.test_projections import Journal, started_project

OPS = (
    "message",
    "round",
    "request",
    "ask",
    "allow",
    "deny",
    "approve",
    "reject",
    "start",
    "end",
    "finish",
    "fail",
    "budget",
    "cancel",
    "resume",
    "stop",
    "signal",
    "other",
    "restart",
)


def _core(orchestration: bool, events: list[Envelope], window: int = 32000) -> ConversationCore:
    """A conversation core as the actor builds it: the project's options, its own events."""
    core = ConversationCore(
        project_id="p1",
        conversation_id="c1",
        options=validate_options({"orchestration": orchestration, "context_window_chars": window}),
        clock=lambda: datetime(2024, 5, 1, 13, 0, 0, tzinfo=UTC),
    )
    core.load([e for e in events if e.conversation_id == "c1"])
    return core


def _add(
    j: Journal, op: str, pick: int, calls: list[str], orchestration: bool, *, window: int = 32000
) -> bool:
    """Commit the event ``op`` stands for; return the orchestration of a restart."""
    corr = f"corr-{pick % 3}"
    call_id = calls[pick % len(calls)] if calls else "call-none"
    payload: ev.Event | None = None
    conversation: str | None = "c1"
    if op == "message":
        payload = ev.UserMessage(content=f"m{pick}")
    elif op == "round":
        payload = ev.LlmStarted(provider="deterministic", round=pick % 3 + 1)
    elif op == "request":
        if pick % 5 and calls:  # now and then a repeated request of a known call
            call_id = f"call-{len(calls) + 1}"
        elif not calls:
            call_id = "call-1"
        calls.append(call_id)
        payload = ev.ToolRequested(call_id=call_id, name="fs.read", args={"path": f"f{pick}"})
    elif op == "ask":
        payload = ev.ToolApprovalRequested(call_id=call_id)
    elif op == "allow":
        payload = ev.PolicyAllowed(tool="fs.read", call_id=call_id)
    elif op == "deny":
        payload = ev.PolicyDenied(tool="fs.read", reason="denied", call_id=call_id)
    elif op == "approve":
        payload = ev.ToolApproved(call_id=call_id)
    elif op == "reject":
        payload = ev.ToolRejected(call_id=call_id)
    elif op == "start":
        payload = ev.ToolStarted(call_id=call_id, name="fs.read")
    elif op == "end":
        payload = (
            ev.ToolCompleted(call_id=call_id, name="fs.read", result={"n": pick}),
            ev.ToolFailed(call_id=call_id, name="fs.read", reason={"code": "timeout"}),
            ev.ToolCancelled(call_id=call_id, name="fs.read"),
        )[pick % 3]
    elif op == "finish":
        payload = ev.LlmCompleted()
    elif op == "fail":
        payload = ev.LlmFailed(reason="timeout")
    elif op == "budget":
        payload = ev.BudgetExceeded(budget="max_rounds", limit=1, used=1)
    elif op == "cancel":
        payload = ev.ConversationCancel()
    elif op == "resume":
        payload = ev.ConversationResume()
    elif op == "stop":
        payload = ev.ConversationStopped()
    elif op == "signal":
        payload = ev.SecurityEnvDenied(tool="command.run", denied_keys=["X"], call_id=call_id)
        conversation = None if pick % 2 else "c1"
    elif op == "other":
        payload = ev.UserMessage(content="elsewhere")
        conversation = "c2"
    elif op == "restart":
        orchestration = bool(pick % 2)
        payload = ev.ProjectStarted(
            root="/srv/repo",
            options={"orchestration": orchestration, "context_window_chars": window},
        )
        conversation = None
    assert payload is not None
    j.add(payload, conversation_id=conversation, correlation_id=corr)
    return orchestration


LIVE_KEYS = tuple(key for key in PROJECTION_KEYS if key != "timeline")
"""The projections a live conversation answers (the timeline is read from the journal)."""


def _views(core: ConversationCore) -> dict[str, Any]:
    return {key: core.projection(key) for key in LIVE_KEYS}


def _replayed(events: list[Envelope]) -> dict[str, Any]:
    return {key: get_projection(events, "c1", key) for key in LIVE_KEYS}


def _from_snapshot(
    orchestration: bool, events: list[Envelope], cut: int, window: int
) -> ConversationCore:
    """A core rehydrated from a snapshot of the first ``cut`` events, then the rest."""
    mine = [e for e in events if e.conversation_id == "c1"]
    body = encode_snapshot(_core(orchestration, mine[:cut], window))
    core = _core(orchestration, [], window)
    core.rehydrate(mine[cut:], [], recovering=False, snapshot=body)
    return core


@settings(max_examples=150, deadline=None)
@given(
    st.booleans(),
    st.lists(st.tuples(st.sampled_from(OPS), st.integers(0, 11)), max_size=45),
    st.integers(0, 45),
    st.sampled_from([0, 10, 30, 32000]),
)
def test_the_live_views_equal_the_replay_after_every_event_and_after_a_rebuild(
    orchestration: bool, ops: list[tuple[str, int]], rebuild_at: int, window: int
) -> None:
    j = started_project(orchestration)
    _add(j, "restart", int(orchestration), [], orchestration, window=window)  # the window's options
    live = _core(orchestration, j.events, window)
    rebuilt: ConversationCore | None = None
    calls: list[str] = []
    for index, (op, pick) in enumerate(ops):
        orchestration = _add(j, op, pick, calls, orchestration, window=window)
        event = j.events[-1]
        if op == "restart":
            # A project restart: the conversation comes back from its events, new options.
            live = _core(orchestration, j.events, window)
            rebuilt = None
        elif event.conversation_id == "c1":
            live.committed([event])
            if rebuilt is not None:
                rebuilt.committed([event])
        if index == rebuild_at:  # a crash: a new core from the journal, mid-sequence
            rebuilt = _core(orchestration, j.events, window)
        replayed = _replayed(j.events)
        assert _views(live) == replayed
        if rebuilt is not None:
            assert _views(rebuilt) == replayed
            assert rebuilt.status() == live.status() == replayed["diagnostics"]["status"]
        snapped = _from_snapshot(orchestration, j.events, pick * index % (index + 2), window)
        assert _views(snapped) == replayed
        assert encode_snapshot(snapped) == encode_snapshot(_core(orchestration, j.events, window))


def test_with_orchestration_off_messages_leave_the_conversation_idle() -> None:
    j = started_project(orchestration=False)
    live = _core(False, j.events)
    for i in range(3):
        live.committed([j.add(ev.UserMessage(content=f"note {i}"), correlation_id=f"c-{i}")])
    assert live.projection("diagnostics") == {
        "event_count": 4,
        "pending_tool_call_count": 0,
        "last_event_type": "user.message",
        "status": "idle",
    }
    assert live.projection("diagnostics") == get_projection(j.events, "c1", "diagnostics")
