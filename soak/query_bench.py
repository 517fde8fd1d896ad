"""Queries of one conversation on a large project: ``python -m soak.query_bench``.

1. Builds a SQLite journal of ``--events`` events on a fresh ``ROOST_HOME`` with the real writer
   (:meth:`runtime.journal.Journal.open`: redaction, hash chain, seals, batch commits of
   ``--batch`` events): one project of ``--conversations`` conversations whose turns are
   ten events each (a message, two model rounds, a tool call with its policy decision), the
   conversations taking turns, and ``project.stopped`` at the end (so the daemon does not
   restart the project: the queries read the journal alone).
2. Starts a real daemon on that home and, through the client, times ``--rounds`` of each
   query on the last conversation: ``incident_timeline`` with ``limit=100`` (the newest
   page), a page back from the middle (``before_seq``), a page forward (``after_seq``),
   and one turn's ``incident_report`` (``correlation_id``); then ``roost timeline --limit
   100`` as a program (its time includes starting Python). Reads the daemon's USS before
   and after the queries.
3. With ``--whole``, also times the path the daemon took before: the whole project read
   and folded by :func:`events.incidents.incident_timeline`, in this process, with the
   memory the project's events take while held.

Prints a JSON report (also to ``--json FILE``). Figures are in ``docs/performance.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any, NotRequired, TypedDict

import psutil

from events import catalog as ev
from events.envelope import NewEvent
from runtime.client import Client
from runtime.daemon import start_daemon, stop_daemon
from runtime.journal.store import Batch, Journal

__all__ = [
    "Build",
    "DaemonQueries",
    "QueryReport",
    "Timing",
    "build_journal",
    "emit_report",
    "main",
    "run_bench",
]


class Timing(TypedDict):
    """One query's time over its rounds."""

    median_ms: float
    max_ms: float


class Build(TypedDict):
    """The journal :func:`build_journal` wrote."""

    events: int
    rows: int
    conversations: int
    build_s: float
    build_events_per_s: int
    journal_mb: float


class Uss(TypedDict, total=False):
    """The daemon's USS in MB at each point of :func:`_queries` (filled as it goes)."""

    idle: float
    warm: float
    after_pass_1: float
    after_pass_2: float
    after_cli: float


class DaemonQueries(TypedDict):
    """Each query's time through the daemon and the ``roost`` program, and the USS."""

    uss_mb: Uss
    timeline_entries: int
    timeline_limit_100: Timing
    timeline_before_seq: Timing
    timeline_after_seq: Timing
    incident_one_turn: Timing
    cli_timeline_limit_100: Timing
    cli_version: Timing


class WholeProject(TypedDict):
    """The old whole-project read: its times, and the memory the events held."""

    ms: list[int]
    held_mb: NotRequired[float]


class QueryReport(TypedDict):
    """What :func:`run_bench` returns (and ``--json`` writes)."""

    build: Build
    load_average_before: list[float]
    daemon: NotRequired[DaemonQueries]
    whole_project: NotRequired[WholeProject]


PROJECT = "bench"
TURN = 10
"""Events per turn."""


def _conversation(index: int) -> str:
    return f"c{index:04d}"


def _turn(conversation: str, turn: int) -> list[tuple[ev.Event, str]]:
    call = f"call-{conversation}-{turn}"
    return [
        (ev.UserMessage(content=f"turn {turn}: read the README and summarise it"), "user"),
        (ev.LlmStarted(provider="deterministic", round=1), "round"),
        (ev.AssistantMessage(content="Reading the README.", round=1), "round"),
        (ev.ToolRequested(call_id=call, name="fs.read", args={"path": "README.md"}), "round"),
        (ev.PolicyAllowed(tool="fs.read", call_id=call), "call"),
        (ev.ToolStarted(call_id=call, name="fs.read"), "call"),
        (
            ev.ToolCompleted(
                call_id=call,
                name="fs.read",
                duration_ms=3,
                result={"path": "README.md", "content": "# Seed project\n" * 4},
            ),
            "call",
        ),
        (ev.LlmStarted(provider="deterministic", round=2), "round"),
        (ev.AssistantMessage(content="The README describes a seed project.", round=2), "round"),
        (ev.LlmCompleted(), "round"),
    ]


def _new(
    payload: ev.Event, conversation: str | None, correlation: str, cause: str | None
) -> NewEvent:
    return NewEvent(
        event_id=str(uuid.uuid4()),
        type=payload.__struct_config__.tag,  # type: ignore[arg-type]
        at="2026-11-27T10:00:00.000Z",
        project_id=PROJECT,
        conversation_id=conversation,
        correlation_id=correlation,
        causation_id=cause,
        data=ev.payload_to_data(payload),
    )


def _stream(events: int, conversations: int, root: str) -> Iterator[NewEvent]:
    """The project's events, in commit order (``events`` of them, give or take a turn)."""
    yield _new(ev.ProjectStarted(root=root), None, "corr-start", None)
    for index in range(conversations):
        conversation = _conversation(index)
        yield _new(ev.ConversationStarted(), conversation, f"corr-{conversation}", None)
    turns = max(1, (events - 2 - conversations) // TURN)
    for turn in range(turns):
        conversation = _conversation(turn % conversations)
        correlation = f"corr-{conversation}-{turn}"
        user: str | None = None
        round_: str | None = None
        for payload, parent in _turn(conversation, turn):
            cause = {"user": None, "round": user, "call": round_}[parent]
            event = _new(payload, conversation, correlation, cause)
            if parent == "user":
                user = event.event_id
            elif payload.__struct_config__.tag == "tool.requested":
                round_ = event.event_id
            yield event
    yield _new(ev.ProjectStopped(), None, "corr-stop", None)


def build_journal(home: str, events: int, conversations: int, batch: int = 5000) -> Build:
    """Write the project into ``home``'s journal with the real writer; return what was built."""
    root = os.path.join(home, "..", "root")
    os.makedirs(root, exist_ok=True)
    started = time.perf_counter()
    written = 0
    with Journal.open(home, "sqlite") as journal:
        pending: list[NewEvent] = []
        for event in _stream(events, conversations, os.path.abspath(root)):
            pending.append(event)
            if len(pending) >= batch:
                journal.append_batches([Batch(events=pending, key=str(uuid.uuid4()))])
                written += len(pending)
                pending = []
        if pending:
            journal.append_batches([Batch(events=pending, key=str(uuid.uuid4()))])
            written += len(pending)
        journal.seal("shutdown")
        total = journal.max_seq()
    elapsed = time.perf_counter() - started
    size = os.path.getsize(os.path.join(home, "journal.sqlite"))
    return {
        "events": written,
        "rows": total,
        "conversations": conversations,
        "build_s": round(elapsed, 1),
        "build_events_per_s": round(written / elapsed),
        "journal_mb": round(size / 2**20, 1),
    }


def _timed(rounds: int, call: Callable[[], Any]) -> Timing:
    call()  # warm: the first read of a page may find it on disk, not in the cache
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        call()
        times.append((time.perf_counter() - started) * 1000)
    ordered = sorted(times)
    return {
        "median_ms": round(statistics.median(ordered), 2),
        "max_ms": round(ordered[-1], 2),
    }


def _uss_mb(pid: int) -> float:
    return round(psutil.Process(pid).memory_full_info().uss / 2**20, 1)


def _cli(home: str, rounds: int, *args: str) -> Timing:
    """Time ``roost --json ARGS`` as a program (``timeline``: with ``--limit 100``)."""
    command = [sys.executable, "-m", "runtime.cli", "--home", home, "--json", *args]
    if "timeline" in args:
        command += ["--limit", "100"]

    def run() -> None:
        done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"roost {' '.join(args)} failed: {done.stderr.strip()}")

    return _timed(rounds, run)


def _queries(home: str, pid: int, conversation: str, rounds: int, cli_rounds: int) -> DaemonQueries:
    """Time each query, and read the daemon's USS along the way.

    At ``idle`` (started, nothing asked yet), ``warm`` (each query asked once), and after a
    first and a second pass of ``rounds`` of each: memory that is flat stays where the
    warm-up left it.
    """
    uss: Uss = {"idle": _uss_mb(pid)}
    with Client.connect(home=home, timeout_s=120) as client:
        newest = client.incident_timeline(PROJECT, conversation, 100)
        if len(newest["entries"]) != 100:
            raise RuntimeError(f"the newest page has {len(newest['entries'])} entries, not 100")
        middle = newest["entries"][0]["seq"] // 2
        correlation = newest["entries"][-1]["correlation_id"]
        entries = newest["total_entries"]
        queries: dict[str, Callable[[], Any]] = {
            "timeline_limit_100": lambda: client.incident_timeline(PROJECT, conversation, 100),
            "timeline_before_seq": lambda: client.incident_timeline(
                PROJECT, conversation, 100, before_seq=middle
            ),
            "timeline_after_seq": lambda: client.incident_timeline(
                PROJECT, conversation, 100, after_seq=middle
            ),
            "incident_one_turn": lambda: client.incident_report(PROJECT, conversation, correlation),
        }
        for query in queries.values():
            query()
        uss["warm"] = _uss_mb(pid)
        timed = {name: _timed(rounds, query) for name, query in queries.items()}
        uss["after_pass_1"] = _uss_mb(pid)
        for query in queries.values():
            _timed(rounds, query)
        uss["after_pass_2"] = _uss_mb(pid)
    cli_timeline = _cli(home, cli_rounds, "timeline", PROJECT, conversation)
    cli_version = _cli(home, cli_rounds, "--version")
    uss["after_cli"] = _uss_mb(pid)
    return {
        "uss_mb": uss,
        "timeline_entries": entries,
        "timeline_limit_100": timed["timeline_limit_100"],
        "timeline_before_seq": timed["timeline_before_seq"],
        "timeline_after_seq": timed["timeline_after_seq"],
        "incident_one_turn": timed["incident_one_turn"],
        "cli_timeline_limit_100": cli_timeline,
        "cli_version": cli_version,
    }


def _whole_project(home: str, conversation: str) -> WholeProject:
    """The daemon's old path: read the whole project, fold its timeline (in this process).

    Timed twice; the memory is this process's USS while the events are held, less before.
    """
    from events.incidents import incident_timeline

    me = os.getpid()
    out: WholeProject = {"ms": []}
    with Journal("sqlite", sqlite_path=os.path.join(home, "journal.sqlite")) as journal:
        for _ in range(2):
            before = _uss_mb(me)
            started = time.perf_counter()
            events = journal.read_project(PROJECT)
            incident_timeline(events, PROJECT, conversation, 100)
            out["ms"].append(round((time.perf_counter() - started) * 1000))
            out["held_mb"] = round(_uss_mb(me) - before, 1)
            del events
    return out


def run_bench(
    events: int,
    conversations: int,
    rounds: int,
    *,
    batch: int = 5000,
    cli_rounds: int = 10,
    whole: bool = False,
    workdir: str | None = None,
) -> QueryReport:
    """Build the journal, query it through a real daemon, and return the report."""
    base = tempfile.mkdtemp(prefix="roost-query-bench-", dir=workdir)
    home = os.path.join(base, "home")
    os.makedirs(home, mode=0o700)
    try:
        report: QueryReport = {
            "build": build_journal(home, events, conversations, batch),
            "load_average_before": [round(n, 1) for n in os.getloadavg()],
        }
        conversation = _conversation(conversations - 1)
        pid = start_daemon(home, timeout_s=600)
        try:
            report["daemon"] = _queries(home, pid, conversation, rounds, cli_rounds)
        finally:
            stop_daemon(home, timeout_s=60)
        if whole:
            report["whole_project"] = _whole_project(home, conversation)
        return report
    finally:
        shutil.rmtree(base, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    """Entry point: ``python -m soak.query_bench [--events N] [--conversations N] ...``."""
    parser = argparse.ArgumentParser(prog="python -m soak.query_bench")
    parser.add_argument("--events", type=int, default=1_000_000, help="default 1,000,000")
    parser.add_argument("--conversations", type=int, default=100, help="default 100")
    parser.add_argument("--rounds", type=int, default=40, help="timed calls per query")
    parser.add_argument("--batch", type=int, default=5000, help="events per append")
    parser.add_argument("--cli-rounds", type=int, default=10, help="timed `roost` programs")
    parser.add_argument("--whole", action="store_true", help="also time the old whole-project read")
    parser.add_argument("--workdir", help="where the temporary home goes (default: TMPDIR)")
    parser.add_argument("--json", dest="json_path", help="also write the report here")
    args = parser.parse_args(argv)
    report = run_bench(
        args.events,
        args.conversations,
        args.rounds,
        batch=args.batch,
        cli_rounds=args.cli_rounds,
        whole=args.whole,
        workdir=args.workdir,
    )
    emit_report(report, args.json_path)
    return 0


def emit_report(report: object, json_path: str | None) -> None:
    """Print ``report`` as indented JSON, and write the same text to ``json_path`` if given."""
    text = json.dumps(report, indent=2)
    print(text)
    if json_path:
        with open(json_path, "w", encoding="utf-8") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    raise SystemExit(main())
