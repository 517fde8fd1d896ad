"""Whether and where to export, from the standard ``OTEL_*`` variables (no SDK import).

Telemetry is off unless configured. A signal (traces, metrics) is on when its
``OTEL_<SIGNAL>_EXPORTER`` is ``otlp`` (the one exporter shipped), or when it is unset and
an OTLP endpoint is set (``OTEL_EXPORTER_OTLP_ENDPOINT`` or
``OTEL_EXPORTER_OTLP_<SIGNAL>_ENDPOINT``). ``none`` turns a signal off;
``OTEL_SDK_DISABLED=true`` turns both off. OTLP goes over HTTP with protobuf, the one
protocol shipped: another ``OTEL_EXPORTER_OTLP[_<SIGNAL>]_PROTOCOL`` is a ``bad_config``.
The service name is ``OTEL_SERVICE_NAME``, ``roost`` by default. The SDK's own exporters
read the rest (endpoint paths, headers, timeouts, ``OTEL_METRIC_EXPORT_INTERVAL``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar, Final, Literal

import msgspec

from runtime.errors import ConfigError, RoostError

__all__ = [
    "EXPORTERS",
    "ExporterName",
    "TelemetryNotConfiguredError",
    "TelemetrySettings",
    "settings_from_env",
]

ExporterName = Literal["otlp"]
"""An exporter Roost can build for a signal."""

EXPORTERS: Final[tuple[ExporterName, ...]] = ("otlp",)
"""The exporter names ``OTEL_TRACES_EXPORTER`` / ``OTEL_METRICS_EXPORTER`` accept (and none)."""

_PROTOCOL: Final = "http/protobuf"


class TelemetryNotConfiguredError(RoostError):
    """No trace exporter is configured (``OTEL_*`` unset, ``none``, or the SDK disabled)."""

    code: ClassVar[str] = "otel_not_configured"


class TelemetrySettings(msgspec.Struct, frozen=True, kw_only=True):
    """What to export, and as which service."""

    traces: tuple[ExporterName, ...]
    """Span exporters (empty: no traces)."""
    metrics: tuple[ExporterName, ...]
    """Metric exporters (empty: no metrics)."""
    service_name: str
    """``service.name`` of the resource."""


def _exporters(env: Mapping[str, str], signal: str) -> tuple[ExporterName, ...]:
    variable = f"OTEL_{signal.upper()}_EXPORTER"
    raw = env.get(variable, "").strip().lower()
    if not raw:
        endpoint = (
            env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
            or env.get(f"OTEL_EXPORTER_OTLP_{signal.upper()}_ENDPOINT", "").strip()
        )
        return ("otlp",) if endpoint else ()
    names = [name.strip() for name in raw.split(",") if name.strip()]
    if "none" in names:
        return ()
    out: dict[ExporterName, None] = {}  # each once, in the order first named
    for name in names:
        if name not in EXPORTERS:
            raise ConfigError(
                f"{variable} must be a comma-separated list of {', '.join(EXPORTERS)} or none, "
                f"got {name!r}",
                reason="unsupported_exporter",
                variable=variable,
                value=name,
            )
        out[name] = None
    return tuple(out)


def _check_protocol(env: Mapping[str, str], signal: str) -> None:
    for variable in (
        f"OTEL_EXPORTER_OTLP_{signal.upper()}_PROTOCOL",
        "OTEL_EXPORTER_OTLP_PROTOCOL",
    ):
        value = env.get(variable, "").strip().lower()
        if value and value != _PROTOCOL:
            raise ConfigError(
                f"{variable} must be {_PROTOCOL} (the OTLP exporter Roost ships), got {value!r}",
                reason="unsupported_protocol",
                variable=variable,
                value=value,
            )
        if value:
            return


def settings_from_env(env: Mapping[str, str]) -> TelemetrySettings | None:
    """Return the telemetry settings ``env`` configures, or None when telemetry is off.

    Raises ``ConfigError`` (``bad_config``) for an exporter or protocol Roost cannot use.
    """
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    traces, metrics = _exporters(env, "traces"), _exporters(env, "metrics")
    if not traces and not metrics:
        return None
    for signal, names in (("traces", traces), ("metrics", metrics)):
        if "otlp" in names:
            _check_protocol(env, signal)
    return TelemetrySettings(
        traces=traces,
        metrics=metrics,
        service_name=env.get("OTEL_SERVICE_NAME", "").strip() or "roost",
    )
