"""The OpenTelemetry SDK side: ``ReadableSpan``s for an exporter, a ``MeterProvider``.

Span records become ``ReadableSpan``s with their own ids and times, and turn measures
feed the meter provider's instruments. Imported only when telemetry is configured.

Nothing here touches the SDK's global providers: the exporter, the meter provider and
the resource belong to one :class:`Exporter`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, Status, StatusCode, TraceFlags

from runtime.telemetry.measures import TurnMeasures
from runtime.telemetry.settings import TelemetrySettings
from runtime.telemetry.spans import AttributeValue, SpanRecord

__all__ = ["Exporter", "open_exporter", "readable_spans"]

_SCOPE = "roost"


def _context(trace_id: int, span_id: int) -> SpanContext:
    return SpanContext(
        trace_id, span_id, is_remote=False, trace_flags=TraceFlags(TraceFlags.SAMPLED)
    )


def readable_spans(records: Sequence[SpanRecord], resource: Resource) -> list[ReadableSpan]:
    """Return the SDK spans of ``records``, with their ids, parents and times as given."""
    scope = InstrumentationScope(_SCOPE)
    return [
        ReadableSpan(
            name=record.name,
            context=_context(record.trace_id, record.span_id),
            parent=(
                None
                if record.parent_span_id is None
                else _context(record.trace_id, record.parent_span_id)
            ),
            resource=resource,
            attributes=dict(record.attributes),
            events=[Event(m.name, dict(m.attributes), m.time_ns) for m in record.marks],
            status=(
                Status(StatusCode.ERROR, record.status_message)
                if record.error
                else Status(StatusCode.UNSET)
            ),
            start_time=record.start_ns,
            end_time=record.end_ns,
            instrumentation_scope=scope,
        )
        for record in records
    ]


class _Instruments:
    """The five metrics of ``runtime.telemetry.measures``, on one meter."""

    def __init__(self, meters: MeterProvider) -> None:
        meter = meters.get_meter(_SCOPE)
        self.turns = meter.create_counter("roost.turns", "{turn}", "turns finished")
        self.latency = meter.create_histogram("roost.turn.duration", "ms", "turn latency")
        self.tools = meter.create_counter("roost.tool.outcomes", "{call}", "tool call outcomes")
        self.denials = meter.create_counter("roost.policy.denials", "{decision}", "denials")
        self.restarts = meter.create_counter("roost.actor.restarts", "{restart}", "restarts")


class _Dropped:
    """A counter or histogram that keeps nothing (no metric reader is configured)."""

    def add(self, amount: int, attributes: Mapping[str, AttributeValue]) -> None:
        """Drop the count."""

    def record(self, amount: float, attributes: Mapping[str, AttributeValue]) -> None:
        """Drop the measurement."""


class _NoInstruments:
    """The metrics of an exporter with no metric reader: each one drops what it is given."""

    def __init__(self) -> None:
        self.turns = self.latency = self.tools = self.denials = self.restarts = _Dropped()


class Exporter:
    """Hands a turn's spans to a span exporter and its measures to a meter provider."""

    def __init__(
        self,
        resource: Resource,
        span_exporter: SpanExporter | None,
        metric_readers: Sequence[MetricReader] = (),
    ) -> None:
        self.resource = resource
        self.span_exporter = span_exporter
        self.meters = (
            MeterProvider(
                resource=resource, metric_readers=list(metric_readers), shutdown_on_exit=False
            )
            if metric_readers
            else None
        )
        self._instruments: _Instruments | _NoInstruments = (
            _Instruments(self.meters) if self.meters is not None else _NoInstruments()
        )

    def export_spans(self, records: Sequence[SpanRecord]) -> bool:
        """Export ``records``; True when the exporter took them (or there is none)."""
        if self.span_exporter is None or not records:
            return True
        result = self.span_exporter.export(readable_spans(records, self.resource))
        return result is SpanExportResult.SUCCESS

    def record(self, measures: TurnMeasures) -> None:
        """Add one finished turn to the metrics."""
        self._instruments.turns.add(1, measures.turn)
        self._instruments.latency.record(measures.duration_ms, measures.turn)
        for attributes in measures.tool_outcomes:
            self._instruments.tools.add(1, attributes)
        for attributes in measures.denials:
            self._instruments.denials.add(1, attributes)

    def count_restart(self, actor: str) -> None:
        """Add one actor restart to the metrics."""
        self._instruments.restarts.add(1, {"roost.actor": actor})

    def shutdown(self) -> None:
        """Flush and close the exporters (metrics are exported one last time)."""
        try:
            if self.meters is not None:
                self.meters.shutdown()
        finally:
            if self.span_exporter is not None:
                self.span_exporter.shutdown()


def open_exporter(settings: TelemetrySettings, *, metrics: bool = True) -> Exporter:
    """Build the exporters ``settings`` name (OTLP over HTTP; the SDK reads its ``OTEL_*``)."""
    resource = Resource.create({"service.name": settings.service_name})
    spans = OTLPSpanExporter() if "otlp" in settings.traces else None
    readers: list[MetricReader] = []
    if metrics and "otlp" in settings.metrics:
        readers.append(PeriodicExportingMetricReader(OTLPMetricExporter()))
    return Exporter(resource, spans, readers)
