"""Alert routing as plain code: which signals are routed, and what a router's outcome records."""

from __future__ import annotations

import sys
import threading
import types
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from events import catalog as ev
from events.envelope import Envelope
from runtime.lifecycle.alerts import alert_events, dispatch, load_router

MODULE = "roost_test_alert_routers"
CLOCK_AT = datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)
received: list[tuple[str, dict[str, Any], dict[str, Any]]] = []
release = threading.Event()


def _record(event_name: str, payload: dict[str, Any], metadata: dict[str, Any]) -> None:
    received.append((event_name, payload, metadata))


def _explode(event_name: str, payload: dict[str, Any], metadata: dict[str, Any]) -> None:
    raise ValueError("no route to the pager")


def _exit(event_name: str, payload: dict[str, Any], metadata: dict[str, Any]) -> None:
    raise SystemExit(3)


def _hang(event_name: str, payload: dict[str, Any], metadata: dict[str, Any]) -> None:
    release.wait(10)


@pytest.fixture(autouse=True)
def routers() -> Iterator[None]:
    """A module of routers importable as ``roost_test_alert_routers:<name>``."""
    module = types.ModuleType(MODULE)
    for name, fn in (("record", _record), ("explode", _explode), ("exit", _exit)):
        setattr(module, name, fn)
    module.hang = _hang  # type: ignore[attr-defined]
    module.not_callable = 42  # type: ignore[attr-defined]
    sys.modules[MODULE] = module
    received.clear()
    release.clear()
    yield
    release.set()
    del sys.modules[MODULE]


def envelope(event: ev.Event, seq: int = 7, conversation_id: str | None = "c1") -> Envelope:
    """A committed envelope carrying ``event``."""
    return Envelope(
        seq=seq,
        stream_version=seq,
        event_id=f"evt-{seq}",
        type=event.__struct_config__.tag,  # type: ignore[arg-type]
        at="2026-01-02T03:04:05.000Z",
        project_id="p1",
        conversation_id=conversation_id,
        correlation_id="corr-1",
        causation_id="evt-0",
        data=ev.payload_to_data(event),
        hash="h",
        prev_hash="g",
    )


VIOLATION = ev.SecuritySandboxViolation(tool="fs.read", path="../x", reason="dotdot", call_id="k")
OPTIONS = {
    "alert_router": f"{MODULE}:record",
    "alert_signal_events": ["security.sandbox_violation"],
}


def test_a_routed_signal_reaches_the_router_with_its_payload_and_metadata() -> None:
    [alert] = alert_events([envelope(VIOLATION)], OPTIONS, lambda: CLOCK_AT)

    assert received == [
        (
            "security.sandbox_violation",
            ev.payload_to_data(VIOLATION),
            {
                "project_id": "p1",
                "conversation_id": "c1",
                "correlation_id": "corr-1",
                "causation_id": "evt-0",
                "event_id": "evt-7",
                "seq": 7,
                "at": "2026-01-02T03:04:05.000Z",
            },
        )
    ]
    assert (alert.type, alert.data) == (
        "alert.dispatched",
        {"event": "security.sandbox_violation", "router": f"{MODULE}:record"},
    )


def test_the_alert_event_follows_the_signal_it_reports() -> None:
    [alert] = alert_events([envelope(VIOLATION)], OPTIONS, lambda: CLOCK_AT)

    assert (alert.project_id, alert.conversation_id, alert.correlation_id) == ("p1", "c1", "corr-1")
    assert (alert.causation_id, alert.at) == ("evt-7", "2026-01-02T03:04:05.678Z")


def test_signals_not_listed_are_not_routed() -> None:
    blocked = ev.SecurityCommandBlocked(pattern="sudo", call_id="k")

    assert alert_events([envelope(blocked)], OPTIONS, lambda: CLOCK_AT) == []
    assert received == []


def test_nothing_is_routed_without_a_router() -> None:
    options = {"alert_router": None, "alert_signal_events": ["security.sandbox_violation"]}

    assert alert_events([envelope(VIOLATION)], options, lambda: CLOCK_AT) == []
    assert received == []


def test_alerts_are_never_routed_even_when_listed() -> None:
    failed = ev.AlertFailed(event="security.sandbox_violation", router="x:y", reason="boom")
    options = {**OPTIONS, "alert_signal_events": ["alert.failed"]}

    assert alert_events([envelope(failed)], options, lambda: CLOCK_AT) == []


def test_a_project_level_signal_is_routed_with_no_conversation() -> None:
    [alert] = alert_events([envelope(VIOLATION, conversation_id=None)], OPTIONS, lambda: CLOCK_AT)

    assert alert.conversation_id is None
    assert received[0][2]["conversation_id"] is None


@pytest.mark.parametrize(
    ("router", "reason"),
    [
        ("explode", "ValueError: no route to the pager"),
        ("exit", "SystemExit: 3"),
        ("missing", f"load: AttributeError: module '{MODULE}' has no attribute 'missing'"),
        ("not_callable", f"load: TypeError: {MODULE}:not_callable is a int, not a function"),
    ],
)
def test_a_router_that_fails_is_reported_and_never_raises(router: str, reason: str) -> None:
    outcome = dispatch(f"{MODULE}:{router}", "security.sandbox_violation", {}, {})

    assert outcome == ev.AlertFailed(
        event="security.sandbox_violation", router=f"{MODULE}:{router}", reason=reason
    )


def test_a_router_module_that_does_not_import_is_reported() -> None:
    outcome = dispatch("no_such_roost_module:route", "security.sandbox_violation", {}, {})

    assert isinstance(outcome, ev.AlertFailed)
    assert outcome.reason == "load: ModuleNotFoundError: No module named 'no_such_roost_module'"


def test_a_router_that_hangs_is_given_up_on_at_the_timeout() -> None:
    outcome = dispatch(f"{MODULE}:hang", "security.sandbox_violation", {}, {}, timeout_s=0.05)

    assert isinstance(outcome, ev.AlertFailed)
    assert outcome.reason == "timeout: the router did not return within 0.05 s"


def test_load_router_returns_the_function() -> None:
    assert load_router(f" {MODULE}:record ") is _record
