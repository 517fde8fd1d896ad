"""A turn folded ahead of its commit, then confirmed (``ConversationCore.confirm``).

A host folds the loop's own batches at once with provisional envelopes and commits them
together later (``actors.agent_shell``). Whatever the commit assigns (global positions with
other conversations' events in between, redacted data), the confirmed core must equal a
core that folded the committed events one by one.
"""

from __future__ import annotations

from typing import Any

import msgspec

from events import catalog as ev
from events.envelope import Envelope, NewEvent
from runtime.agent.core import ConversationCore, provisional
from runtime.agent.effects import Answer, AppendBatch, AskPolicy, CallModel, Dispatch
from tests.runtime.agent.test_loop import Harness


class StagingHarness(Harness):
    """The loop's own appends are folded provisionally and committed by :meth:`flush`."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.staged: list[NewEvent] = []
        self.provisional: list[Envelope] = []
        self.commits = 0
        self.redact: dict[str, str] = {}

    def commit(self, events: list[NewEvent]) -> list[Envelope]:
        self.commits += 1
        self.journal.append(  # another conversation's event takes a position in between
            Envelope(
                seq=len(self.journal) + 1,
                stream_version=0,
                event_id=f"other-{len(self.journal)}",
                type="user.message",
                at="2026-11-22T10:00:00.000Z",
                project_id="p1",
                conversation_id="c-other",
                correlation_id="corr-other",
                causation_id=None,
                data={"content": "elsewhere"},
                hash="h",
                prev_hash="p",
            )
        )
        out = []
        for e in events:
            data = {
                k: self.redact.get(v, v) if isinstance(v, str) else v for k, v in e.data.items()
            }
            fields = {**msgspec.structs.asdict(e), "data": data}
            env = Envelope(
                seq=len(self.journal) + 1, stream_version=1, hash="h", prev_hash="p", **fields
            )
            self.journal.append(env)
            out.append(env)
        return out

    def run(self, effects: list[Any]) -> None:
        queue = list(effects)
        while queue:
            effect = queue.pop(0)
            if isinstance(effect, AppendBatch) and effect.ack_to is None and effect.key is None:
                last = self.core.last_seq
                envelopes = provisional(effect.events, last)
                self.staged.extend(effect.events)
                self.provisional.extend(envelopes)
                queue = self.core.acknowledged(effect, envelopes) + queue
            elif isinstance(effect, AppendBatch):
                self.flush()
                committed = self.commit(effect.events)
                queue = self.core.acknowledged(effect, committed) + queue
            elif isinstance(effect, Answer):
                self.flush()
                self.replies.append((effect.to, effect.result))
            elif isinstance(effect, CallModel):
                reply = self.model.complete(effect.request)  # in memory: no commit first
                queue = self.core.model_replied(effect.round, reply, []) + queue
            elif isinstance(effect, AskPolicy):
                decided = self.core.policy_decided(effect.call.call_id, self.policy(effect.call))
                queue = decided + queue
            elif isinstance(effect, Dispatch):
                done = self.core.tool_finished(effect.call.call_id, self.tool(effect.call))
                queue = done + queue

    def flush(self) -> None:
        staged, self.staged = self.staged, []
        provisional, self.provisional = self.provisional, []
        if staged:
            assert self.core.confirm(provisional, self.commit(staged))


def replayed(h: Harness) -> ConversationCore:
    core = h.new_core()
    core.load([e for e in h.journal if e.conversation_id == "c1"])
    return core


def same_state(live: ConversationCore, replay: ConversationCore) -> None:
    assert live.last_seq == replay.last_seq
    assert live.fold.last_seq == replay.fold.last_seq
    assert live._context.last_seq == replay._context.last_seq
    assert {c: (r.user_seq, r.end_type, r.end_data) for c, r in live.turns.items()} == {
        c: (r.user_seq, r.end_type, r.end_data) for c, r in replay.turns.items()
    }
    assert [c.view() for c in live.fold.calls.values()] == [
        c.view() for c in replay.fold.calls.values()
    ]
    for key in ("pending_tool_calls", "llm_context", "diagnostics"):
        assert live.projection(key) == replay.projection(key), key


def test_a_whole_turn_folded_ahead_commits_once_and_equals_a_replay() -> None:
    h = StagingHarness()
    h.send({"type": "user.message", "data": {"content": "read README.md"}, "correlation_id": "c"})
    h.flush()
    assert h.commits == 2  # the client's message, then the rest of the turn at once
    assert [e.type for e in h.journal if e.conversation_id == "c1"][-1] == "llm.completed"
    same_state(h.core, replayed(h))
    h.send({"type": "user.message", "data": {"content": "again"}, "correlation_id": "d"})
    h.flush()
    same_state(h.core, replayed(h))


def test_a_call_awaiting_approval_keeps_its_committed_position() -> None:
    h = StagingHarness()
    h.policy = lambda call: [ev.ToolApprovalRequested(call_id=call.call_id)]
    h.send({"type": "user.message", "data": {"content": "read README.md"}, "correlation_id": "c"})
    h.flush()
    live = replayed(h)
    [call] = h.core.fold.calls.values()
    requested = next(e for e in h.journal if e.type == "tool.requested")
    assert call.requested_seq == requested.seq
    same_state(h.core, live)


def test_a_commit_that_kept_other_data_than_was_folded_is_refused() -> None:
    h = StagingHarness()
    h.redact = {"Tool fs.read completed.": "[REDACTED]"}  # the shell redacts first; not here
    h.send({"type": "user.message", "data": {"content": "read README.md"}, "correlation_id": "c"})
    staged, provisional = h.staged, h.provisional
    assert not h.core.confirm(provisional, h.commit(staged))  # state uncertain: restart
