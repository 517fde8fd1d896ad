"""Readying the daemon process for its Thespian actor system, and cleaning up after it.

Every actor process is forked from the daemon, so what is loaded, configured or removed
here before the system starts is what each of them inherits. The roots of tool runs a stop
or crash cut are reviewed at the daemon's start and stop and at a project's stop.
"""

from __future__ import annotations

import importlib
import os
import shutil
import time
from typing import Any

from runtime.logging import get_logger

__all__ = ["PRELOAD", "preload", "remove_spill_dir", "review_dead_runs", "thespian_logging"]

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


def remove_spill_dir(path: str) -> None:
    """Remove the directory where older versions spilled large actor messages.

    Their files hold message contents; messages no longer touch the disk.
    """
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
