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
  anchor problems, i.e. broken seals, count as a broken chain);
- :class:`StreamCheck`: all of them, fed one event at a time (what they all run on), so a
  read-back of millions of events keeps ids and keys, not events.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

import msgspec

from events.catalog import TERMINAL_TOOL_TYPES
from events.chain import ChainBreak, chain_hash
from events.envelope import GENESIS_HASH, Envelope
from soak.report import Integrity

__all__ = [
    "MAX_PROBLEMS",
    "StreamCheck",
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


def _compact(value: str) -> object:
    """``value`` as the sets of ids and seqs keep it: a number when it is one (a seq, a UUID).

    The read-back of an hour's soak feeds millions of events, and every id and seq is kept
    to find the ones seen twice: as ints they take about half the memory of their text.
    """
    if value.isdecimal() and str(int(value)) == value:
        return int(value)
    if len(value) == 36:
        try:
            found = uuid.UUID(value)
        except ValueError:
            return value
        if str(found) == value:  # the one text of that number: no other maps to it
            return found.int
    return value


class StreamCheck:
    """Every check at once, fed one event at a time: the read-back of a long run.

    A ten-minute soak leaves millions of events; the harness reads them back through
    ``subscribe`` and feeds each here rather than keeping them, so what it holds is the
    ids and keys the checks need, not the events. Events of a project must come in ``seq``
    order (as ``subscribe`` gives them); projects may follow each other.
    """

    def __init__(self, acks: Iterable[Mapping[str, Any]] = ()) -> None:
        self.checked = 0
        """Events fed."""
        self.types: Counter[str] = Counter()
        """Events fed, by type."""
        self._acks = list(acks)
        self._wanted = {str(a.get("event_id")) for a in self._acks}
        self._seq_of: dict[str, object] = {}
        self._ids: set[object] = set()
        self._seqs: set[object] = set()
        self._again: dict[tuple[str, str], int] = {}
        self._inbound: Counter[tuple[Any, Any, Any]] = Counter()
        self._requested: dict[tuple[Any, str], int] = {}
        self._terminals: Counter[tuple[Any, str]] = Counter()
        self._started: list[tuple[Any, Any, Any]] = []
        self._ended: set[tuple[Any, Any, Any]] = set()
        self._heads: dict[str, str] = {}
        self._breaks: dict[str, ChainBreak] = {}
        self._shape_error: str | None = None

    def add(self, event: Mapping[str, Any]) -> None:
        """Feed one event (a dict, as ``subscribe`` gives it)."""
        self.checked += 1
        kind = event.get("type")
        self.types[str(kind)] += 1
        event_id, seq = str(event.get("event_id")), str(event.get("seq"))
        if event_id in self._wanted:
            self._seq_of.setdefault(event_id, event.get("seq"))
        for name, value, seen in (("event_id", event_id, self._ids), ("seq", seq, self._seqs)):
            compact = _compact(value)
            if compact in seen:
                self._again[(name, value)] = self._again.get((name, value), 1) + 1
            seen.add(compact)
        key = (event.get("project_id"), event.get("conversation_id"), event.get("correlation_id"))
        if kind == "user.message":
            self._inbound[key] += 1
            self._started.append(key)
        elif kind in TURN_END_TYPES:
            self._ended.add(key)
        data = event.get("data") or {}
        call = (event.get("project_id"), str(data.get("call_id")))
        if kind == "tool.requested":
            self._requested[call] = self._requested.get(call, 0) + 1
        elif kind in TERMINAL_TOOL_TYPES:
            self._terminals[call] += 1
        self._chain(event)

    def _chain(self, event: Mapping[str, Any]) -> None:
        if self._shape_error is not None:
            return
        try:
            envelope = msgspec.convert(dict(event), Envelope)
        except msgspec.ValidationError as e:
            self._shape_error = f"hash chain: an event does not have the envelope's shape ({e})"
            return
        project = envelope.project_id
        if project in self._breaks:
            return
        if envelope.prev_hash != self._heads.get(project, GENESIS_HASH):
            reason = "prev_hash_mismatch"
        elif chain_hash(envelope.prev_hash, envelope, envelope.stream_version) != envelope.hash:
            reason = "hash_mismatch"
        else:
            self._heads[project] = envelope.hash
            return
        self._breaks[project] = ChainBreak(project_id=project, seq=envelope.seq, reason=reason)

    def lost(self, projects: Collection[str] | None = None) -> list[str]:
        """Acks (of ``projects``, when given) whose event is missing or at another ``seq``."""
        problems = []
        for ack in self._acks:
            if projects is not None and ack.get("project_id") not in projects:
                continue
            event_id = str(ack.get("event_id"))
            if event_id not in self._seq_of:
                problems.append(
                    f"lost: acknowledged event {event_id} (seq {ack.get('seq')}) missing"
                )
            elif ack.get("seq") is not None and self._seq_of[event_id] != ack.get("seq"):
                problems.append(
                    f"lost: acknowledged event {event_id} was acked at seq {ack.get('seq')} "
                    f"but is at seq {self._seq_of[event_id]}"
                )
        return problems

    def duplicates(self) -> list[str]:
        """Event ids or seqs seen twice, and inbound messages recorded twice."""
        problems = [
            f"duplicated: {name} {value} appears {n} times"
            for name in ("event_id", "seq")
            for (kind, value), n in self._again.items()
            if kind == name
        ]
        problems += [
            f"duplicated: user.message of correlation {k[2]} in {k[0]}/{k[1]} appears {n} times"
            for k, n in self._inbound.items()
            if n > 1
        ]
        return problems

    def unterminated(self) -> list[str]:
        """Calls without exactly one terminal event, and terminal events of unknown calls."""
        problems = []
        for key in sorted(self._requested, key=str):
            count = self._terminals.get(key, 0)
            if count != 1:
                problems.append(
                    f"unterminated: call {key[1]} in {key[0]} has {count} terminal events"
                )
        for key in sorted(set(self._terminals) - set(self._requested), key=str):
            problems.append(f"unterminated: terminal event for unknown call {key[1]} in {key[0]}")
        return problems

    def unfinished(self) -> list[str]:
        """Inbound messages whose turn has no end event (same conversation and correlation)."""
        return [
            f"unfinished: the turn of correlation {k[2]} in {k[0]}/{k[1]} never ended"
            for k in self._started
            if k not in self._ended
        ]

    def chain_breaks(self) -> list[str]:
        """Breaks of the per-project hash chains."""
        if self._shape_error is not None:
            return [self._shape_error]
        breaks = sorted(self._breaks.values(), key=lambda b: (b.seq, b.project_id))
        return [f"hash chain: {b.project_id} breaks at seq {b.seq} ({b.reason})" for b in breaks]

    def result(
        self,
        verify_results: Mapping[str, Mapping[str, Any]] | None = None,
        *,
        read: Collection[str] | None = None,
    ) -> Integrity:
        """The :class:`Integrity` of what was fed; ``verify_results`` as in ``check_integrity``.

        ``read``: the projects read back; only their acks (by the ack's ``project_id``)
        are looked for. None: every ack.
        """
        lost = self.lost(read)
        duplicated = self.duplicates()
        unterminated = self.unterminated()
        unfinished = self.unfinished()
        breaks = self.chain_breaks()
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
            checked_events=self.checked,
            lost=len(lost),
            duplicated=len(duplicated),
            unterminated_calls=len(unterminated),
            unfinished_turns=len(unfinished),
            replay_mismatch=len(replay),
            hash_chain_ok=chain_ok,
            problems=problems[:MAX_PROBLEMS],
        )


def _fed(
    events: Iterable[Mapping[str, Any]], acks: Iterable[Mapping[str, Any]] = ()
) -> StreamCheck:
    check = StreamCheck(acks)
    for event in sorted(events, key=lambda e: (int(e.get("seq") or 0), str(e.get("event_id")))):
        check.add(event)
    return check


def find_lost(events: Iterable[Mapping[str, Any]], acks: Iterable[Mapping[str, Any]]) -> list[str]:
    """Acks whose event is not in the journal, or is there at another ``seq``."""
    return _fed(events, acks).lost()


def find_duplicates(events: Sequence[Mapping[str, Any]]) -> list[str]:
    """Event ids or seqs seen twice, and inbound messages recorded twice."""
    return _fed(events).duplicates()


def find_unterminated(events: Iterable[Mapping[str, Any]]) -> list[str]:
    """Calls without exactly one terminal event, and terminal events of unknown calls."""
    return _fed(events).unterminated()


def find_unfinished_turns(events: Iterable[Mapping[str, Any]]) -> list[str]:
    """Inbound messages whose turn has no end event (same conversation and correlation)."""
    return _fed(events).unfinished()


def find_chain_breaks(events: Iterable[Mapping[str, Any]]) -> list[str]:
    """Breaks of the per-project hash chains (events are sorted by ``seq`` first)."""
    return _fed(events).chain_breaks()


def check_integrity(
    events: Sequence[Mapping[str, Any]],
    acks: Iterable[Mapping[str, Any]],
    verify_results: Mapping[str, Mapping[str, Any]] | None = None,
) -> Integrity:
    """Run every check; ``verify_results`` maps project ids to ``client.verify`` answers."""
    return _fed(events, acks).result(verify_results)
