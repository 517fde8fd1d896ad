"""Alert routing: signals named in ``alert_signal_events`` go to the ``alert_router``.

The router is a ``"package.module:function"`` (SPEC section 5) called as
``function(event_name, payload, metadata)``, where ``payload`` is the committed signal's
``data`` (already redacted by the journal) and ``metadata`` is ``{project_id,
conversation_id, correlation_id, causation_id, event_id, seq, at}``. Delivery is
best-effort: :func:`dispatch` never raises; it returns ``alert.dispatched`` or
``alert.failed`` (with the reason: the import error, the router's exception, or a
timeout), and the actor that committed the signal appends that event with the signal's
project, conversation and correlation, caused by the signal.

The router runs on a daemon thread and is waited for at most :data:`ROUTER_TIMEOUT_S`;
a router that hangs is reported as failed and left to finish in the background, so a
broken router can slow an actor down but never stop or crash it.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any

from events.catalog import AlertDispatched, AlertFailed
from events.envelope import Envelope, NewEvent, format_at, new_event
from runtime.option_table import RuntimeOptions

__all__ = ["ROUTER_TIMEOUT_S", "alert_events", "dispatch", "load_router"]

ROUTER_TIMEOUT_S = 5.0
"""How long one router call is waited for before it counts as failed."""

_REASON_MAX = 500


def load_router(spec: str) -> Callable[..., Any]:
    """Import ``"package.module:function"`` and return the function.

    Raises ``ImportError``, ``AttributeError`` or ``TypeError`` (not callable).
    """
    module_name, _, attribute = spec.strip().partition(":")
    module = importlib.import_module(module_name)
    router = getattr(module, attribute)
    if not callable(router):
        raise TypeError(f"{spec} is a {type(router).__name__}, not a function")
    return router  # type: ignore[no-any-return]


def _describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"[:_REASON_MAX]


def dispatch(
    router_spec: str,
    event_name: str,
    payload: Mapping[str, Any],
    metadata: Mapping[str, Any],
    *,
    timeout_s: float = ROUTER_TIMEOUT_S,
) -> AlertDispatched | AlertFailed:
    """Call the router once; return what to record. Never raises."""
    try:
        router = load_router(router_spec)
    except BaseException as e:  # a broken router must never take the runtime down
        return AlertFailed(event=event_name, router=router_spec, reason=f"load: {_describe(e)}")
    outcome: dict[str, BaseException] = {}
    done = threading.Event()

    def call() -> None:
        try:
            router(event_name, dict(payload), dict(metadata))
        except BaseException as e:  # reported as alert.failed, never re-raised
            outcome["error"] = e
        finally:
            done.set()

    threading.Thread(target=call, name=f"alert:{event_name}", daemon=True).start()
    if not done.wait(timeout_s):
        reason = f"timeout: the router did not return within {timeout_s:g} s"
        return AlertFailed(event=event_name, router=router_spec, reason=reason)
    if "error" in outcome:
        return AlertFailed(event=event_name, router=router_spec, reason=_describe(outcome["error"]))
    return AlertDispatched(event=event_name, router=router_spec)


def alert_events(
    envelopes: Iterable[Envelope], options: Mapping[str, Any], clock: Callable[[], datetime]
) -> list[NewEvent]:
    """Dispatch every committed signal the options route; return the ``alert.*`` to append.

    Nothing is dispatched without an ``alert_router``; ``alert.*`` events themselves are
    never routed (option validation refuses them in ``alert_signal_events`` too).
    """
    if not options.get("alert_router"):  # the common case: no conversion of every option
        return []
    settings = RuntimeOptions.of(options)
    router = settings.alert_router
    routed = set(settings.alert_signal_events)
    if not router or not routed:
        return []
    out: list[NewEvent] = []
    for envelope in envelopes:
        if envelope.type not in routed or envelope.type.startswith("alert."):
            continue
        metadata = {
            "project_id": envelope.project_id,
            "conversation_id": envelope.conversation_id,
            "correlation_id": envelope.correlation_id,
            "causation_id": envelope.causation_id,
            "event_id": envelope.event_id,
            "seq": envelope.seq,
            "at": envelope.at,
        }
        result = dispatch(str(router), envelope.type, envelope.data, metadata)
        out.append(
            new_event(
                result,
                project_id=envelope.project_id,
                conversation_id=envelope.conversation_id,
                at=format_at(clock()),
                correlation_id=envelope.correlation_id,
                causation_id=envelope.event_id,
            )
        )
    return out
