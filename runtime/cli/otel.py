"""``roost export otel PROJECT [CONV] [--turn CORRELATION]``: past turns as traces.

The turns are read from the journal (no daemon needed) and sent through the exporter the
``OTEL_*`` variables configure.

Each turn becomes the trace the daemon exported live (the same trace and span ids:
``runtime.telemetry.spans``). Without a configured trace exporter it fails with
``otel_not_configured`` (exit 1); a turn the exporter refuses makes it fail with
``otel_export_failed`` (exit 1) after the others were sent. Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from events.incidents import conversation_exists
from runtime.cli.format import dumps_json
from runtime.daemon.config import config_for_home
from runtime.errors import ConversationNotFoundError, ProjectNotFoundError
from runtime.journal.store import Journal
from runtime.telemetry import (
    OtelExportFailedError,
    TelemetryNotConfiguredError,
    replay_turns,
    settings_from_env,
)

__all__ = ["PROGRESS_EVERY", "cmd_export_otel"]

PROGRESS_EVERY = 100
"""A progress line on stderr every this many turns (and after the last one)."""


def _progress(done: int, total: int) -> None:
    if total > 1 and (done % PROGRESS_EVERY == 0 or done == total):
        print(f"roost: exported {done}/{total} turns", file=sys.stderr, flush=True)


def _text(summary: dict[str, Any]) -> str:
    lines = [
        f"{t['correlation_id']}  trace {t['trace_id']}  {t['spans']} spans"
        + ("" if t["exported"] else "  (failed)")
        for t in summary["traces"]
    ]
    lines.append(f"{summary['turns']} turns, {summary['spans']} spans exported")
    return "\n".join(lines)


def cmd_export_otel(ns: argparse.Namespace) -> int:
    """``roost export otel PROJECT [CONV] [--turn CORRELATION]``."""
    settings = settings_from_env(os.environ)
    if settings is None or not settings.traces:
        raise TelemetryNotConfiguredError(
            "no trace exporter is configured: set OTEL_EXPORTER_OTLP_ENDPOINT (or "
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, or OTEL_TRACES_EXPORTER=otlp)"
        )
    config = config_for_home(ns.home)
    home = config.home
    if not os.path.isdir(home):
        raise ProjectNotFoundError(f"no project {ns.project!r}: {home} does not exist")
    with Journal.open(home, config.journal) as journal:
        events = journal.read_project(ns.project)
    if not events:
        raise ProjectNotFoundError(
            f"no project {ns.project!r} in the journal", project_id=ns.project
        )
    if ns.conversation is not None and not conversation_exists(events, ns.conversation):
        raise ConversationNotFoundError(
            f"no conversation {ns.conversation!r} in project {ns.project!r}",
            project_id=ns.project,
            conversation_id=ns.conversation,
        )
    from runtime.telemetry.sdk import open_exporter  # noqa: PLC0415 - the SDK only when on

    exporter = open_exporter(settings, metrics=False)
    try:
        summary = replay_turns(
            events,
            exporter,
            conversation_id=ns.conversation,
            correlation_id=ns.turn,
            progress=_progress,
        )
    finally:
        exporter.shutdown()
    result = {"project_id": ns.project, "conversation_id": ns.conversation, **summary}
    print(dumps_json(result) if ns.json else _text(result), flush=True)
    if summary["failed"]:
        raise OtelExportFailedError(
            f"the exporter did not take {summary['failed']} of {summary['turns']} turns "
            "(is the collector reachable?)",
            failed=summary["failed"],
        )
    return 0
