"""``verify``'s comparison of a live conversation with the replay of its journal."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from events.envelope import NewEvent
from events.projections import get_projection
from runtime.daemon.verify import _compare_live
from runtime.journal.store import Journal
from runtime.wire.ops import Call


def _message(text: str) -> NewEvent:
    return NewEvent(
        event_id=str(uuid.uuid4()),
        type="user.message",
        at="2026-11-27T10:00:00.000Z",
        project_id="p1",
        conversation_id="c1",
        correlation_id="corr-00000000000000000001",
        data={"content": text},
    )


@pytest.fixture
def journal(tmp_path: Path) -> Iterator[Journal]:
    j = Journal.open(str(tmp_path), "sqlite")
    yield j
    j.close()


def _compare(journal: Journal, fresh: list[Any], live: Any) -> list[dict[str, Any]]:
    def ask(call: Call[Any], deadline: float) -> Any:
        return live(call.args.key)

    return _compare_live(
        journal,
        ask,
        project_id="p1",
        conversation_id="c1",
        fresh=fresh,
        deadline=time.monotonic() + 60,
    )


def test_a_live_state_ahead_of_what_was_read_settles_with_the_events_read_again(
    journal: Journal,
) -> None:
    journal.append([_message("first")])
    read = journal.read_conversation("p1", "c1")
    journal.append([_message("second")])  # a turn commits after the read
    everything = journal.read_conversation("p1", "c1")
    assert _compare(journal, read, lambda key: get_projection(everything, "c1", key)) == []


def test_a_difference_that_persists_is_a_mismatch(journal: Journal) -> None:
    journal.append([_message("first")])
    read = journal.read_conversation("p1", "c1")
    differ = _compare(journal, read, lambda key: {"not": "the replay"})
    assert [(d["kind"], d["projection"]) for d in differ] == [
        ("projection", "pending_tool_calls"),
        ("projection", "llm_context"),
        ("projection", "diagnostics"),
    ]


def _started(window_chars: int) -> NewEvent:
    return NewEvent(
        event_id=str(uuid.uuid4()),
        type="project.started",
        at="2026-11-27T10:00:00.000Z",
        project_id="p1",
        conversation_id=None,
        correlation_id="corr-00000000000000000002",
        data={"root": "/srv/p1", "options": {"context_window_chars": window_chars}},
    )


def test_a_project_started_again_during_the_verify_is_read_again_with_its_options(
    journal: Journal,
) -> None:
    journal.append([_started(0)])
    for n in range(6):
        journal.append([_message(f"message {n} " + "x" * 400)])
    own = [e for e in journal.read_project("p1") if e.conversation_id is None]
    read = [*own, *journal.read_conversation("p1", "c1")]
    journal.append([_started(600)])  # the project started again, with a smaller window
    now = [
        *[e for e in journal.read_project("p1") if e.conversation_id is None],
        *journal.read_conversation("p1", "c1"),
    ]
    assert get_projection(now, "c1", "llm_context") != get_projection(read, "c1", "llm_context")
    assert _compare(journal, read, lambda key: get_projection(now, "c1", key)) == []
