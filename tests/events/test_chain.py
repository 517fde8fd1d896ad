"""The hash chain detects a changed, removed or reordered event."""

from __future__ import annotations

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from events.chain import chain_hash, verify_chain
from events.codecs import canonical_json
from events.envelope import GENESIS_HASH, Envelope, NewEvent


def build_chain(contents: list[str], project: str = "p") -> list[Envelope]:
    out: list[Envelope] = []
    prev = GENESIS_HASH
    for i, text in enumerate(contents, start=1):
        event = NewEvent(
            event_id=f"e{i}",
            type="user.message",
            at="2026-11-22T00:00:00.000Z",
            project_id=project,
            conversation_id="c",
            correlation_id="corr",
            data={"content": text},
        )
        digest = chain_hash(prev, event, i)
        out.append(
            Envelope(
                seq=i,
                stream_version=i,
                hash=digest,
                prev_hash=prev,
                **msgspec.structs.asdict(event),
            )
        )
        prev = digest
    return out


def test_an_intact_chain_verifies() -> None:
    report = verify_chain(build_chain(["a", "b", "c"]))
    assert (report.ok, report.checked_events, report.breaks) == (True, 3, [])


def test_a_changed_event_breaks_the_chain_at_that_event() -> None:
    events = build_chain(["a", "b", "c"])
    events[1] = msgspec.structs.replace(events[1], data={"content": "B"})
    report = verify_chain(events)
    assert [(b.seq, b.reason) for b in report.breaks] == [(2, "hash_mismatch")]


def test_a_removed_event_breaks_the_chain_at_the_next_event() -> None:
    events = build_chain(["a", "b", "c"])
    del events[1]
    report = verify_chain(events)
    assert [(b.seq, b.reason) for b in report.breaks] == [(3, "prev_hash_mismatch")]


def test_reordered_events_break_the_chain() -> None:
    events = build_chain(["a", "b", "c"])
    events[0], events[1] = events[1], events[0]
    report = verify_chain(events)
    assert [(b.seq, b.reason) for b in report.breaks] == [(2, "prev_hash_mismatch")]


def test_chains_of_different_projects_are_checked_separately() -> None:
    a = build_chain(["x", "y"], project="a")
    b = build_chain(["z"], project="b")
    assert verify_chain([a[0], b[0], a[1]]).ok


@settings(max_examples=50, deadline=None)
@given(contents=st.lists(st.text(max_size=10), min_size=2, max_size=8), data=st.data())
def test_any_single_change_is_detected(contents: list[str], data: st.DataObject) -> None:
    events = build_chain(contents)
    index = data.draw(st.integers(0, len(events) - 1))
    events[index] = msgspec.structs.replace(
        events[index], data={"content": events[index].data["content"] + "!"}
    )
    assert verify_chain(events).ok is False


@settings(max_examples=100, deadline=None)
@given(
    data=st.dictionaries(
        st.text(max_size=8),
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.text(max_size=12),
            lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=5), c, max_size=3),
            max_leaves=8,
        ),
        max_size=5,
    )
)
def test_a_hash_given_the_data_s_canonical_json_is_the_hash_of_the_event(
    data: dict[str, object],
) -> None:
    event = NewEvent(
        event_id="e1",
        type="tool.completed",
        at="2026-11-22T00:00:00.000Z",
        project_id="p",
        conversation_id="c",
        correlation_id="corr",
        data=data,
    )

    given_json = chain_hash(GENESIS_HASH, event, 3, data_json=canonical_json(data))

    assert given_json == chain_hash(GENESIS_HASH, event, 3)
