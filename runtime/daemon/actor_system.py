"""Readying the daemon process for its Thespian actor system, and cleaning up after it.

Every actor process is forked from the daemon, so what is loaded, configured or removed
here before the system starts is what each of them inherits. The roots of tool runs a stop
or crash cut are reviewed at the daemon's start and stop and at a project's stop; the
cgroups a killed daemon of the home left (an MCP server frozen in one) are removed at its
start.
"""

from __future__ import annotations

import importlib
import os
import shutil
import time
from typing import Any

from runtime.logging import get_logger

__all__ = [
    "PRELOAD",
    "clean_up_dead_daemon",
    "preload",
    "remove_spill_dir",
    "review_dead_runs",
    "thespian_logging",
]

log = get_logger("runtime.daemon.backend")

PRELOAD = (
    "runtime.llm.deterministic",
    "runtime.llm.openai",
    "runtime.llm.resilience",
    "runtime.execution.results",
    "runtime.tools.registry",
    "runtime.guard.sandbox.layers",
    "runtime.policy.decisions",
    "runtime.execution.runner",
    "runtime.policy.options",
    "runtime.tools.asset_store",
)
"""Modules actors import when they start, loaded once here so every forked actor has them.

A conversation is a process of its own; importing its model adapter (HTTP client
included) on start cost it ~40 ms, more where no ``.pyc`` files are written, on every
passivation, restart and rehydration.
"""


def preload() -> None:
    """Import :data:`PRELOAD` in this process, before the actor system forks it."""
    for name in PRELOAD:
        importlib.import_module(name)


def thespian_logging(home: str) -> dict[str, Any]:
    """Thespian's logging configuration: its log file under the home, nothing on stderr."""
    logs = os.path.join(home, "logs")
    os.makedirs(logs, mode=0o700, exist_ok=True)
    os.environ.setdefault("THESPLOG_FILE", os.path.join(logs, "thespian.log"))
    os.environ.setdefault("THESPLOG_THRESHOLD", "WARNING")
    os.environ.setdefault("ROOST_LOG_FILE", os.path.join(logs, "daemon.log"))
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "handlers": {"null": {"class": "logging.NullHandler"}},
        "root": {"handlers": ["null"], "level": "WARNING"},
    }


def review_dead_runs(when: str, wait_s: float = 0.0, project_id: str | None = None) -> None:
    """Review the roots of runs a stop or crash cut (``runtime.guard.review.leftovers``), now.

    At a stop, the actor processes that ran them are waited for (up to ``wait_s``) first.
    Their events are recorded when their project's ToolRunner starts again.
    """
    from runtime.guard.review.leftovers import recover_runs  # noqa: PLC0415
    from runtime.guard.review.run_ledger import live_runs  # noqa: PLC0415

    deadline = time.monotonic() + wait_s
    while live_runs(project_id) and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        reviewed = recover_runs(project_id)
    except Exception:
        log.exception("dead_run_review_failed", when=when)
        return
    if reviewed:
        log.warning("dead_runs_reviewed", when=when, count=len(reviewed))


def clean_up_dead_daemon() -> None:
    """What a killed daemon of this home left: its cgroups, then the roots of its runs.

    Called once the home is protected (``roost_home.protect``), before the actor system
    starts. Its cgroups go first, so nothing of it still runs when the roots are reviewed.
    """
    _remove_dead_cgroups()
    review_dead_runs("daemon_start")


def _remove_dead_cgroups() -> None:
    """Kill what a killed daemon of this home left in its cgroups, and remove them.

    Run before the actor system starts, when no process of this daemon has made one: every
    cgroup of the home (``runtime.guard.sandbox.cgroupfs.home_key``) is then a dead
    daemon's. A server it left frozen waits for a thaw to die of its parent-death signal,
    and nothing else would ever thaw it. Another home's cgroups are not touched.
    """
    from runtime.guard.sandbox.cgroups import sweep_stale  # noqa: PLC0415

    try:
        removed = sweep_stale(any_owner=True, wait_s=5.0)  # a busy machine's slow exits
    except Exception:
        log.exception("leftover_cgroups_failed")
        return
    if removed:
        killed = sorted({pid for held in removed.values() for pid in held})
        log.warning("leftover_cgroups_removed", cgroups=sorted(removed), killed=killed)


def remove_spill_dir(path: str) -> None:
    """Remove the directory where older versions spilled large actor messages.

    Their files hold message contents; messages no longer touch the disk.
    """
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
