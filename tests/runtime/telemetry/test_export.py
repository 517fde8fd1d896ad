"""The ``OTEL_*`` settings, the SDK side (``ReadableSpan``s, instruments) and the daemon's
exporter thread, with the SDK's own in-memory exporters."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from typing import Any

import pytest
from opentelemetry.sdk.metrics.export import (
    MetricExporter,
    MetricExportResult,
    MetricsData,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from events import catalog as ev
from events.envelope import Envelope
from runtime.errors import ConfigError
from runtime.telemetry import METRIC_NAMES, TurnFollower, settings_from_env, turn_spans
from runtime.telemetry.sdk import Exporter, readable_spans
from tests.events.test_projections import incident_journal
from tests.integration.conftest import REPO_ROOT

# --- settings ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, None),
        ({"OTEL_SERVICE_NAME": "x"}, None),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, (("otlp",), ("otlp",), "roost")),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c/v1/traces"}, (("otlp",), (), "roost")),
        (
            {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SERVICE_NAME": "agents"},
            (("otlp",), (), "agents"),
        ),
        (
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_METRICS_EXPORTER": "none"},
            (("otlp",), (), "roost"),
        ),
        (
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "none"},
            ((), ("otlp",), "roost"),
        ),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "TRUE"}, None),
        (
            {
                "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c",
                "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
            },
            (("otlp",), ("otlp",), "roost"),
        ),
    ],
)
def test_telemetry_is_on_only_where_otel_variables_configure_it(
    env: dict[str, str], expected: tuple[Any, ...] | None
) -> None:
    settings = settings_from_env(env)
    got = None if settings is None else (settings.traces, settings.metrics, settings.service_name)
    assert got == expected


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            {"OTEL_TRACES_EXPORTER": "zipkin"},
            r"^OTEL_TRACES_EXPORTER must be a comma-separated list of otlp or none, got 'zipkin'$",
        ),
        (
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
            r"^OTEL_EXPORTER_OTLP_PROTOCOL must be http/protobuf .*, got 'grpc'$",
        ),
    ],
)
def test_an_exporter_or_protocol_roost_cannot_use_is_a_config_error(
    env: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        settings_from_env(env)


# --- the SDK side -----------------------------------------------------------------------


class Collected(MetricExporter):
    """A metric exporter that keeps what it is given (the SDK's exporter interface)."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[MetricsData] = []

    def export(
        self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any
    ) -> MetricExportResult:
        self.batches.append(metrics_data)
        return MetricExportResult.SUCCESS

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return True

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        pass

    def points(self) -> dict[str, list[Any]]:
        out: dict[str, list[Any]] = {}
        for batch in self.batches:
            for resource in batch.resource_metrics:
                for scope in resource.scope_metrics:
                    for metric in scope.metrics:
                        out.setdefault(metric.name, []).extend(metric.data.data_points)
        return out


class Refusing(SpanExporter):
    """A span exporter whose collector is down: it raises, then refuses."""

    def __init__(self) -> None:
        self.calls = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.calls += 1
        if self.calls == 1:
            raise ConnectionError("collector down")
        return SpanExportResult.FAILURE


def test_readable_spans_keep_the_records_ids_parents_times_and_status() -> None:
    records = turn_spans(incident_journal().events, "corr-1")
    resource = Resource.create({"service.name": "roost"})
    spans = readable_spans(records, resource)
    for record, span in zip(records, spans, strict=True):
        assert span.context is not None
        assert (span.name, span.context.trace_id, span.context.span_id) == (
            record.name,
            record.trace_id,
            record.span_id,
        )
        assert (span.parent.span_id if span.parent else None) == record.parent_span_id
        assert (span.start_time, span.end_time) == (record.start_ns, record.end_ns)
        assert span.status.status_code is (StatusCode.ERROR if record.error else StatusCode.UNSET)
        assert dict(span.attributes or {}) == record.attributes
        assert [e.name for e in span.events] == [m.name for m in record.marks]
        assert span.context.trace_flags.sampled


def events_reader(events: list[Envelope]) -> Any:
    def read_after(seq: int) -> list[Envelope]:
        return [e for e in events if e.seq > seq][:4]

    return read_after


def test_the_follower_exports_each_finished_turn_and_its_metrics() -> None:
    journal = incident_journal()
    journal.add(ev.ActorRestarted(actor="conversation:c1", reason="crash"), conversation_id=None)
    spans, metrics = InMemorySpanExporter(), Collected()
    exporter = Exporter(
        Resource.create({}), spans, [PeriodicExportingMetricReader(metrics, 60_000)]
    )
    follower = TurnFollower(exporter, events_reader(journal.events), 0).start()
    follower.stop()  # drains what is committed, then flushes the metrics
    assert [s.name for s in spans.get_finished_spans()] == [
        r.name for r in turn_spans(journal.events, "corr-1")
    ]
    assert follower.status() == {
        "exported_turns": 1,
        "exported_spans": 9,
        "export_failures": 0,
        "dropped_turns": 0,
        "restarts": 2,
        "cursor": len(journal.events),
        "open_turns": 1,  # corr-x has not ended
    }
    points = metrics.points()
    assert sorted(points) == list(METRIC_NAMES)
    restarts = {p.attributes["roost.actor"]: p.value for p in points["roost.actor.restarts"]}
    assert restarts == {"toolrunner": 1, "conversation": 1}
    assert [dict(p.attributes) for p in points["roost.policy.denials"]] == [
        {"roost.tool.name": "fs.write", "roost.policy.reason": "sensitive_path_denied"}
    ]
    assert [p.count for p in points["roost.turn.duration"]] == [1]


def test_exporter_failures_are_counted_and_the_follower_goes_on() -> None:
    journal = incident_journal()
    message = journal.add(ev.UserMessage(content="again"), correlation_id="corr-2")
    journal.add(ev.LlmFailed(reason="timeout"), correlation_id="corr-2", cause=message)
    refusing = Refusing()
    follower = TurnFollower(
        Exporter(Resource.create({}), refusing), events_reader(journal.events), 0
    ).start()
    follower.stop()
    status = follower.status()
    assert (status["exported_turns"], status["export_failures"], refusing.calls) == (0, 2, 2)
    assert status["cursor"] == len(journal.events)


@pytest.mark.slow
def test_without_otel_variables_nothing_loads_the_sdk() -> None:
    script = (
        "import sys, runtime.telemetry, runtime.cli.app, runtime.daemon.backend\n"
        "from runtime.telemetry import start_telemetry\n"
        "assert start_telemetry({}, lambda seq: [], 0) is None\n"
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO_ROOT,
        env={"PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout == "[]\n"
