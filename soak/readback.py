"""Reading the journal back through the client, once the workload is over.

Integrity is judged on what a client can read: ``verify`` (replay of every projection
against the live one, the hash chain) says how many events a project has, then
``subscribe`` from seq 0 yields exactly those, each fed to the checks
(:class:`soak.integrity.StreamCheck`) as it comes and not kept: a ten-minute run leaves
millions. The time allowed grows with the events to read (``READ_BACK_S_PER_EVENT``).
Batch sizes for ``baseline`` come from the SQLite journal's ``roost_batches`` table,
read-only.
"""

from __future__ import annotations

import functools
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import msgspec

from runtime.client import Client
from runtime.client.replies import VerifyReport
from runtime.errors import RoostError
from soak.integrity import StreamCheck
from soak.monitor import Failures
from soak.turns import TurnResult

__all__ = [
    "READ_BACK_S_PER_EVENT",
    "Guard",
    "collect_events",
    "first_verify_allowance",
    "journal_batch_sizes",
    "read_project",
    "wait_idle",
]


T = TypeVar("T")

READ_BACK_S_PER_EVENT = 0.0002
"""Seconds allowed per event read back (``verify`` reads each, then ``subscribe``): 200 s
for a million events, on top of a fixed allowance. A guard against a wedged daemon, not a
measurement."""

_GIVE_UP = frozenset({"timeout", "daemon_unreachable"})
"""Errors after which asking the other conversations or projects is pointless."""


class Guard:
    """Interrupt ``client``'s calls once ``seconds`` have passed (until the block ends).

    A wedged daemon would otherwise hold the harness for each call's own time limit
    (``verify``: an hour). Past the deadline every call in flight is interrupted, again
    every second, so it fails with ``daemon_unreachable``.
    """

    def __init__(self, client: Client, seconds: float) -> None:
        self.client = client
        self.deadline = time.monotonic() + seconds
        self.fired = False
        """True once the deadline passed with the block still running."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="soak-guard", daemon=True)

    def extend(self, seconds: float) -> None:
        """Move the deadline ``seconds`` later (more to read than the budget foresaw)."""
        self.deadline += seconds

    def __enter__(self) -> Guard:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        from soak.scenarios import abort_call

        while time.monotonic() < self.deadline:
            if self._stop.wait(max(0.0, self.deadline - time.monotonic())):
                return
        self.fired = True
        while True:
            abort_call(self.client)
            if self._stop.wait(1.0):
                return


def first_verify_allowance(results: Iterable[TurnResult]) -> float:
    """Seconds the first project's ``verify`` may take: its events are not counted yet.

    Its events are at most the journal's highest acked seq, each given
    ``READ_BACK_S_PER_EVENT`` (a verify of 2.4 million events outgrew the fixed budget).
    """
    seqs = (r.ack["seq"] for r in results if r.ack is not None)
    return max((s for s in seqs if isinstance(s, int)), default=0) * READ_BACK_S_PER_EVENT


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
                diag = _patiently(
                    functools.partial(client.get_projection, project, conversation, "diagnostics")
                )
            except RoostError as e:
                failures.add("settle", e.code, str(e))
                if e.code in _GIVE_UP:
                    return
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


def read_project(
    client: Client, project: str, count: int, timeout_s: float, feed: Callable[[Any], None]
) -> int:
    """Feed the first ``count`` events of ``project`` (``subscribe`` from seq 0) to ``feed``.

    Returns how many came before ``timeout_s``.
    """
    got = 0
    stream = client.subscribe(project, after_seq=0)
    timer = threading.Timer(timeout_s, stream.close)
    timer.start()
    try:
        for event in stream:
            feed(event)
            got += 1
            if got >= count:
                break
    finally:
        timer.cancel()
        stream.close()
    return got


def _patiently(call: Callable[[], T], tries: int = 6) -> T:
    """``call()``, retried with backoff while the daemon answers ``overloaded``."""
    delay = 0.2
    for _ in range(tries - 1):
        try:
            return call()
        except RoostError as e:
            if e.code != "overloaded":
                raise
        time.sleep(delay)
        delay = min(delay * 2, 2.0)
    return call()


def collect_events(
    client: Client,
    projects: list[str],
    failures: Failures,
    check: StreamCheck,
    *,
    note: Callable[[str], None] = lambda _: None,
    verified_count: Callable[[int], None] = lambda _: None,
) -> dict[str, VerifyReport]:
    """Feed every project's events to ``check`` (``verify`` first: it says how many).

    Returns each project's verify answer. Projects that could not be read are missing from
    it (and their errors are in ``failures``): their integrity is unknown, not broken.
    ``note`` hears the progress, a line per step; ``verified_count`` each project's count
    of events once verified (the harness's guard gives it time to read them).
    """
    verified: dict[str, VerifyReport] = {}
    for project in projects:
        try:
            note(f"verifying {project}")
            result = _patiently(functools.partial(client.verify, project))
            count = int(result["checked_events"])
            verified_count(count)
            note(f"reading {count} events of {project} back")
            timeout_s = 60 + count * READ_BACK_S_PER_EVENT
            got = read_project(client, project, count, timeout_s, check.add)
        except RoostError as e:
            failures.add("journal", e.code, str(e))
            if e.code in _GIVE_UP:
                break
            continue
        verified[project] = result
        if got < count:
            failures.add(
                "journal", "short_read", f"subscribe gave {got} of {count} events of {project}"
            )
    return verified


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
        if any(
            project in since and first > since[project] for project, (first, _) in ranges.items()
        ):
            sizes.append(sum(last - first + 1 for first, last in ranges.values()))
    return sizes
