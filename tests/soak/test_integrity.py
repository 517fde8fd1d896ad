"""The soak harness's integrity checks catch a journal damaged on purpose.

The journal is real: turns appended with ``runtime.journal.Journal`` to a SQLite file in
``tmp_path`` and read back as the envelope dicts ``subscribe`` yields. Then one thing is
broken and exactly the matching counter must move.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import msgspec
import pytest

from events import catalog as ev
from events.envelope import new_call_id, new_event
from runtime.journal.store import Journal
from soak.integrity import (
    StreamCheck,
    check_integrity,
    find_chain_breaks,
    find_duplicates,
    find_lost,
    find_unfinished_turns,
    find_unterminated,
)

AT = "2026-11-22T10:00:00.000Z"


def _turn(project: str, conversation: str, correlation: str) -> list[Any]:
    """One soak turn's events: message, model round, allowed fs.read, result, answer."""
    call_id = new_call_id()

    def make(payload: ev.Event, cause: Any = None) -> Any:
        return new_event(
            payload,
            project_id=project,
            conversation_id=conversation,
            at=AT,
            correlation_id=correlation,
            causation_id=cause.event_id if cause is not None else None,
        )

    message = make(ev.UserMessage(content="read README.md"))
    started = make(ev.LlmStarted(provider="deterministic", model="det", round=1), message)
    requested = make(
        ev.ToolRequested(call_id=call_id, name="fs.read", args={"path": "README.md"}), started
    )
    allowed = make(ev.PolicyAllowed(tool="fs.read"), requested)
    running = make(ev.ToolStarted(call_id=call_id, name="fs.read"), allowed)
    done = make(
        ev.ToolCompleted(call_id=call_id, name="fs.read", duration_ms=1, result={"ok": 1}),
        running,
    )
    answer = make(ev.AssistantMessage(content="Tool fs.read completed."), done)
    completed = make(ev.LlmCompleted(finish_reason="stop", tool_call_count=1), answer)
    return [message, started, requested, allowed, running, done, answer, completed]


@pytest.fixture
def journal(tmp_path: Any) -> Iterator[tuple[list[dict[str, Any]], list[dict[str, Any]]]]:
    """Two projects, two conversations each, two turns each: (events, acks)."""
    store = Journal("sqlite", sqlite_path=str(tmp_path / "journal.sqlite"))
    acks = []
    try:
        for project in ("p0", "p1"):
            for conversation in ("c0", "c1"):
                for index in range(2):
                    batch = _turn(project, conversation, f"corr-{project}-{conversation}-{index}")
                    # As the conversation does: the message and the model round first, the
                    # decision next, then the tool's result and the answer.
                    committed = store.append(batch[:3])
                    store.append(batch[3:5])
                    store.append(batch[5:])
                    first = committed[0]
                    acks.append({"seq": first.seq, "event_id": first.event_id})
        events = [msgspec.to_builtins(e) for p in ("p0", "p1") for e in store.read_project(p)]
    finally:
        store.close()
    events.sort(key=lambda e: e["seq"])
    yield events, acks


def test_an_intact_journal_passes_every_check(journal: Any) -> None:
    events, acks = journal
    result = check_integrity(events, acks, {"p0": {"ok": True, "chain_ok": True}})
    assert (result.lost, result.duplicated, result.unterminated_calls) == (0, 0, 0)
    assert result.unfinished_turns == 0
    assert (result.replay_mismatch, result.hash_chain_ok, result.problems) == (0, True, [])
    assert result.checked_events == 64


def test_a_missing_terminal_event_is_an_unterminated_call(journal: Any) -> None:
    events, acks = journal
    index = next(i for i, e in enumerate(events) if e["type"] == "tool.completed")
    call_id = events[index]["data"]["call_id"]
    damaged = events[:index] + events[index + 1 :]
    assert find_unterminated(damaged) == [
        f"unterminated: call {call_id} in p0 has 0 terminal events"
    ]
    assert check_integrity(damaged, acks).unterminated_calls == 1


def test_a_second_terminal_event_for_one_call_is_caught(journal: Any) -> None:
    events, acks = journal
    done = next(e for e in events if e["type"] == "tool.completed")
    twin = {**copy.deepcopy(done), "type": "tool.failed", "event_id": "other", "seq": 10_000}
    result = check_integrity([*events, twin], acks)
    assert result.unterminated_calls == 1
    assert f"call {done['data']['call_id']} in p0 has 2 terminal events" in result.problems[0]


def test_a_terminal_event_without_its_request_is_caught(journal: Any) -> None:
    events, _acks = journal
    index = next(i for i, e in enumerate(events) if e["type"] == "tool.requested")
    call_id = events[index]["data"]["call_id"]
    damaged = events[:index] + events[index + 1 :]
    assert find_unterminated(damaged) == [
        f"unterminated: terminal event for unknown call {call_id} in p0"
    ]


def test_a_duplicated_event_is_caught(journal: Any) -> None:
    events, acks = journal
    damaged = [*events, copy.deepcopy(events[5])]
    assert find_duplicates(damaged) == [
        f"duplicated: event_id {events[5]['event_id']} appears 2 times",
        f"duplicated: seq {events[5]['seq']} appears 2 times",
    ]
    assert check_integrity(damaged, acks).duplicated == 2


def test_an_inbound_message_recorded_twice_is_a_duplicate(journal: Any) -> None:
    events, _acks = journal
    message = next(e for e in events if e["type"] == "user.message")
    again = {**copy.deepcopy(message), "event_id": "a-new-id", "seq": 10_000}
    assert find_duplicates([*events, again]) == [
        "duplicated: user.message of correlation corr-p0-c0-0 in p0/c0 appears 2 times"
    ]


def test_changed_data_breaks_the_hash_chain(journal: Any) -> None:
    events, acks = journal
    damaged = copy.deepcopy(events)
    target = next(e for e in damaged if e["type"] == "tool.completed")
    target["data"]["result"] = {"ok": 2}
    assert find_chain_breaks(damaged) == [
        f"hash chain: p0 breaks at seq {target['seq']} (hash_mismatch)"
    ]
    result = check_integrity(damaged, acks)
    assert (result.hash_chain_ok, result.lost, result.duplicated) == (False, 0, 0)


def test_a_removed_event_breaks_the_chain_at_the_next_one(journal: Any) -> None:
    events, _acks = journal
    p1 = [e for e in events if e["project_id"] == "p1"]
    removed = p1[3]
    damaged = [e for e in events if e is not removed]
    assert find_chain_breaks(damaged) == [
        f"hash chain: p1 breaks at seq {p1[4]['seq']} (prev_hash_mismatch)"
    ]


def test_a_lost_turn_end_is_an_unfinished_turn(journal: Any) -> None:
    events, acks = journal
    last = events[-1]
    assert last["type"] == "llm.completed"
    damaged = events[:-1]
    assert find_unfinished_turns(damaged) == [
        f"unfinished: the turn of correlation {last['correlation_id']} in p1/c1 never ended"
    ]
    result = check_integrity(damaged, acks)
    assert (result.unfinished_turns, result.hash_chain_ok) == (1, True)


def test_a_lost_ack_is_caught(journal: Any) -> None:
    events, acks = journal
    message = next(e for e in events if e["event_id"] == acks[3]["event_id"])
    damaged = [e for e in events if e is not message]
    assert find_lost(damaged, acks) == [
        f"lost: acknowledged event {message['event_id']} (seq {message['seq']}) missing"
    ]
    assert check_integrity(damaged, acks).lost == 1


def test_an_ack_at_another_seq_is_lost(journal: Any) -> None:
    events, acks = journal
    wrong = {**acks[0], "seq": acks[0]["seq"] + 1}
    assert find_lost(events, [wrong]) == [
        f"lost: acknowledged event {wrong['event_id']} was acked at seq {wrong['seq']} "
        f"but is at seq {acks[0]['seq']}"
    ]


def test_verify_mismatches_count_as_replay_mismatches(journal: Any) -> None:
    events, acks = journal
    verified = {
        "p0": {
            "ok": False,
            "chain_ok": True,
            "mismatches": [
                {"kind": "projection", "conversation_id": "c0", "projection": "timeline"}
            ],
        },
        "p1": {"ok": False, "chain_ok": False, "mismatches": [{"kind": "hash_chain", "seq": 3}]},
    }
    result = check_integrity(events, acks, verified)
    assert (result.replay_mismatch, result.hash_chain_ok) == (1, False)
    assert result.problems == [
        "hash chain: verify(p1) reports a broken chain",
        'replay mismatch: p0: {"kind":"projection","conversation_id":"c0","projection":"timeline"}',
    ]


def test_broken_seals_reported_by_verify_fail_the_chain_check(journal: Any) -> None:
    events, acks = journal
    truncated = {"kind": "truncated", "expected_through": 40, "found_through": 31}
    verified = {
        "p0": {"ok": True, "chain_ok": True, "mismatches": [], "anchor_problems": []},
        "p1": {"ok": False, "chain_ok": True, "mismatches": [], "anchor_problems": [truncated]},
    }
    result = check_integrity(events, acks, verified)
    assert (result.replay_mismatch, result.hash_chain_ok) == (0, False)
    assert result.problems == [
        'anchor: verify(p1) reports {"kind":"truncated","expected_through":40,"found_through":31}'
    ]


def test_an_event_without_the_envelope_shape_fails_the_chain_check(journal: Any) -> None:
    events, acks = journal
    damaged = [*events[:-1], {k: v for k, v in events[-1].items() if k != "hash"}]
    result = check_integrity(damaged, acks)
    assert result.hash_chain_ok is False
    assert result.problems[0].startswith("hash chain: an event does not have the envelope's shape")


def test_removing_any_one_event_is_never_silent(journal: Any) -> None:
    events, acks = journal
    for index, removed in enumerate(events):
        damaged = events[:index] + events[index + 1 :]
        result = check_integrity(damaged, acks)
        last_of_project = all(e["project_id"] != removed["project_id"] for e in events[index + 1 :])
        # A project's last event leaves its chain intact: the unfinished turn gives it away.
        assert result.hash_chain_ok is last_of_project, removed
        assert result.unfinished_turns == int(removed["type"] == "llm.completed"), removed
        assert result.lost == int(removed["type"] == "user.message"), removed


def test_a_read_back_fed_one_project_after_another_finds_what_the_whole_check_finds(
    journal: Any,
) -> None:
    events, acks = journal
    lost_event = next(e for e in events if e["event_id"] == acks[-1]["event_id"])
    damaged = [e for e in events if e is not lost_event]
    check = StreamCheck({**a, "project_id": "p0" if i < 4 else "p1"} for i, a in enumerate(acks))
    for project in ("p1", "p0"):  # as subscribe gives them: a project after another
        for event in damaged:
            if event["project_id"] == project:
                check.add(event)
    verified = {"p0": {"ok": True, "chain_ok": True}, "p1": {"ok": True, "chain_ok": True}}
    assert check.result(verified) == check_integrity(damaged, acks, verified)
    assert check.result(verified).lost == 1
    assert check.result(verified, read={"p0"}).lost == 0  # p1 was not read back
    assert check.types["user.message"] == 7  # the lost one was a message


def test_ids_and_seqs_that_differ_only_in_their_text_are_not_duplicates(journal: Any) -> None:
    events, _acks = journal
    event = events[3]
    upper = {**copy.deepcopy(event), "event_id": str(event["event_id"]).upper(), "seq": 99_999}
    padded = {**copy.deepcopy(events[4]), "event_id": "another", "seq": f"0{events[4]['seq']}"}
    assert str(event["event_id"]) != upper["event_id"]
    assert find_duplicates([*events, upper, padded]) == []
