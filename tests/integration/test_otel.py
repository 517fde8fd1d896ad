"""OpenTelemetry from a real daemon: the spans of a real turn, the OTLP/HTTP export to a
loopback collector, the replay by ``roost export otel``, and no SDK when it is off."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from runtime.client import Client
from runtime.daemon import start_daemon, stop_daemon
from runtime.journal.store import Journal
from runtime.telemetry import replay_turns, trace_id_of
from runtime.telemetry.sdk import Exporter
from tests.integration.conftest import Daemon, alive, daemon_env, make_root

TOOL_CALLS = {
    "tool_calls": [
        {"name": "fs.read", "args": {"path": "notes.txt"}},
        {"name": "fs.write", "args": {"path": "x.txt", "content": "x"}},
    ]
}
"""One allowed call and one the project's ``deny_tools`` denies."""

OPTIONS = {"deny_tools": ["fs.write"]}


def run_turn(client: Client, root: str) -> None:
    client.start_project(root, project_id="p1", options=OPTIONS)
    client.start_conversation("p1", conversation_id="c1")
    ack = client.send_message("p1", "c1", "go", "corr-otel", wait=True, llm=TOOL_CALLS)
    assert ack["outcome"] == "llm.completed"


class Collector:
    """An OTLP/HTTP receiver on loopback: decodes every trace and metrics request."""

    def __init__(self, status: int = 200) -> None:
        self.traces: list[ExportTraceServiceRequest] = []
        self.metrics: list[ExportMetricsServiceRequest] = []
        self.changed = threading.Condition()
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                with collector.changed:
                    if self.path == "/v1/traces":
                        collector.traces.append(ExportTraceServiceRequest.FromString(body))
                    elif self.path == "/v1/metrics":
                        collector.metrics.append(ExportMetricsServiceRequest.FromString(body))
                    collector.changed.notify_all()
                known = self.path in ("/v1/traces", "/v1/metrics")
                self.send_response(status if known else 404)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def spans(self) -> list[tuple[str, str, str, str, str]]:
        """(trace id, span id, parent span id, name, service.name) of every span received."""
        out = []
        for request in self.traces:
            for resource_spans in request.resource_spans:
                service = next(
                    a.value.string_value
                    for a in resource_spans.resource.attributes
                    if a.key == "service.name"
                )
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        out.append(
                            (
                                span.trace_id.hex(),
                                span.span_id.hex(),
                                span.parent_span_id.hex(),
                                span.name,
                                service,
                            )
                        )
        return sorted(out)

    def metric_names(self) -> set[str]:
        return {
            metric.name
            for request in self.metrics
            for resource_metrics in request.resource_metrics
            for scope_metrics in resource_metrics.scope_metrics
            for metric in scope_metrics.metrics
        }

    def sum_attributes(self, name: str) -> list[dict[str, str]]:
        """The attributes of every data point of the counter ``name`` received."""
        return [
            {a.key: a.value.string_value for a in point.attributes}
            for request in self.metrics
            for resource_metrics in request.resource_metrics
            for scope_metrics in resource_metrics.scope_metrics
            for metric in scope_metrics.metrics
            if metric.name == name
            for point in metric.sum.data_points
        ]

    def wait(self, ready: Any, timeout_s: float = 30.0) -> None:
        with self.changed:
            assert self.changed.wait_for(ready, timeout_s), "the collector did not receive it"


@pytest.fixture
def collector() -> Iterator[Collector]:
    running = Collector()
    running.thread.start()
    try:
        yield running
    finally:
        running.server.shutdown()
        running.server.server_close()


def roost(home: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    return subprocess.run(
        [sys.executable, "-m", "runtime.cli", "--home", home, *args],
        env={**clean, **daemon_env(**env)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_a_turn_with_a_tool_call_and_a_denial_becomes_one_trace_of_spans(
    daemon: Daemon, project_root: str
) -> None:
    with daemon.client(timeout_s=30) as c:
        run_turn(c, project_root)
        telemetry = c.status()["telemetry"]
    # no OTEL_* variable: the daemon exported nothing and never loaded the SDK
    assert telemetry == {"enabled": False, "sdk_loaded": False}
    with Journal.open(daemon.home, "sqlite") as journal:
        events = journal.read_project("p1")
    memory = InMemorySpanExporter()
    summary = replay_turns(events, Exporter(Resource.create({}), memory), conversation_id="c1")
    assert (summary["turns"], summary["failed"]) == (1, 0)
    spans = memory.get_finished_spans()
    by_id = {span.context.span_id: span for span in spans}
    assert {span.context.trace_id for span in spans} == {trace_id_of("corr-otel")}

    def path(span: Any) -> str:
        names = [span.name]
        while span.parent is not None:
            span = by_id[span.parent.span_id]
            names.append(span.name)
        return "/".join(reversed(names))

    tools = {span.attributes["roost.tool.name"] for span in spans if span.name == "roost.tool.call"}
    assert tools == {"fs.read", "fs.write"}
    assert sorted(path(span) for span in spans) == sorted(
        [
            "roost.turn",
            "roost.turn/roost.journal.commit",
            "roost.turn/roost.llm.round",
            "roost.turn/roost.llm.round",
            "roost.turn/roost.llm.round/roost.tool.call",
            "roost.turn/roost.llm.round/roost.tool.call",
            "roost.turn/roost.llm.round/roost.tool.call/roost.policy.decision",
            "roost.turn/roost.llm.round/roost.tool.call/roost.policy.decision",
            "roost.turn/roost.llm.round/roost.tool.call/roost.tool.run",
        ]
    )
    denied = next(s for s in spans if s.name == "roost.policy.decision" and s.status.is_ok is False)
    assert denied.status.status_code is StatusCode.ERROR
    assert denied.status.description == "policy.denied: denied"
    assert (denied.attributes["roost.policy.decision"], denied.attributes["roost.tool.name"]) == (
        "deny",
        "fs.write",
    )
    event = next(e for e in events if e.event_id == denied.attributes["roost.event_id"])
    assert event.type == "policy.denied"
    assert denied.attributes["roost.causation_id"] == event.causation_id
    assert denied.attributes["roost.correlation_id"] == "corr-otel"
    assert denied.attributes["roost.conversation_id"] == "c1"
    assert denied.attributes["roost.project_id"] == "p1"
    run = next(s for s in spans if s.name == "roost.tool.run")
    assert (run.attributes["roost.tool.name"], run.status.status_code) == (
        "fs.read",
        StatusCode.UNSET,
    )
    failed_call = next(
        s
        for s in spans
        if s.name == "roost.tool.call" and s.attributes["roost.tool.name"] == "fs.write"
    )
    assert failed_call.attributes["roost.tool.outcome"] == "failed"
    assert failed_call.status.status_code is StatusCode.ERROR
    turn = next(s for s in spans if s.name == "roost.turn")
    assert turn.attributes["roost.turn.outcome"] == "llm.completed"
    assert turn.start_time is not None and turn.end_time is not None
    assert all(turn.start_time <= s.start_time <= s.end_time <= turn.end_time for s in spans)  # type: ignore[operator]


def test_the_daemon_exports_over_otlp_http_and_the_replay_gives_the_same_ids(
    tmp_path: Path, collector: Collector
) -> None:
    home = str(tmp_path / "home")
    root = make_root(tmp_path / "repo")
    env = daemon_env(
        OTEL_EXPORTER_OTLP_ENDPOINT=collector.endpoint,
        OTEL_SERVICE_NAME="roost-test",
        OTEL_METRIC_EXPORT_INTERVAL="300",
    )
    pid = start_daemon(home, env=env, timeout_s=60)
    daemon = Daemon(home=home, pid=pid)
    seen = daemon.processes()
    try:
        with daemon.client(timeout_s=30) as c:
            run_turn(c, root)
            collector.wait(lambda: len(collector.spans()) >= 9)
            collector.wait(
                lambda: (
                    {"roost.turns", "roost.turn.duration", "roost.tool.outcomes"}
                    <= collector.metric_names()
                    and "roost.policy.denials" in collector.metric_names()
                )
            )
            # the conversation is an entity of the project's host: crashed, not killed
            c.call("inject_fault", {"project_id": "p1", "target": "conversation:c1"})
            collector.wait(lambda: "roost.actor.restarts" in collector.metric_names())
            assert {"roost.actor": "conversation"} in collector.sum_attributes(
                "roost.actor.restarts"
            )
            assert {"roost.tool.name": "fs.write", "roost.policy.reason": "denied"} in (
                collector.sum_attributes("roost.policy.denials")
            )
            telemetry = c.status()["telemetry"]
        assert (telemetry["enabled"], telemetry["sdk_loaded"]) == (True, True)
        assert (telemetry["exported_turns"], telemetry["export_failures"]) == (1, 0)
    finally:
        seen += daemon.processes()
        stop_daemon(home, timeout_s=30)
        assert alive(seen) == []
    live = collector.spans()
    assert {span[0] for span in live} == {f"{trace_id_of('corr-otel'):032x}"}
    assert {span[4] for span in live} == {"roost-test"}
    assert len(live) == 9

    replayed = Collector()
    replayed.thread.start()
    try:
        done = roost(
            home, "export", "otel", "p1", "c1", OTEL_EXPORTER_OTLP_ENDPOINT=replayed.endpoint
        )
        assert done.returncode == 0, done.stderr
        assert f"trace {trace_id_of('corr-otel'):032x}  9 spans" in done.stdout
        assert replayed.spans() == [(*span[:4], "roost") for span in live]
        assert replayed.metric_names() == set()
        one = roost(
            home,
            "--json",
            "export",
            "otel",
            "p1",
            "--turn",
            "corr-otel",
            OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=f"{replayed.endpoint}/v1/traces",
        )
        assert one.returncode == 0, one.stderr
        assert json.loads(one.stdout)["traces"] == [
            {
                "correlation_id": "corr-otel",
                "trace_id": f"{trace_id_of('corr-otel'):032x}",
                "spans": 9,
                "exported": True,
            }
        ]
        missing = roost(
            home, "export", "otel", "p1", "--turn", "corr-nope",
            OTEL_EXPORTER_OTLP_ENDPOINT=replayed.endpoint,
        )  # fmt: skip
        assert missing.returncode == 1
        assert missing.stderr == "roost: turn_not_found: no turn with correlation id 'corr-nope'\n"
    finally:
        replayed.server.shutdown()
        replayed.server.server_close()


def test_export_otel_without_an_exporter_fails_with_its_code(tmp_path: Path) -> None:
    done = roost(str(tmp_path / "home"), "export", "otel", "p1")
    assert done.returncode == 1
    assert done.stderr.startswith("roost: otel_not_configured: no trace exporter is configured")
    done = roost(str(tmp_path / "home"), "export", "otel", "p1", OTEL_TRACES_EXPORTER="zipkin")
    assert done.returncode == 1
    assert done.stderr.startswith("roost: bad_config: OTEL_TRACES_EXPORTER must be")


def test_a_collector_that_refuses_the_export_never_breaks_the_daemon(tmp_path: Path) -> None:
    refusing = Collector(status=400)
    refusing.thread.start()
    home = str(tmp_path / "home")
    env = daemon_env(OTEL_EXPORTER_OTLP_ENDPOINT=refusing.endpoint, OTEL_METRICS_EXPORTER="none")
    pid = start_daemon(home, env=env, timeout_s=60)
    daemon = Daemon(home=home, pid=pid)
    seen = daemon.processes()
    try:
        with daemon.client(timeout_s=30) as c:
            run_turn(c, make_root(tmp_path / "repo"))
            refusing.wait(lambda: len(refusing.traces) == 1)
            again = c.send_message("p1", "c1", "hello", "corr-again", wait=True)
            assert again["outcome"] == "llm.completed"
            refusing.wait(lambda: len(refusing.traces) == 2)
            # the collector has answered; the daemon's thread counts the refusal just after
            deadline = time.monotonic() + 30
            telemetry = c.status()["telemetry"]
            while telemetry["export_failures"] < 2 and time.monotonic() < deadline:
                threading.Event().wait(0.05)
                telemetry = c.status()["telemetry"]
        assert (telemetry["exported_turns"], telemetry["export_failures"]) == (0, 2)
        assert refusing.metric_names() == set()
    finally:
        seen += daemon.processes()
        stop_daemon(home, timeout_s=30)
        refusing.server.shutdown()
        refusing.server.server_close()
        assert alive(seen) == []
    log = Path(home, "logs", "daemon.log").read_text()
    assert log.count('"event":"otel_export_failed"') == 2
