"""OpenTelemetry traces and metrics from committed events.

General layout: ``spans`` (the pure core: a turn's spans from its committed events, with
ids derived from the correlation and event ids), ``measures`` (what a turn adds to the
metrics), ``settings`` (the ``OTEL_*`` variables), ``exporter`` (the interface spans and
measures are handed to), ``committed`` (a thread following the journal's committed
events), ``follower`` (the daemon's exporter thread), ``replay`` (past turns, for ``roost
export otel``) and ``sdk`` (the one module that imports the OpenTelemetry SDK and
implements ``exporter``; it is loaded only when telemetry is configured, so this package
re-exports nothing from it).
"""

from runtime.telemetry.follower import TurnFollower, start_telemetry, telemetry_status
from runtime.telemetry.measures import METRIC_NAMES, TurnMeasures, turn_measures
from runtime.telemetry.replay import OtelExportFailedError, TurnNotFoundError, replay_turns
from runtime.telemetry.settings import (
    TelemetryNotConfiguredError,
    TelemetrySettings,
    settings_from_env,
)
from runtime.telemetry.spans import (
    SPAN_NAMES,
    SpanRecord,
    span_id_of,
    trace_id_of,
    turn_correlations,
    turn_spans,
)

__all__ = [
    "METRIC_NAMES",
    "SPAN_NAMES",
    "OtelExportFailedError",
    "SpanRecord",
    "TelemetryNotConfiguredError",
    "TelemetrySettings",
    "TurnFollower",
    "TurnMeasures",
    "TurnNotFoundError",
    "replay_turns",
    "settings_from_env",
    "span_id_of",
    "start_telemetry",
    "telemetry_status",
    "trace_id_of",
    "turn_correlations",
    "turn_measures",
    "turn_spans",
]
