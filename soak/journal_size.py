"""Where a SQLite journal's bytes go: per table and index, per event type, per turn.

Run ``python -m soak.journal_size HOME_OR_FILE [--json FILE]`` on a journal (a stopped
daemon's, a soak's ``--home``). A turn is a ``user.message`` event. It reports the file's
size, each table's and index's pages from SQLite's ``dbstat`` (page bytes, the payload in
them, the unused part), the stored ``state`` bytes of each event type, and what the same
envelopes would take as format-1 states (msgpack maps, :mod:`runtime.journal.stored`), so
the figures of ``docs/performance.md`` can be made again on any journal of either layout.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
from typing import TypedDict

import msgspec

from runtime.journal.stored import decode_state

__all__ = ["SizeReport", "TableBytes", "TypeBytes", "main", "measure"]


def _topic_sql(conn: sqlite3.Connection) -> str:
    """The expression of a row's event type, in this journal's layout."""
    version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    if version >= 2:
        return "(SELECT t.topic FROM roost_topics t WHERE t.number=e.topic)"
    return "e.topic"


class TableBytes(TypedDict):
    """One table or index's pages (SQLite's ``dbstat``)."""

    name: str
    bytes: int
    payload: int
    unused: int


class TypeBytes(TypedDict):
    """The stored events of one type."""

    events: int
    state_bytes: int


class SizeReport(TypedDict):
    """Where a journal's bytes go: per turn, per table and per event type."""

    path: str
    layout: int
    turns: int
    events: int
    file_bytes: int
    file_bytes_per_turn: int | None
    state_bytes_per_turn: int | None
    format_1_state_bytes_per_turn: int | None
    tables: list[TableBytes]
    types: dict[str, TypeBytes]


def measure(path: str) -> SizeReport:
    """The size report of the SQLite journal at ``path`` (read-only)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        topic = _topic_sql(conn)
        by_type: dict[str, TypeBytes] = {}
        format_1 = 0
        for kind, state in conn.execute(
            f"SELECT {topic}, e.state FROM stored_events e ORDER BY e.rowid"
        ):
            row = by_type.setdefault(str(kind), {"events": 0, "state_bytes": 0})
            row["events"] += 1
            row["state_bytes"] += len(state)
            envelope = decode_state(bytes(state), str(kind), 0)
            format_1 += len(msgspec.msgpack.encode(envelope))
        pages: list[TableBytes] = [
            {"name": str(name), "bytes": int(size), "payload": int(payload), "unused": int(unused)}
            for name, size, payload, unused in conn.execute(
                "SELECT name, sum(pgsize), sum(payload), sum(unused) FROM dbstat "
                "GROUP BY name ORDER BY sum(pgsize) DESC"
            )
        ]
        layout = int(conn.execute("PRAGMA user_version").fetchone()[0]) or 1
    finally:
        conn.close()
    turns = by_type["user.message"]["events"] if "user.message" in by_type else 0
    events = sum(r["events"] for r in by_type.values())
    state = sum(r["state_bytes"] for r in by_type.values())
    size = os.path.getsize(path)
    return {
        "path": path,
        "layout": layout,
        "turns": turns,
        "events": events,
        "file_bytes": size,
        "file_bytes_per_turn": round(size / turns) if turns else None,
        "state_bytes_per_turn": round(state / turns) if turns else None,
        "format_1_state_bytes_per_turn": round(format_1 / turns) if turns else None,
        "tables": pages,
        "types": dict(sorted(by_type.items(), key=lambda item: -item[1]["state_bytes"])),
    }


def _print(report: SizeReport) -> None:
    turns = report["turns"] or 1
    print(
        f"{report['path']}: layout {report['layout']}, {report['events']} events, "
        f"{report['turns']} turns (user.message)"
    )
    print(
        f"file {report['file_bytes']} bytes: {report['file_bytes_per_turn']} per turn; "
        f"stored states {report['state_bytes_per_turn']} per turn "
        f"(as format-1 maps: {report['format_1_state_bytes_per_turn']})"
    )
    print(f"{'table or index':38} {'bytes/turn':>10} {'payload':>8} {'unused':>7}")
    for t in report["tables"]:
        print(
            f"{t['name']:38} {t['bytes'] / turns:10.0f} {t['payload'] / turns:8.0f} "
            f"{t['unused'] / turns:7.0f}"
        )
    print(f"{'event type':38} {'events':>10} {'state avg':>9} {'per turn':>8}")
    for kind, row in report["types"].items():
        print(
            f"{kind:38} {row['events']:10d} {row['state_bytes'] / row['events']:9.0f} "
            f"{row['state_bytes'] / turns:8.0f}"
        )


def main(argv: list[str] | None = None) -> int:
    """Print (or write as JSON) where the journal's bytes go."""
    parser = argparse.ArgumentParser(prog="python -m soak.journal_size", description=__doc__)
    parser.add_argument("journal", help="a ROOST_HOME (its journal.sqlite) or a journal file")
    parser.add_argument("--json", metavar="FILE", help="also write the report as JSON")
    args = parser.parse_args(argv)
    path = args.journal
    if os.path.isdir(path):
        path = os.path.join(path, "journal.sqlite")
    if not os.path.isfile(path):
        print(f"no SQLite journal at {path}", file=sys.stderr)
        return 2
    report = measure(path)
    _print(report)
    if args.json:
        with open(args.json, "w") as out:
            json.dump(report, out, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
