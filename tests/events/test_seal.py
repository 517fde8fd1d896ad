"""Seals judged as pure data: checkpoints, their chain, and the anchor kept outside."""

from __future__ import annotations

import uuid
from typing import Any

import msgspec

from events.catalog import payload_to_data
from events.chain import chain_hash
from events.envelope import GENESIS_HASH, Envelope, NewEvent
from events.seal import (
    GENESIS_MAC,
    Anchor,
    AnchorUnreadable,
    key_id,
    make_checkpoint,
    sign_anchor,
)
from events.seal_check import check_seals

KEY = b"k" * 32
AT = "2026-11-22T10:00:00.000Z"


class History:
    """A project's events as the journal writes them, checkpoints included."""

    def __init__(self, key: bytes = KEY, project: str = "p1") -> None:
        self.key = key
        self.project = project
        self.events: list[tuple[int, Envelope]] = []
        self.anchors: list[Anchor] = []
        self._mac = GENESIS_MAC
        self._streams: dict[str | None, int] = {}

    def _append(self, kind: str, data: dict[str, Any], conversation: str | None) -> Envelope:
        head = self.events[-1][1].hash if self.events else GENESIS_HASH
        version = self._streams.get(conversation, 0) + 1
        self._streams[conversation] = version
        event = NewEvent(
            event_id=str(uuid.uuid4()),
            type=kind,
            at=AT,
            project_id=self.project,
            conversation_id=conversation,
            correlation_id="corr-1",
            data=data,
        )
        position = len(self.events) + 1
        envelope = Envelope(
            seq=position * 10,
            stream_version=version,
            hash=chain_hash(head, event, version),
            prev_hash=head,
            **msgspec.structs.asdict(event),
        )
        self.events.append((position, envelope))
        return envelope

    def message(self, count: int = 1) -> History:
        for i in range(count):
            self._append("user.message", {"content": f"m{i}"}, "c1")
        return self

    def seal(self, *, closed: bool = False) -> History:
        position, head = self.events[-1]
        checkpoint = make_checkpoint(
            self.key,
            self.project,
            index=len(self.anchors) + 1,
            head_position=position,
            head_hash=head.hash,
            prev_checkpoint=self._mac,
            sealed_at=AT,
            reason="count",
        )
        self._mac = checkpoint.mac
        envelope = self._append("journal.checkpoint", payload_to_data(checkpoint), None)
        anchor = Anchor(
            project_id=self.project,
            checkpoint=checkpoint,
            checkpoint_seq=envelope.seq,
            closed=closed,
            written_at=AT,
        )
        self.anchors.append(sign_anchor(self.key, anchor))
        return self


def check(history: History, **kwargs: Any) -> Any:
    kwargs.setdefault("anchor", history.anchors[-1] if history.anchors else None)
    kwargs.setdefault("anchor_after", kwargs["anchor"])
    return check_seals(history.events, project_id=history.project, key=KEY, **kwargs)


def test_a_sealed_history_with_its_anchor_holds_and_counts_its_unsealed_tail() -> None:
    history = History().message(3).seal().message(2).seal().message(4)
    report = check(history)
    assert (report.ok, report.problems, report.anchor) == (True, [], "ok")
    assert (report.checkpoints, report.sealed_through, report.sealed_seq) == (2, 7, 70)
    assert report.unsealed_events == 4


def test_one_checkpoint_without_an_anchor_is_the_crash_window_two_are_a_missing_anchor() -> None:
    one = History().message(2).seal()
    assert check(one, anchor=None).ok is True
    two = History().message(2).seal().message().seal()
    report = check(two, anchor=None)
    assert (report.anchor, report.problems) == (
        "missing",
        [{"kind": "anchor_missing", "checkpoints": 2}],
    )


def test_checkpoints_and_anchor_made_with_another_key_do_not_hold() -> None:
    other = b"o" * 32
    history = History(key=other).message(2).seal()
    report = check(history)
    assert report.problems == [
        {
            "kind": "mac_mismatch",
            "seq": 30,
            "position": 3,
            "checkpoint_index": 1,
            "key_id": key_id(other),
            "expected_key_id": key_id(KEY),
        },
        {
            "kind": "anchor_invalid",
            "reason": "its MAC does not match (changed, or made with another key)",
        },
    ]


def test_the_anchor_of_another_project_is_not_accepted() -> None:
    mine = History().message(2).seal()
    theirs = History(project="p2").message(2).seal()
    report = check(mine, anchor=theirs.anchors[-1])
    assert report.problems == [
        {"kind": "anchor_invalid", "reason": "it is the anchor of project 'p2'"}
    ]


def test_an_unreadable_anchor_is_reported_with_its_reason() -> None:
    history = History().message(2).seal()
    report = check(history, anchor=AnchorUnreadable(reason="x.json is not an anchor"))
    assert (report.anchor, report.problems) == (
        "invalid",
        [{"kind": "anchor_invalid", "reason": "x.json is not an anchor"}],
    )


def test_a_writer_sealing_between_the_two_anchor_reads_is_no_false_alarm() -> None:
    history = History().message(2).seal().message(2).seal()
    read = History()
    read.events = history.events[:]  # the events as read, before the next seal
    history.message().seal()
    report = check(read, anchor=history.anchors[1], anchor_after=history.anchors[2])
    assert (report.ok, report.problems) == (True, [])


def test_an_anchor_two_checkpoints_behind_the_journal_is_stale() -> None:
    history = History().message().seal().message().seal().message().seal()
    report = check(history, anchor=history.anchors[0])
    assert report.problems == [{"kind": "anchor_stale", "anchor_index": 1, "journal_index": 3}]
    assert check(history, anchor=history.anchors[1]).ok is True  # one behind: a commit in flight


def test_events_after_a_closed_anchor_count_only_when_both_reads_saw_it_closed() -> None:
    history = History().message(2).seal(closed=True)
    closed = history.anchors[-1]
    history.message(2)
    reopened = sign_anchor(KEY, msgspec.structs.replace(closed, closed=False))
    assert check(history, anchor=closed, anchor_after=reopened).ok is True
    report = check(history, anchor=closed, anchor_after=closed)
    assert report.problems == [
        {
            "kind": "appended_after_shutdown",
            "sealed_through": 3,
            "found_through": 5,
            "appended_events": 2,
            "closed_at": AT,
        }
    ]


def test_a_gap_in_positions_is_reported_as_missing_events() -> None:
    history = History().message(3).seal().message(2)
    del history.events[1]
    report = check(history)
    assert report.problems[0] == {
        "kind": "missing_events",
        "from_position": 2,
        "to_position": 2,
        "before_seq": 30,
    }


def test_a_checkpoint_whose_data_does_not_decode_is_malformed() -> None:
    history = History().message(2).seal()
    position, checkpoint = history.events[-1]
    broken = msgspec.structs.replace(checkpoint, data={"index": "one"})
    history.events[-1] = (position, broken)
    report = check(history, anchor=None)
    assert [(p["kind"], p["seq"]) for p in report.problems] == [("checkpoint_malformed", 30)]


def test_a_checkpoint_type_inside_a_conversation_is_not_a_checkpoint() -> None:
    history = History().message(2)
    history._append("journal.checkpoint", {"index": 1}, "c1")
    report = check(history, anchor=None)
    assert (report.ok, report.checkpoints, report.unsealed_events) == (True, 0, 3)
