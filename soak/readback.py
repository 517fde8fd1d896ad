"""Reading the journal back through the client, once the workload is over.

Integrity is judged on what a client can read: ``verify`` (replay of every projection
against the live one, the hash chain) says how many events a project has, then
``subscribe`` from seq 0 yields exactly those. Batch sizes for ``baseline`` come from the
SQLite journal's ``roost_batches`` table, read-only.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from typing import Any

import msgspec

from runtime.client import Client
from runtime.errors import RoostError
from soak.monitor import Failures

__all__ = ["collect_events", "journal_batch_sizes", "read_project", "wait_idle"]


def wait_idle(
    client: Client, conversations: list[tuple[str, str]], timeout_s: float, failures: Failures
) -> None:
    """Wait until no conversation has a turn running (recovery after ``chaos`` included)."""
    pending = list(conversations)
    deadline = time.monotonic() + timeout_s
    while pending:
        still = []
        for project, conversation in pending:
            try:
                diag = client.get_projection(project, conversation, "diagnostics")
            except RoostError as e:
                failures.add("settle", e.code, str(e))
                continue
            if diag.get("status") == "running" or diag.get("pending_tool_call_count"):
                still.append((project, conversation))
        pending = still
        if pending and time.monotonic() >= deadline:
            failures.add(
                "settle",
                "still_running",
                f"{len(pending)} conversation(s) still running {timeout_s:g} s after the "
                f"workload, e.g. {pending[0][0]}/{pending[0][1]}",
            )
            return
        if pending:
            time.sleep(0.1)


def read_project(client: Client, project: str, count: int, timeout_s: float) -> list[Any]:
    """The first ``count`` events of ``project`` through ``subscribe`` (from seq 0)."""
    events: list[Any] = []
    stream = client.subscribe(project, after_seq=0)
    timer = threading.Timer(timeout_s, stream.close)
    timer.start()
    try:
        for event in stream:
            events.append(event)
            if len(events) >= count:
                break
    finally:
        timer.cancel()
        stream.close()
    return events


def collect_events(
    client: Client, projects: list[str], failures: Failures
) -> tuple[list[Any], dict[str, Any]]:
    """Every project's events (``verify`` first: it says how many) and its verify answer."""
    events: list[Any] = []
    verified: dict[str, Any] = {}
    for project in projects:
        try:
            result = client.verify(project)
            verified[project] = result
            chunk = read_project(client, project, int(result["checked_events"]), 60.0)
        except RoostError as e:
            failures.add("journal", e.code, str(e))
            verified[project] = {"ok": False, "chain_ok": False, "mismatches": []}
            continue
        if len(chunk) < int(result["checked_events"]):
            failures.add(
                "journal",
                "short_read",
                f"subscribe gave {len(chunk)} of {result['checked_events']} events of {project}",
            )
        events.extend(chunk)
    return events, verified


def journal_batch_sizes(home: str, since: dict[str, int]) -> list[int] | None:
    """Sizes of the SQLite journal's batches committed after ``since`` (project → version).

    Read from ``roost_batches`` (each batch's version range per project); ``None`` when
    the journal is not a SQLite file in ``home``.
    """
    path = os.path.join(home, "journal.sqlite")
    if not os.path.exists(path):
        return None
    decoder = msgspec.msgpack.Decoder(dict[str, tuple[int, int]])
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
    try:
        rows = conn.execute("SELECT ranges FROM roost_batches").fetchall()
    except sqlite3.Error:
        return None
    finally:
        conn.close()
    sizes = []
    for (raw,) in rows:
        ranges = decoder.decode(raw)
        if any(project in since and first > since[project] for project, (first, _) in
               ranges.items()):
            sizes.append(sum(last - first + 1 for first, last in ranges.values()))
    return sizes
