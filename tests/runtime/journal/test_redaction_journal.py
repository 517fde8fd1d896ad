"""Property: a generated secret, split anywhere and put in any field, never reaches the journal.

Each example takes a secret of one known shape, puts it in a text, and commits that text
through the real path into a real SQLite journal:

- two model turns driven through :class:`runtime.agent.ConversationCore` (the producer of
  ``assistant.delta``): the user's message holds the text (and the deterministic model's
  ``delta_chunks`` directive splits it), the model streams it back in random chunks and
  then one character per chunk, and the first turn's correlation id holds the secret;
- one model round per split offset (the text cut in two at every position), plus a tool
  call whose arguments and result hold the text and whose correlation and causation ids
  are the text itself.

Then neither the journal's file bytes nor any event read back holds the secret, and each
round's deltas join to its (redacted) message. Each example runs twice: the journal
redacting every batch, and a hosted conversation's way, where the host redacts its own
batches as it stages them (``actors.agent_shell``) and the journal only hashes them.
"""

from __future__ import annotations

import itertools
import tempfile
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actors.agent_shell import _redacted
from events import catalog as ev
from events.envelope import Envelope, NewEvent, new_correlation_id, new_event
from runtime.agent.core import ConversationCore
from runtime.agent.effects import AppendBatch, CallModel, Effect
from runtime.guard.secrets.redaction import redact_text
from runtime.journal.store import Batch, Journal
from runtime.llm.base import ModelReply
from tests.runtime.secret_shapes import SEPARATORS, SHAPES, SURROUNDING

AT = "2026-11-22T10:00:00.000Z"


def _clock() -> Iterator[datetime]:
    now = datetime(2026, 11, 22, 10, 0, 0, tzinfo=UTC)
    while True:
        now += timedelta(milliseconds=1)
        yield now


def _split(text: str, cuts: list[int]) -> list[str]:
    edges = [0, *sorted(set(cuts)), len(text)]
    return [text[a:b] for a, b in itertools.pairwise(edges)]


def _turn(
    core: ConversationCore,
    journal: Journal,
    text: str,
    *,
    directive: list[str],
    stream: list[str],
    correlation: str | None,
    staged: bool = False,
) -> None:
    """One user message and the model's streamed answer, committed as the actor commits.

    ``staged``: the loop's own batches redacted first and marked so, as a host stages them.
    """
    inbound = {
        "type": "user.message",
        "data": {"content": text, "llm": {"delta_chunks": directive}},
        "correlation_id": correlation or new_correlation_id(),  # as the gateway mints one
    }
    queue: list[Effect] = core.inbound(inbound, reply_to=None)
    reply = ModelReply(text="".join(stream), deltas=stream)
    while queue:
        effect = queue.pop(0)
        if isinstance(effect, AppendBatch):
            if staged and effect.key is None:
                committed = _staged(journal, _redacted(effect.events))
            else:
                committed = journal.append(effect.events, key=effect.key)
            queue = core.committed(committed) + queue
        elif isinstance(effect, CallModel):
            queue = core.model_replied(effect.round, reply) + queue
    assert core.turn is None, "the turn did not end"


def _staged(journal: Journal, events: list[NewEvent]) -> list[Envelope]:
    """Commit ``events`` marked as their sender's redacted batch (a host's staged turn)."""
    return journal.append_batches([Batch(events=events, redacted=True)])[0]


def _every_offset(text: str) -> list[NewEvent]:
    """A model round per offset (the text in two deltas), then a tool call holding it."""
    events: list[NewEvent] = []

    def add(payload: ev.Event, correlation: str, cause: str | None) -> NewEvent:
        event = new_event(
            payload,
            project_id="p",
            conversation_id="c",
            at=AT,
            correlation_id=correlation,
            causation_id=cause,
        )
        events.append(event)
        return event

    for offset in range(1, len(text)):
        cause = str(uuid.uuid4())
        add(ev.AssistantDelta(content=text[:offset]), "corr-offsets", cause)
        add(ev.AssistantDelta(content=text[offset:]), "corr-offsets", cause)
        add(ev.AssistantMessage(content=text, round=1), "corr-offsets", cause)
    requested = add(
        ev.ToolRequested(call_id="call-1", name="command.run", args={"command": text}), text, text
    )
    add(
        ev.ToolCompleted(call_id="call-1", name="command.run", result={"stdout": text}),
        text,
        requested.event_id,
    )
    return events


def _rounds(envelopes: list[Envelope]) -> dict[str | None, tuple[list[str], list[str]]]:
    """Per model round (its cause): the deltas' contents and the messages' contents."""
    rounds: dict[str | None, tuple[list[str], list[str]]] = {}
    for e in envelopes:
        if e.type in ("assistant.delta", "assistant.message"):
            deltas, messages = rounds.setdefault(e.causation_id, ([], []))
            (deltas if e.type == "assistant.delta" else messages).append(e.data["content"])
    return rounds


@pytest.mark.parametrize("staged", [False, True], ids=["journal", "staged"])
@pytest.mark.parametrize("shape", sorted(SHAPES))
@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@pytest.mark.slow
@given(data=st.data())
def test_a_secret_split_anywhere_in_any_field_never_reaches_the_journal(
    shape: str, staged: bool, data: st.DataObject
) -> None:
    _, secret_text, secret = data.draw(SHAPES[shape])
    before, after = data.draw(SURROUNDING), data.draw(SURROUNDING)
    text = before + data.draw(SEPARATORS) + secret_text + data.draw(SEPARATORS) + after
    positions = st.lists(st.integers(0, len(text)), max_size=12)
    directive = _split(text, data.draw(positions))
    stream = _split(text, data.draw(positions))
    correlation = f"corr-{secret_text}" if len(secret_text) <= 120 else None

    with tempfile.TemporaryDirectory() as home:
        path = Path(home) / "journal.sqlite"
        journal = Journal("sqlite", sqlite_path=str(path))
        try:
            core = ConversationCore(
                project_id="p", conversation_id="c", options={}, clock=_clock().__next__
            )
            _turn(
                core,
                journal,
                text,
                directive=directive,
                stream=stream,
                correlation=correlation,
                staged=staged,
            )
            _turn(core, journal, text, directive=[text], stream=list(text), correlation=None)
            offsets = _every_offset(text)
            if staged:  # each round's deltas redacted as one text, as the journal does
                _staged(journal, _redacted(offsets))
            else:
                journal.append(offsets)
            envelopes = journal.read_project("p")
            assert journal.verify("p").ok
        finally:
            journal.close()
        stored = b"".join(p.read_bytes() for p in sorted(Path(home).glob("journal.sqlite*")))

    assert secret.encode() not in stored
    for envelope in envelopes:
        assert secret not in msgspec.json.encode(envelope).decode()
    rounds = _rounds(envelopes)
    assert len(rounds) == 2 + (len(text) - 1)
    for deltas, messages in rounds.values():
        assert messages == [redact_text(text)]
        assert "".join(deltas) == messages[0]
        assert secret not in "".join(deltas)
    users = [e.data for e in envelopes if e.type == "user.message"]
    for user in users:
        assert "".join(user["llm"]["delta_chunks"]) == user["content"] == redact_text(text)


def test_the_property_sees_a_secret_the_journal_does_not_redact() -> None:
    """The file grep can fail: an unredacted journal holds the raw text."""
    with tempfile.TemporaryDirectory() as home:
        path = Path(home) / "journal.sqlite"
        journal = Journal("sqlite", sqlite_path=str(path), redactor=lambda value: value)
        try:
            journal.append(_every_offset("key ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"))
        finally:
            journal.close()
        stored = b"".join(p.read_bytes() for p in sorted(Path(home).glob("journal.sqlite*")))
    assert b"ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8" in stored


def test_a_password_given_after_a_tab_never_reaches_the_journal() -> None:
    secret = "S3cretValue9"
    event = new_event(
        ev.ToolRequested(call_id="c1", name="command.run", args={"cmd": f"mysql\t-p{secret} a"}),
        project_id="p",
        conversation_id="c",
        correlation_id=new_correlation_id(),
        at=AT,
    )
    with tempfile.TemporaryDirectory() as home:
        path = Path(home) / "journal.sqlite"
        journal = Journal("sqlite", sqlite_path=str(path))
        try:
            [envelope] = journal.append([event])
            [read] = journal.read_project("p")
            assert journal.verify("p").ok
        finally:
            journal.close()
        stored = b"".join(p.read_bytes() for p in sorted(Path(home).glob("journal.sqlite*")))

    assert envelope.data["args"] == {"cmd": "mysql\t-p[REDACTED:command_credentials] a"}
    assert read.data == envelope.data
    assert secret.encode() not in stored


def _event(payload: ev.Event, correlation_id: str = "corr", **ids: str) -> NewEvent:
    return new_event(
        payload, project_id="p", conversation_id="c", at=AT, correlation_id=correlation_id, **ids
    )


def test_a_batch_its_sender_redacted_is_hashed_as_it_is_and_its_streams_still_joined() -> None:
    """The mark skips the per-event scan (the sender made it); a split secret is still found.

    The raw token in a marked batch stays (what the mark means: the host's stage already
    removed what the rules find, so the journal does not scan again); a round's deltas are
    still redacted as one text, since a round's deltas may reach the journal in two batches.
    """
    token = "ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    cause = str(uuid.uuid4())
    with tempfile.TemporaryDirectory() as home:
        journal = Journal("sqlite", sqlite_path=str(Path(home) / "journal.sqlite"))
        try:
            [kept] = _staged(journal, [_event(ev.UserMessage(content=token))])
            deltas = [
                _event(ev.AssistantDelta(content=part), correlation_id="k", causation_id=cause)
                for part in (token[:9], token[9:])
            ]
            joined = _staged(journal, deltas)
            [scanned] = journal.append([_event(ev.UserMessage(content=token))])
            assert journal.verify("p").ok
        finally:
            journal.close()
    assert kept.data["content"] == token
    assert token not in "".join(e.data["content"] for e in joined)
    assert token not in scanned.data["content"]


def test_a_journal_with_its_own_redactor_ignores_the_mark() -> None:
    """A test's redactor is one no sender ran: every batch goes through it."""
    with tempfile.TemporaryDirectory() as home:
        path = str(Path(home) / "journal.sqlite")
        journal = Journal("sqlite", sqlite_path=path, redactor=lambda data: {"content": "gone"})
        try:
            [envelope] = _staged(journal, [_event(ev.UserMessage(content="x"))])
        finally:
            journal.close()
    assert envelope.data == {"content": "gone"}
