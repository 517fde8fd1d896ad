"""A conversation's folded state as bytes: the snapshot its rehydration starts from.

A conversation that comes back (after passivation, a crash, a daemon restart) used to fold
its whole history. With a snapshot it restores the state :class:`runtime.agent.state.
LoopState` had folded up to ``seq`` S, then folds only the events after S; the state is the
same as a full fold's (``tests/runtime/agent/test_snapshot.py`` compares them, mid-turn
states included). The journal's single writer stores snapshots beside the events
(:mod:`runtime.journal.snapshots`) and checks each one before handing it out; this module is
the :class:`~runtime.journal.snapshots.SnapshotCodec` it does that with (:data:`CODEC`).

What a snapshot holds: the status fold (:class:`events.conversation_fold.ConversationFold`),
the model's context window (:class:`events.projections.LlmContextFold`: the messages it
keeps, not the whole history, so a snapshot does not grow with it), the turn in progress,
the tokens used and the recent turns' records. Not the bookkeeping of a live actor (calls asked
about or dispatched, drafts, cancelled running calls): a rehydrated conversation starts
without them, with or without a snapshot. Sets are written sorted (the closed calls in the
order they closed, which says which one goes first), so the same state always gives the
same bytes, and ``roost verify`` compares a stored snapshot with one rebuilt by
replay byte for byte.

A snapshot is a cache: :func:`restore` refuses one of another format (``SNAPSHOT_FORMAT``,
raised with every change of what is stored), of another conversation, folded with another
``orchestration`` or another ``context_window_chars`` than the conversation now runs with,
or that does not decode; the caller then folds the whole history.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, Final

import msgspec

from events.conversation_fold import ConversationFold, PendingCall
from events.envelope import Envelope
from events.projections import LlmContextFold
from runtime.agent.state import LoopState, TurnRecord, TurnState

__all__ = ["CODEC", "SNAPSHOT_FORMAT", "SnapshotRejected", "encode_snapshot", "restore"]

SNAPSHOT_FORMAT: Final = 2
"""The layout of a snapshot; one written by code with another is not restored.

2: the model's context is its window (positions, cuts, the budget), not the whole history.
"""


class SnapshotRejected(Exception):
    """A snapshot that cannot be restored; ``reason`` is a stable code."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        """``snapshot_format``, ``snapshot_decode_error``, ``snapshot_conversation`` or
        ``snapshot_orchestration``."""


class _FoldState(msgspec.Struct, kw_only=True):
    """A :class:`ConversationFold`."""

    orchestration: bool
    cancelled: bool
    stopped: bool
    open_turns: list[Envelope]
    calls: list[PendingCall]
    closed: list[str]
    event_count: int
    last_event_type: str | None
    last_seq: int


class _ContextState(msgspec.Struct, kw_only=True):
    """An :class:`LlmContextFold`; an open round, a call, a cut are message positions."""

    window_chars: int
    start: int
    messages: list[dict[str, Any]]
    cuts: list[int]
    open_rounds: dict[str, int]
    model_calls: dict[str, int]
    answered: list[str]
    last_seq: int


class _Snapshot(msgspec.Struct, kw_only=True):
    """What :func:`encode_snapshot` writes."""

    format: int
    conversation_id: str
    last_seq: int
    fold: _FoldState
    context: _ContextState
    turn: TurnState | None
    tokens_used: int
    turns: list[TurnRecord]


class _Format(msgspec.Struct):
    """The format field alone, read before the rest."""

    format: int = 0


_ENCODER = msgspec.msgpack.Encoder()
_DECODER = msgspec.msgpack.Decoder(_Snapshot)
_FORMAT = msgspec.msgpack.Decoder(_Format)


def encode_snapshot(state: LoopState) -> bytes:
    """The snapshot of ``state`` as it stands (every event up to ``state.last_seq``)."""
    fold, context = state.fold, state._context
    window = context.window
    snapshot = _Snapshot(
        format=SNAPSHOT_FORMAT,
        conversation_id=state.conversation_id,
        last_seq=state.last_seq,
        fold=_FoldState(
            orchestration=fold.orchestration,
            cancelled=fold.cancelled,
            stopped=fold.stopped,
            open_turns=list(fold.open_turns.values()),
            calls=list(fold.calls.values()),
            closed=list(fold._closed),
            event_count=fold.event_count,
            last_event_type=fold.last_event_type,
            last_seq=fold.last_seq,
        ),
        context=_ContextState(
            window_chars=window.budget,
            start=window.start,
            messages=window.messages,
            cuts=window.cuts,
            open_rounds=context._round_at,
            model_calls=dict(sorted(context._model_calls.items())),
            answered=sorted(context._answered),
            last_seq=context.last_seq,
        ),
        turn=state.turn,
        tokens_used=state.tokens_used,
        turns=list(state.turns.values()),
    )
    return _ENCODER.encode(snapshot)


def _outside(kept: Any) -> bool:
    """Whether an open round of the kept context lies outside its messages."""
    return any(not 0 <= i - kept.start < len(kept.messages) for i in kept.open_rounds.values())


_FitRule = tuple[Callable[[Any, LoopState], bool], str, Callable[[Any, LoopState], str]]

_FIT_RULES: tuple[_FitRule, ...] = (
    (
        lambda snap, state: snap.conversation_id != state.conversation_id,
        "snapshot_conversation",
        lambda snap, state: (
            f"the snapshot is of conversation {snap.conversation_id}, not {state.conversation_id}"
        ),
    ),
    (
        lambda snap, state: snap.fold.orchestration != state.settings.orchestration,
        "snapshot_orchestration",
        lambda snap, state: (
            "the snapshot was folded with orchestration "
            f"{snap.fold.orchestration}; the conversation runs with "
            f"{state.settings.orchestration}"
        ),
    ),
    (
        lambda snap, state: _outside(snap.context),
        "snapshot_decode_error",
        lambda snap, state: "the snapshot has an open round outside its messages",
    ),
    (
        lambda snap, state: snap.context.window_chars != state.settings.context_window_chars,
        "snapshot_window",
        lambda snap, state: (
            "the snapshot was folded with context_window_chars "
            f"{snap.context.window_chars}; the conversation runs with "
            f"{state.settings.context_window_chars}"
        ),
    ),
)
"""Whether a decoded snapshot fits the conversation: ``(broken, code, message)``, in order."""


def _check(body: bytes, state: LoopState, decoder: msgspec.msgpack.Decoder[Any]) -> Any:
    """``body`` decoded with ``decoder`` once its format, conversation and orchestration fit."""
    try:
        found = _FORMAT.decode(body).format
    except (msgspec.DecodeError, msgspec.ValidationError) as e:
        raise SnapshotRejected("snapshot_decode_error", f"the snapshot does not decode: {e}") from e
    if found != SNAPSHOT_FORMAT:
        raise SnapshotRejected(
            "snapshot_format",
            f"the snapshot has format {found}; this code reads format {SNAPSHOT_FORMAT}",
        )
    try:
        snapshot = decoder.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError) as e:
        raise SnapshotRejected("snapshot_decode_error", f"the snapshot does not decode: {e}") from e
    for broken, code, message in _FIT_RULES:
        if broken(snapshot, state):
            raise SnapshotRejected(code, message(snapshot, state))
    return snapshot


def _decode(body: bytes, state: LoopState) -> _Snapshot:
    snapshot: _Snapshot = _check(body, state, _DECODER)
    return snapshot


def restore(state: LoopState, body: bytes) -> None:
    """Put a fresh ``state`` where the snapshot ``body`` says; raise :class:`SnapshotRejected`.

    ``state`` must not have folded anything yet; the events after the snapshot's
    ``last_seq`` are then folded with :meth:`LoopState.load`.
    """
    snapshot = _decode(body, state)
    saved = snapshot.fold
    fold = ConversationFold(orchestration=saved.orchestration)
    fold.cancelled, fold.stopped = saved.cancelled, saved.stopped
    fold.open_turns = {e.correlation_id: e for e in saved.open_turns}
    fold.calls = {c.call_id: c for c in saved.calls}
    fold._closed = dict.fromkeys(saved.closed)
    fold.event_count, fold.last_event_type = saved.event_count, saved.last_event_type
    fold.last_seq = saved.last_seq
    kept = snapshot.context
    context = LlmContextFold(kept.window_chars)
    context.window.restore(kept.start, kept.messages, kept.cuts)
    context._open_rounds = {c: kept.messages[i - kept.start] for c, i in kept.open_rounds.items()}
    context._round_at = dict(kept.open_rounds)
    context._model_calls = dict(kept.model_calls)
    context._answered = set(kept.answered)
    context.last_seq = kept.last_seq
    state.fold, state._context = fold, context
    state.turn = snapshot.turn
    state.tokens_used = snapshot.tokens_used
    state.turns = {r.correlation_id: r for r in snapshot.turns}
    state.last_seq = snapshot.last_seq


def _state(project_id: str, conversation_id: str, options: Mapping[str, Any]) -> LoopState:
    return LoopState(
        project_id=project_id,
        conversation_id=conversation_id,
        options=options,
        clock=lambda: datetime.now(UTC),
    )


class _Codec:
    """The :class:`runtime.journal.snapshots.SnapshotCodec` of a conversation's loop state."""

    format = SNAPSHOT_FORMAT

    def fold(
        self,
        prior: bytes | None,
        events: list[Envelope],
        *,
        project_id: str,
        conversation_id: str,
        options: Mapping[str, Any],
    ) -> bytes | None:
        """The snapshot after ``events`` folded on ``prior``; None when ``prior`` is refused."""
        state = _state(project_id, conversation_id, options)
        if prior is not None:
            try:
                restore(state, prior)
            except SnapshotRejected:
                return None
        state.load(events)
        return encode_snapshot(state)

    def check(
        self, body: bytes, *, project_id: str, conversation_id: str, options: Mapping[str, Any]
    ) -> str | None:
        """Why ``body`` cannot be restored (a reason code), or None when it can.

        It is decoded whole, as the conversation will (a body that decodes but holds a
        forged state is what ``roost verify`` finds).
        """
        try:
            _check(body, _state(project_id, conversation_id, options), _DECODER)
        except SnapshotRejected as e:
            return e.reason
        return None


CODEC: Final = _Codec()
"""The codec the Journal builds, checks and verifies snapshots with."""
