"""One soak run, end to end: daemon, bootstrap, workload, journal checks, memory, shutdown.

:func:`run_soak` drives the real daemon through the real client:

1. use the daemon running on ``--home``, or spawn one (``runtime.daemon.start_daemon``) on
   ``--home`` or on a temporary ``ROOST_HOME``;
2. create temporary project roots with seed files, start the projects (their
   ``idle_passivation_ms`` is short so idle conversations stop after the run), sample the
   daemon tree's memory, start the conversations;
3. run the scenario's workload (``soak.scenarios``; ``chaos`` kills actor processes
   meanwhile, ``soak.chaos``), then wait until every conversation is idle;
4. read every project's journal back through the client (``verify``, then ``subscribe``
   from seq 0) and check it (``soak.report.check_integrity``);
5. wait for idle conversations to be passivated and sample memory again;
6. stop the daemon it spawned and make sure no process of it is left;
7. ``baseline``: replay the run's pattern on bare Thespian and eventsourcing.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import sqlite3
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import msgspec
import psutil

from runtime.client import Client
from runtime.daemon import daemon_pid, start_daemon, stop_daemon
from runtime.errors import RoostError
from runtime.processes import daemon_processes, reap_stragglers
from soak.report import (
    Backpressure,
    ChaosSummary,
    EventCounts,
    Failure,
    Integrity,
    Memory,
    SoakConfig,
    SoakReport,
    StageCounts,
    Throughput,
    check_integrity,
    latency_stats,
)
from soak.scenarios import TurnResult, Workload, WorkloadResult, plan_turns

__all__ = ["SEED_FILES", "DaemonSession", "MemorySampler", "decide", "run_soak"]

SEED_FILES: dict[str, str] = {
    "README.md": "# Soak project\n\nA seed file the model reads on every turn.\n" * 4,
    "src/app.py": 'def main() -> None:\n    print("hello from the soak project")\n',
    "docs/guide.md": "# Guide\n\nNothing to see here; the soak harness made this file.\n",
    "notes.txt": "soak seed notes\n",
}
"""Files every soak project root starts with."""

_INTOLERABLE_IN_CHAOS = frozenset(
    {"bad_request", "project_not_found", "conversation_not_found", "invalid_runtime_opt"}
)


# --- bootstrap --------------------------------------------------------------------------


def _seed_root(path: str) -> None:
    for name, text in SEED_FILES.items():
        target = os.path.join(path, name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "w", encoding="utf-8") as f:
            f.write(text)


def _start_projects(
    client: Client, config: SoakConfig, workdir: str, run_id: str, failures: _Failures
) -> list[str]:
    started = []
    for i in range(config.projects):
        root = os.path.join(workdir, "roots", f"p{i}")
        _seed_root(root)
        try:
            project = client.start_project(
                root,
                project_id=f"soak-{run_id}-p{i}",
                options={"idle_passivation_ms": config.idle_passivation_ms},
            )
        except RoostError as e:
            failures.add("project", e.code, str(e))
            continue
        started.append(project)
    return started


def _start_conversations(
    client: Client, projects: list[str], per_project: int, failures: _Failures
) -> list[tuple[str, str]]:
    started = []
    for project in projects:
        for j in range(per_project):
            try:
                started.append((project, client.start_conversation(project, f"c{j}")))
            except RoostError as e:
                failures.add("conversation", e.code, str(e))
    return started


