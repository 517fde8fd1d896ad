"""``baseline``: Roost's message and append pattern on bare Thespian and bare eventsourcing.

After the Roost run, the harness knows how many turns it made, how many journal batches
those turns committed and their sizes. The baseline replays the same pattern with none of
Roost's work (no gateway, no policy, no tools, no redaction, no hash chain, no codecs):

- **bare Thespian**: a ``multiprocQueueBase`` actor system (Thespian's own queues and
  routing, made unbounded as Roost's are) with one echo actor per conversation; a turn makes
  :func:`asks_per_turn` ``ask`` round trips to its conversation's actor (each round trip
  is two messages, as each hop of Roost's turn is a send and an answer);
- **bare eventsourcing**: the turn's batches (the measured sizes, dealt to turns
  round-robin) are appended with eventsourcing's own ``SQLiteApplicationRecorder`` to a
  SQLite file, one ``insert_events`` (one transaction) per batch, by one writer at a time
  (Roost's journal is a single writer too). Payloads are pre-encoded bytes.

Turns run on ``concurrency`` worker threads, one turn in flight per conversation, exactly
like the ``steady`` workload. ``turns_per_s`` of Roost over that of this run is the
runtime's overhead as a ratio measured on one machine in one run.
"""

from __future__ import annotations

import contextlib
import math
import os
import threading
import time
import uuid
from collections import deque
from typing import Any

import msgspec
import psutil
from thespian.actors import Actor

from soak.figures import latency_stats
from soak.report import BaselineSummary

__all__ = ["BaselineShape", "EchoActor", "asks_per_turn", "run_baseline"]

_ROUTING_MESSAGES = 3  # backend -> Supervisor -> Project -> Conversation
_CALL_MESSAGES = 4  # Policy ask and answer, ToolRunner run and answer
_REPLY_MESSAGES = 1  # Conversation -> the waiting client
_ASK_TIMEOUT_S = 30.0


def asks_per_turn() -> int:
    """Round trips that carry as many actor messages as one Roost turn.

    A turn of Roost sends ``3`` routing messages, ``4`` for the policy decision and the
    tool run, and ``1`` reply: 4 round trips. Its appends go over the journal link
    (``runtime.journal.link``), not as actor messages (until the link, a request and an
    answer per append made it 8).
    """
    return math.ceil((_ROUTING_MESSAGES + _CALL_MESSAGES + _REPLY_MESSAGES) / 2)


class BaselineShape(msgspec.Struct, frozen=True, kw_only=True):
    """What to replay."""

    conversations: int
    """Echo actors (one per Roost conversation)."""
    turns: int
    """Turns in total."""
    concurrency: int
    """Worker threads."""
    batch_sizes: list[int]
    """Every journal batch of the Roost run, by size (dealt to turns round-robin)."""


class EchoActor(Actor):  # type: ignore[misc]
    """A conversation with none of Roost's work: answers every message with itself."""

    def receiveMessage(self, message: Any, sender: Any) -> None:
        """Echo."""
        if isinstance(message, dict):
            self.send(sender, message)


def _payload() -> bytes:
    """One stored event's state: a msgpack envelope of a typical ``tool.completed``."""
    return msgspec.msgpack.encode(
        {
            "event_id": str(uuid.uuid4()),
            "type": "tool.completed",
            "at": "2026-01-01T00:00:00.000Z",
            "project_id": "soak-baseline",
            "conversation_id": "c0",
            "correlation_id": "corr-0123456789abcdef0123",
            "causation_id": str(uuid.uuid4()),
            "data": {
                "call_id": "call-0123456789abcdef",
                "name": "fs.read",
                "duration_ms": 1,
                "result": {"path": "README.md", "content": "seed file of the soak run\n" * 4},
                "risk_flags": [],
            },
            "hash": "0" * 64,
            "prev_hash": "0" * 64,
        }
    )


def _thespian_logging() -> dict[str, object]:
    """A ``logging.config.dictConfig`` that drops the actor system's records."""
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "handlers": {"null": {"class": "logging.NullHandler"}},
        "root": {"handlers": ["null"], "level": "WARNING"},
    }


class _BaselineStore:
    """eventsourcing's SQLite application recorder, one writer at a time."""

    def __init__(self, path: str) -> None:
        from eventsourcing.sqlite import SQLiteApplicationRecorder, SQLiteDatastore

        self.datastore = SQLiteDatastore(db_name=path)
        self.recorder = SQLiteApplicationRecorder(self.datastore)
        self.recorder.create_table()
        self.lock = threading.Lock()
        self.versions: dict[uuid.UUID, int] = {}
        self.state = _payload()

    def append(self, stream: uuid.UUID, size: int) -> None:
        from eventsourcing.persistence import StoredEvent

        with self.lock:
            first = self.versions.get(stream, 0) + 1
            self.versions[stream] = first + size - 1
            self.recorder.insert_events(
                [
                    StoredEvent(
                        originator_id=stream,
                        originator_version=first + i,
                        topic="tool.completed",
                        state=self.state,
                    )
                    for i in range(size)
                ]
            )

    def close(self) -> None:
        self.datastore.close()


def _no_process_left(me: psutil.Process, before: set[int]) -> None:
    """Wait for the baseline's actor processes to exit; kill and complain about stragglers."""
    started = [p for p in me.children(recursive=True) if p.pid not in before]
    _, alive = psutil.wait_procs(started, timeout=10)
    alive = [p for p in alive if _running(p)]
    for proc in alive:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    if alive:
        raise RuntimeError(f"the bare actor system left processes {[p.pid for p in alive]}")


def _running(proc: psutil.Process) -> bool:
    try:
        return bool(proc.status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False


def _deal(batch_sizes: list[int], turns: int) -> list[list[int]]:
    """Deal the measured batches to turns round-robin."""
    per_turn: list[list[int]] = [[] for _ in range(max(turns, 1))]
    for index, size in enumerate(batch_sizes):
        per_turn[index % len(per_turn)].append(size)
    return per_turn


def run_baseline(shape: BaselineShape, workdir: str) -> BaselineSummary:
    """Replay ``shape`` on bare Thespian and eventsourcing; the store goes in ``workdir``."""
    from thespian.actors import ActorSystem
    from thespian.system.transport import MultiprocessQueueTransport as transport

    transport.MAX_ACTOR_QUEUESIZE = 0  # as Roost's backend does (relays must not deadlock)
    transport.MAX_ADMIN_QUEUESIZE = 0
    turns = max(shape.turns, 1)
    batches = _deal(shape.batch_sizes, turns)
    asks = asks_per_turn()
    store = _BaselineStore(os.path.join(workdir, "baseline.sqlite"))
    me = psutil.Process()
    before = {p.pid for p in me.children(recursive=True)}
    system = ActorSystem("multiprocQueueBase", logDefs=_thespian_logging(), transientUnique=True)
    try:
        actors = [system.createActor(EchoActor) for _ in range(max(shape.conversations, 1))]
        streams = [uuid.uuid4() for _ in actors]
        chains: deque[deque[int]] = deque(deque() for _ in actors)
        for turn in range(turns):
            chains[turn % len(actors)].append(turn)
        lock = threading.Lock()
        latencies: list[float] = []
        busy = {"ask": 0.0, "append": 0.0}
        queue: deque[tuple[int, deque[int]]] = deque(enumerate(chains))
        errors: list[str] = []

        def worker() -> None:
            with system.private() as endpoint:
                while True:
                    with lock:
                        if not queue or errors:
                            return
                        index, chain = queue.popleft()
                    if not chain:
                        continue
                    turn = chain.popleft()
                    started = time.perf_counter()
                    for hop in range(asks):
                        answer = endpoint.ask(
                            actors[index], {"turn": turn, "hop": hop}, _ASK_TIMEOUT_S
                        )
                        if answer is None:
                            with lock:
                                errors.append(f"ask to echo actor {index} timed out")
                            return
                    asked = time.perf_counter()
                    for size in batches[turn]:
                        store.append(streams[index], size)
                    done = time.perf_counter()
                    with lock:
                        latencies.append((done - started) * 1000)
                        busy["ask"] += asked - started
                        busy["append"] += done - asked
                        if chain:
                            queue.append((index, chain))

        workers = [
            threading.Thread(target=worker, name=f"soak-baseline-{i}", daemon=True)
            for i in range(max(1, min(shape.concurrency, len(actors))))
        ]
        started = time.perf_counter()
        for thread in workers:
            thread.start()
        for thread in workers:
            thread.join()
        elapsed = time.perf_counter() - started
    finally:
        system.shutdown()
        store.close()
        _no_process_left(me, before)
    if errors:
        raise RuntimeError(f"the baseline run failed: {errors[0]}")
    total_busy = busy["ask"] + busy["append"]
    events = sum(shape.batch_sizes)
    return BaselineSummary(
        turns=len(latencies),
        turns_per_s=round(len(latencies) / elapsed, 2) if elapsed else 0.0,
        events_per_s=round(events / elapsed, 2) if elapsed else 0.0,
        actor_messages=2 * asks * len(latencies),
        events=events,
        batches=len(shape.batch_sizes),
        elapsed_ms=round(elapsed * 1000, 3),
        latency_ms=latency_stats(latencies),
        ask_share=round(busy["ask"] / total_busy, 3) if total_busy else 0.0,
    )
