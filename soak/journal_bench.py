"""Journal benchmark: Roost's journal against raw ``sqlite3`` on the same row shape.

Run ``python -m soak.journal_bench [--events N] [--json FILE]``. In one run it measures

- batched append through :class:`runtime.journal.Journal` (redaction, hash chain, msgspec
  mapper, eventsourcing recorder, batch key) in batches of 1, 10 and 100, against raw
  ``executemany`` of the same pre-encoded rows into an identical table, each on its own
  file with WAL and ``synchronous=FULL``;
- replay: reading and decoding a project's events into envelopes, against a raw
  ``SELECT`` of the same rows (no decoding);

and prints events/s and the ratios (Roost / raw). Ratios are what to compare across
machines: both sides share the disk and the noise.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
import tempfile
import time
import uuid
from typing import TypedDict

import msgspec

from events.envelope import NewEvent
from runtime.journal.store import Journal

__all__ = ["AppendRow", "JournalBenchReport", "Replay", "main", "run_bench"]


def _events(n: int, project: str) -> list[NewEvent]:
    return [
        NewEvent(
            event_id=str(uuid.uuid4()),
            type="tool.completed",
            at="2026-11-22T10:00:00.000Z",
            project_id=project,
            conversation_id=f"c{i % 16}",
            correlation_id="corr-0123456789abcdef0123",
            causation_id=str(uuid.uuid4()),
            data={
                "call_id": f"call-{i:016x}",
                "name": "fs.read",
                "duration_ms": 3,
                "result": {"path": "README.md", "content": "line of text " * 8},
                "risk_flags": [],
            },
        )
        for i in range(n)
    ]


def _raw_connection(path: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute(
        "CREATE TABLE IF NOT EXISTS stored_events (originator_id TEXT, "
        "originator_version INTEGER, topic TEXT, state BLOB, "
        "PRIMARY KEY (originator_id, originator_version))"
    )
    return conn


def _bench_raw_append(path: str, events: list[NewEvent], batch: int) -> float:
    encoder = msgspec.msgpack.Encoder()
    stream = uuid.uuid4().hex
    rows = [(stream, i + 1, e.type, encoder.encode(e)) for i, e in enumerate(events)]
    conn = _raw_connection(path)
    start = time.perf_counter()
    for i in range(0, len(rows), batch):
        conn.execute("BEGIN")
        conn.executemany("INSERT INTO stored_events VALUES (?,?,?,?)", rows[i : i + batch])
        conn.execute("COMMIT")
    elapsed = time.perf_counter() - start
    conn.close()
    return len(rows) / elapsed


def _bench_journal_append(path: str, events: list[NewEvent], batch: int) -> float:
    journal = Journal("sqlite", sqlite_path=path)
    start = time.perf_counter()
    for i in range(0, len(events), batch):
        journal.append(events[i : i + batch], key=str(uuid.uuid4()))
    elapsed = time.perf_counter() - start
    journal.close()
    return len(events) / elapsed


def _bench_replay(path: str, project: str, rounds: int = 3) -> tuple[float, float, int]:
    journal = Journal("sqlite", sqlite_path=path)
    best_roost = 0.0
    count = 0
    for _ in range(rounds):
        start = time.perf_counter()
        events = journal.read_project(project)
        best_roost = max(best_roost, len(events) / (time.perf_counter() - start))
        count = len(events)
    journal.close()
    conn = sqlite3.connect(path)
    best_raw = 0.0
    for _ in range(rounds):
        start = time.perf_counter()
        rows = conn.execute(  # the journal's table layout 2 (runtime/journal/sqlite_layout.py)
            "SELECT rowid, originator_version, topic, state FROM stored_events "
            "WHERE originator_id=(SELECT number FROM roost_streams WHERE stream=?) "
            "ORDER BY originator_version",
            (uuid.uuid5(uuid.UUID("5b1d7c52-6f0e-4c57-9a2a-52a6f2b1c0de"), project).bytes,),
        ).fetchall()
        best_raw = max(best_raw, len(rows) / (time.perf_counter() - start))
    conn.close()
    return best_roost, best_raw, count


class AppendRow(TypedDict):
    """Appends at one batch size: Roost's journal against raw SQLite inserts."""

    batch: int
    events: int
    roost_events_per_s: int
    raw_events_per_s: int
    ratio: float


class Replay(TypedDict):
    """Reading the journal back: decoded events against raw rows."""

    events: int
    roost_decoded_events_per_s: int
    raw_rows_per_s: int
    ratio: float


class JournalBenchReport(TypedDict):
    """What :func:`run_bench` returns (and ``--json`` writes)."""

    events_per_size: int
    append: list[AppendRow]
    replay: Replay


def run_bench(events_per_size: int = 2000, workdir: str | None = None) -> JournalBenchReport:
    """Run every measurement and return the report dict."""
    own_dir = workdir is None
    base = workdir or tempfile.mkdtemp(prefix="roost-bench-")
    append: list[AppendRow] = []
    try:
        for batch in (1, 10, 100):
            n = events_per_size if batch > 1 else max(200, events_per_size // 5)
            events = _events(n, f"bench-{batch}")
            raw = _bench_raw_append(os.path.join(base, f"raw-{batch}.sqlite"), events, batch)
            roost = _bench_journal_append(
                os.path.join(base, f"roost-{batch}.sqlite"), events, batch
            )
            append.append(
                {
                    "batch": batch,
                    "events": n,
                    "roost_events_per_s": round(roost),
                    "raw_events_per_s": round(raw),
                    "ratio": round(roost / raw, 3),
                }
            )
        replay_path = os.path.join(base, "replay.sqlite")
        journal = Journal("sqlite", sqlite_path=replay_path)
        replay_events = _events(max(events_per_size * 10, 20000), "replay")
        for i in range(0, len(replay_events), 500):
            journal.append(replay_events[i : i + 500])
        journal.close()
        roost, raw, count = _bench_replay(replay_path, "replay")
        replay: Replay = {
            "events": count,
            "roost_decoded_events_per_s": round(roost),
            "raw_rows_per_s": round(raw),
            "ratio": round(roost / raw, 3),
        }
    finally:
        if own_dir:
            for name in os.listdir(base):
                os.unlink(os.path.join(base, name))
            os.rmdir(base)
    return {"events_per_size": events_per_size, "append": append, "replay": replay}


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print a table (and JSON with ``--json FILE``)."""
    parser = argparse.ArgumentParser(prog="python -m soak.journal_bench")
    parser.add_argument("--events", type=int, default=2000, help="events per batch size")
    parser.add_argument("--json", dest="json_path", help="also write the report here")
    args = parser.parse_args(argv)
    report = run_bench(args.events)
    out = sys.stdout
    out.write("append (WAL, synchronous=FULL)\n")
    out.write(f"{'batch':>6} {'events':>7} {'roost ev/s':>11} {'raw ev/s':>10} {'ratio':>6}\n")
    for row in report["append"]:
        out.write(
            f"{row['batch']:>6} {row['events']:>7} {row['roost_events_per_s']:>11} "
            f"{row['raw_events_per_s']:>10} {row['ratio']:>6}\n"
        )
    replay = report["replay"]
    out.write(
        f"replay: {replay['events']} events, roost {replay['roost_decoded_events_per_s']} "
        f"decoded ev/s, raw {replay['raw_rows_per_s']} rows/s, ratio {replay['ratio']}\n"
    )
    if args.json_path:
        with open(args.json_path, "wb") as f:
            f.write(msgspec.json.format(msgspec.json.encode(report)) + b"\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
