"""Crash consistency: a writer SIGKILLed at random moments loses no acknowledged event."""

from __future__ import annotations

import os
import random
import select
import signal
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest

from runtime.journal.store import Journal
from tests.runtime.journal_writer import PROJECTS, batch_events

ROOT = Path(__file__).resolve().parents[3]
KILLS = 24


def _run_until_killed(db: str, start: int, rng: random.Random) -> dict[int, list[int]]:
    """Start a writer at batch ``start``, SIGKILL it after a random number of acks."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.runtime.journal_writer", db, str(start)],
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        env=env,
        cwd=ROOT,
    )
    assert proc.stdout is not None
    acked: dict[int, list[int]] = {}
    target = rng.randint(1, 40)
    buffer = b""
    deadline = time.monotonic() + 60
    try:
        while len(acked) < target and time.monotonic() < deadline:
            ready, _, _ = select.select([proc.stdout], [], [], 5)
            if not ready:
                continue
            chunk = os.read(proc.stdout.fileno(), 65536)
            if not chunk:
                break
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                _, n, seqs = line.decode().split(" ")
                acked[int(n)] = [int(s) for s in seqs.split(",")]
        # Kill mid-write: sometimes at once, sometimes after a random pause.
        if rng.random() < 0.5:
            time.sleep(rng.random() * 0.02)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        proc.stdout.close()
    assert acked, "the writer acknowledged nothing before the kill"
    return acked


@pytest.mark.slow
def test_acknowledged_batches_survive_repeated_sigkills(tmp_path: Path) -> None:
    db = str(tmp_path / "journal.sqlite")
    rng = random.Random(20261122)
    acked: dict[int, list[int]] = {}
    start = 0
    for _ in range(KILLS):
        got = _run_until_killed(db, start, rng)
        for n, seqs in got.items():
            if n in acked:
                # A re-sent batch must come back with the positions it was committed at.
                assert acked[n] == seqs, f"batch {n} was appended twice"
            acked[n] = seqs
        # Resume from the last acknowledged batch: it is re-sent (a retry) on purpose.
        start = max(acked)

    journal = Journal("sqlite", sqlite_path=db, redactor=lambda v: v)
    try:
        assert journal.integrity_check() == "ok"
        everything = list(journal.iter_all())
        by_seq = {e.seq: e for e in everything}
        ids = [e.event_id for e in everything]
        assert len(ids) == len(set(ids)), "an event was stored twice"
        for n, seqs in acked.items():
            expected = [e.event_id for e in batch_events(n)]
            assert [by_seq[s].event_id for s in seqs] == expected, f"batch {n} lost or changed"
        streams: dict[tuple[str, str | None], list[int]] = defaultdict(list)
        for e in everything:
            streams[(e.project_id, e.conversation_id)].append(e.stream_version)
        for key, versions in streams.items():
            assert versions == list(range(1, len(versions) + 1)), f"stream {key} has a gap"
        for project in PROJECTS:
            report = journal.verify(project)
            assert report.ok, report
    finally:
        journal.close()
    assert len(acked) >= KILLS


@pytest.mark.parametrize("n", [0, 6, 13])
def test_writer_batches_are_deterministic(n: int) -> None:
    assert batch_events(n) == batch_events(n)
