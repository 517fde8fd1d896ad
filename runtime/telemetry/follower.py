"""The daemon's exporter thread: follows committed events, exports each turn as it ends.

``start_telemetry`` returns None, and imports no part of the SDK, unless the ``OTEL_*``
variables configure an exporter (``runtime.telemetry.settings``). Otherwise a
:class:`TurnFollower` thread reads the journal after the position it started at, gathers
each turn's events from its ``user.message`` to its end (``TURN_END_TYPES``), then builds
its spans (``turn_spans``) and measures and hands them to the exporter. It counts every
``actor.restarted``. It runs beside the conversations: a slow or failing collector
delays only this thread. Exporter failures are logged (``otel_export_failed``) and
counted, and never stop it.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Mapping
from typing import Final

from events.envelope import Envelope
from events.projections import TURN_END_TYPES
from runtime.errors import RoostError
from runtime.logging import get_logger
from runtime.telemetry.committed import CommittedFollower, ReadAfter
from runtime.telemetry.exporter import TurnExporter
from runtime.telemetry.measures import restarted_actor, turn_measures
from runtime.telemetry.settings import settings_from_env
from runtime.telemetry.spans import turn_spans

__all__ = ["MAX_OPEN_TURNS", "ReadAfter", "TurnFollower", "start_telemetry", "telemetry_status"]

log = get_logger("roost.telemetry")

MAX_OPEN_TURNS: Final = 1000
"""Turns gathered at once; beyond it the oldest is dropped (and counted)."""


class TurnFollower:
    """A thread that exports each turn once its end is committed."""

    def __init__(self, exporter: TurnExporter, read_after: ReadAfter, after_seq: int) -> None:
        self.exporter = exporter
        self._open: dict[str, list[Envelope]] = {}
        self._lock = threading.Lock()
        self._counts = {
            "exported_turns": 0,
            "exported_spans": 0,
            "export_failures": 0,
            "dropped_turns": 0,
            "restarts": 0,
        }
        self._follower = CommittedFollower(
            read_after,
            after_seq,
            self._observe,
            name="roost-telemetry",
            log=log,
            read_failed="otel_read_failed",
        )

    def start(self) -> TurnFollower:
        """Start following; return self."""
        self._follower.start()
        return self

    def stop(self) -> None:
        """Export what is committed already, then flush and close the exporter."""
        self._follower.stop()
        try:
            self.exporter.shutdown()
        except Exception as e:
            log.warning("otel_shutdown_failed", error=f"{type(e).__name__}: {e}")

    def status(self) -> dict[str, int]:
        """A snapshot of the counters, the cursor and the turns being gathered."""
        cursor = self._follower.cursor()
        with self._lock:
            return {**self._counts, "cursor": cursor, "open_turns": len(self._open)}

    def _count(self, key: str, n: int = 1) -> None:
        with self._lock:
            self._counts[key] += n

    def _observe(self, event: Envelope) -> None:
        actor = restarted_actor(event)
        if actor is not None:
            self._count("restarts")
            self._guard("count_restart", lambda: self.exporter.count_restart(actor))
            return
        correlation = event.correlation_id
        if event.type == "user.message":
            self._open.pop(correlation, None)
            if len(self._open) >= MAX_OPEN_TURNS:
                self._open.pop(next(iter(self._open)))
                self._count("dropped_turns")
            self._open[correlation] = [event]
            return
        gathered = self._open.get(correlation)
        if gathered is None:
            return
        gathered.append(event)
        if event.type in TURN_END_TYPES:
            del self._open[correlation]
            self._export(correlation, gathered)

    def _export(self, correlation: str, events: list[Envelope]) -> None:
        spans = turn_spans(events, correlation)
        measures = turn_measures(spans)
        if measures is not None:
            self._guard("record", lambda: self.exporter.record(measures))
        if self._guard("export", lambda: self.exporter.export_spans(spans)):
            self._count("exported_turns")
            self._count("exported_spans", len(spans))
        else:
            log.warning("otel_export_failed", correlation_id=correlation, spans=len(spans))

    def _guard(self, what: str, call: Callable[[], object]) -> bool:
        """Run ``call``; an exception or a False result is counted as a failure."""
        try:
            ok = call() is not False
        except Exception as e:
            log.warning("otel_exporter_raised", step=what, error=f"{type(e).__name__}: {e}")
            ok = False
        if not ok:
            self._count("export_failures")
        return ok


def start_telemetry(
    env: Mapping[str, str], read_after: ReadAfter, after_seq: int
) -> TurnFollower | None:
    """Start exporting the turns committed after ``after_seq``, if ``env`` configures it.

    Returns None (and loads no part of the SDK) when it does not, or when the settings
    cannot be used (logged as ``otel_config_invalid``; the daemon runs without telemetry).
    """
    try:
        settings = settings_from_env(env)
    except RoostError as e:
        log.error("otel_config_invalid", code=e.code, error=e.message, **e.details)
        return None
    if settings is None:
        return None
    from runtime.telemetry.sdk import open_exporter  # noqa: PLC0415 - the SDK only when on

    exporter = open_exporter(settings)
    log.info("otel_enabled", traces=list(settings.traces), metrics=list(settings.metrics))
    return TurnFollower(exporter, read_after, after_seq).start()


def telemetry_status(follower: TurnFollower | None) -> dict[str, int | bool]:
    """The ``telemetry`` field of the daemon's status: on or off, counters, SDK loaded."""
    counts = follower.status() if follower is not None else {}
    return {"enabled": follower is not None, "sdk_loaded": "opentelemetry" in sys.modules, **counts}
