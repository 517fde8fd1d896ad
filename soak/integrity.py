"""Integrity checks over a journal read back as event dicts, and the acks a client got.

Plain functions, so tests feed them journals damaged on purpose:

- :func:`find_lost`: an ack whose ``event_id`` is not in the journal (or sits at another
  ``seq``) was lost;
- :func:`find_duplicates`: an ``event_id`` or ``seq`` seen twice, or two inbound
  ``user.message`` events with one correlation id (the harness never reuses one);
- :func:`find_unterminated`: a ``tool.requested`` without exactly one terminal event, or a
  terminal event without its request;
- :func:`find_unfinished_turns`: a ``user.message`` whose turn never ended (no
  ``llm.completed``, ``llm.failed`` or ``budget.exceeded`` of its correlation; the harness
  waits for every turn, so a missing end is a lost event, even at the end of a chain);
- :func:`find_chain_breaks`: the per-project SHA-256 chain (``events.chain``);
- :func:`check_integrity`: all of them, plus what ``verify`` reported per project (its
  anchor problems, i.e. broken seals, count as a broken chain).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import msgspec

from events.catalog import TERMINAL_TOOL_TYPES
from events.chain import verify_chain
from events.envelope import Envelope
from soak.report import Integrity

__all__ = [
    "MAX_PROBLEMS",
    "check_integrity",
    "find_chain_breaks",
    "find_duplicates",
    "find_lost",
    "find_unfinished_turns",
    "find_unterminated",
]

TURN_END_TYPES = frozenset({"llm.completed", "llm.failed", "budget.exceeded"})
"""Events that end a turn."""

MAX_PROBLEMS = 20
"""Problems listed in a report (the counters are always complete)."""


def find_lost(events: Iterable[Mapping[str, Any]], acks: Iterable[Mapping[str, Any]]) -> list[str]:
    """Acks whose event is not in the journal, or is there at another ``seq``."""
    seq_of: dict[str, Any] = {}
    for event in events:
        seq_of.setdefault(str(event.get("event_id")), event.get("seq"))
    problems = []
    for ack in acks:
        event_id = str(ack.get("event_id"))
        if event_id not in seq_of:
            problems.append(f"lost: acknowledged event {event_id} (seq {ack.get('seq')}) missing")
        elif ack.get("seq") is not None and seq_of[event_id] != ack.get("seq"):
            problems.append(
                f"lost: acknowledged event {event_id} was acked at seq {ack.get('seq')} "
                f"but is at seq {seq_of[event_id]}"
            )
    return problems


def find_duplicates(events: Sequence[Mapping[str, Any]]) -> list[str]:
    """Event ids or seqs seen twice, and inbound messages recorded twice."""
    problems = []
    for name, counts in (
        ("event_id", Counter(str(e.get("event_id")) for e in events)),
        ("seq", Counter(str(e.get("seq")) for e in events)),
    ):
        problems += [
            f"duplicated: {name} {k} appears {n} times" for k, n in counts.items() if n > 1
        ]
    inbound = Counter(
        (e.get("project_id"), e.get("conversation_id"), e.get("correlation_id"))
        for e in events
        if e.get("type") == "user.message"
    )
    problems += [
        f"duplicated: user.message of correlation {k[2]} in {k[0]}/{k[1]} appears {n} times"
        for k, n in inbound.items()
        if n > 1
    ]
    return problems


def find_unterminated(events: Iterable[Mapping[str, Any]]) -> list[str]:
    """Calls without exactly one terminal event, and terminal events of unknown calls."""
    requested: dict[tuple[Any, str], int] = {}
    terminals: Counter[tuple[Any, str]] = Counter()
    for event in events:
        data = event.get("data") or {}
        key = (event.get("project_id"), str(data.get("call_id")))
        if event.get("type") == "tool.requested":
            requested[key] = requested.get(key, 0) + 1
        elif event.get("type") in TERMINAL_TOOL_TYPES:
            terminals[key] += 1
    problems = []
    for key in sorted(requested, key=str):
        count = terminals.get(key, 0)
        if count != 1:
            problems.append(f"unterminated: call {key[1]} in {key[0]} has {count} terminal events")
    for key in sorted(set(terminals) - set(requested), key=str):
        problems.append(f"unterminated: terminal event for unknown call {key[1]} in {key[0]}")
    return problems


def find_unfinished_turns(events: Iterable[Mapping[str, Any]]) -> list[str]:
    """Inbound messages whose turn has no end event (same conversation and correlation)."""
    started: list[tuple[Any, Any, Any]] = []
    ended: set[tuple[Any, Any, Any]] = set()
    for event in events:
        key = (event.get("project_id"), event.get("conversation_id"), event.get("correlation_id"))
        if event.get("type") == "user.message":
            started.append(key)
        elif event.get("type") in TURN_END_TYPES:
            ended.add(key)
    return [
        f"unfinished: the turn of correlation {k[2]} in {k[0]}/{k[1]} never ended"
        for k in started
        if k not in ended
    ]


def find_chain_breaks(events: Iterable[Mapping[str, Any]]) -> list[str]:
    """Breaks of the per-project hash chains (events are sorted by ``seq`` first)."""
    envelopes = sorted(
        (msgspec.convert(dict(e), Envelope) for e in events), key=lambda e: (e.seq, e.event_id)
    )
    report = verify_chain(envelopes)
    return [f"hash chain: {b.project_id} breaks at seq {b.seq} ({b.reason})" for b in report.breaks]


def check_integrity(
    events: Sequence[Mapping[str, Any]],
    acks: Iterable[Mapping[str, Any]],
    verify_results: Mapping[str, Mapping[str, Any]] | None = None,
) -> Integrity:
    """Run every check; ``verify_results`` maps project ids to ``client.verify`` answers."""
    lost = find_lost(events, acks)
    duplicated = find_duplicates(events)
    unterminated = find_unterminated(events)
    unfinished = find_unfinished_turns(events)
    try:
        breaks = find_chain_breaks(events)
    except msgspec.ValidationError as e:
        breaks = [f"hash chain: an event does not have the envelope's shape ({e})"]
    replay: list[str] = []
    chain_ok = not breaks
    for project_id, result in sorted((verify_results or {}).items()):
        if not result.get("chain_ok", False):
            chain_ok = False
            breaks.append(f"hash chain: verify({project_id}) reports a broken chain")
        for problem in result.get("anchor_problems") or []:
            chain_ok = False
            breaks.append(
                f"anchor: verify({project_id}) reports {msgspec.json.encode(problem).decode()}"
            )
        replay += [
            f"replay mismatch: {project_id}: {msgspec.json.encode(m).decode()}"
            for m in result.get("mismatches", [])
            if m.get("kind") != "hash_chain"
        ]
        if (
            not result.get("ok", False)
            and not result.get("mismatches")
            and not result.get("anchor_problems")
            and result.get("chain_ok")
        ):
            replay.append(f"replay mismatch: verify({project_id}) is not ok")
    problems = lost + duplicated + unterminated + unfinished + breaks + replay
    return Integrity(
        checked_events=len(events),
        lost=len(lost),
        duplicated=len(duplicated),
        unterminated_calls=len(unterminated),
        unfinished_turns=len(unfinished),
        replay_mismatch=len(replay),
        hash_chain_ok=chain_ok,
        problems=problems[:MAX_PROBLEMS],
    )
