"""The daemon's operations: their names, the arguments each takes, and their time limits.

Every request names an operation (``op``) and carries its arguments (``args``, an object).
:func:`validate_args` checks them against the op's argument Struct (unknown keys, missing
keys and wrong types are ``bad_request {reason: invalid_args}``; an unknown op is
``bad_request {reason: unknown_op}``) and returns them as a plain dict with every default
filled in, which is what :meth:`runtime.daemon.config.Backend.handle` receives.

Each op is declared once, in :data:`OP_TABLE`: its argument Struct (``op_args``), its
route (who serves it), its time limit, its waiting rule and where its ids live (minted
here, once, for the gateway: :func:`with_ids`). The gateway answers the ``gateway`` ops itself
(``status`` merges the backend's own); ``subscribe`` is the one ``stream`` op; the backend
serves the ``daemon`` ops from the journal and sends the others down the actor tree, where
the Supervisor, the Project and the Conversation each read their route from the table.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any, Literal

import msgspec

from runtime.errors import BadRequestError, RoostError
from runtime.wire.op_args import (
    PROJECTION_KEYS,
    Args,
    CallArgs,
    CancelArgs,
    ConversationArgs,
    DeleteProjectArgs,
    InboundEvent,
    InjectFaultArgs,
    ListProjectsArgs,
    ListToolsArgs,
    NoArgs,
    ProjectArgs,
    ProjectEventsArgs,
    ProjectionArgs,
    ProtocolArgs,
    RejectArgs,
    ReportArgs,
    RunToolArgs,
    SendEventArgs,
    StartConversationArgs,
    StartProjectArgs,
    SubscribeArgs,
    TimelineArgs,
    ToolMeta,
    ToolRequest,
)

__all__ = [
    "ACTOR_ROUTES",
    "DEFAULT_OP_TIMEOUT_S",
    "GATEWAY_OPS",
    "OPS",
    "OP_ARGS",
    "OP_TABLE",
    "PROJECTION_KEYS",
    "STREAM_OPS",
    "Args",
    "InboundEvent",
    "ListToolsArgs",
    "Op",
    "Route",
    "ToolMeta",
    "ToolRequest",
    "event_type_of",
    "minted_correlation",
    "minted_idempotency_key",
    "new_idempotency_key",
    "normalize_event",
    "op_timeout_s",
    "route_of",
    "validate_args",
    "waits_for_turn",
    "with_ids",
]

DEFAULT_OP_TIMEOUT_S = 60.0
"""Seconds a request may take inside the daemon unless its op says otherwise."""


Route = Literal["gateway", "stream", "daemon", "supervisor", "project", "conversation"]
"""Who serves an op: the gateway itself, a stream, the daemon's backend (from the
journal), or an actor: the Supervisor, the project's Project actor, or the conversation's
Conversation actor (the requests for an actor go down the tree to it)."""

ACTOR_ROUTES: frozenset[str] = frozenset({"supervisor", "project", "conversation"})
"""Routes served by the actor tree."""


def _user_message_wait(args: dict[str, Any]) -> bool:
    event = args.get("event")
    return (
        bool(args.get("wait")) and isinstance(event, dict) and event.get("type") == "user.message"
    )


def _wait_timeout(args: dict[str, Any]) -> float:
    if not args.get("wait"):
        return 0.0
    wait = args.get("wait_timeout_s", 60.0)
    return float(wait) if isinstance(wait, int | float) else 60.0


class Op(msgspec.Struct, frozen=True, kw_only=True):
    """One operation, declared once: its arguments, its route, its time and waiting rules."""

    args: type[Args]
    """The Struct its arguments must match."""
    route: Route
    """Who serves it."""
    timeout_s: float = DEFAULT_OP_TIMEOUT_S
    """Seconds it may take inside the daemon."""
    extra_timeout: Callable[[dict[str, Any]], float] | None = None
    """Seconds added to ``timeout_s`` for these arguments (``send_event``'s wait)."""
    waits: Callable[[dict[str, Any]], bool] | None = None
    """Whether a request is answered at the end of the turn it starts, not at commit."""
    event_type: str | None = None
    """For a conversation op that is an inbound event: that event's type."""
    client: bool = True
    """False for an op only the daemon asks its actors (``live_status``)."""
    correlation: tuple[str, ...] | None = None
    """Where in the arguments the correlation id of the event it records lives; the
    gateway mints one there when the client gave none (:func:`with_ids`). An op whose
    Struct has no such field (``start_conversation``, ``stop_conversation``) always gets
    one minted: the client cannot choose it."""
    idempotency: tuple[str, ...] | None = None
    """Where its idempotency key lives; minted by the gateway when the client gave none."""


_CORRELATION = ("correlation_id",)

OP_TABLE: dict[str, Op] = {
    "ping": Op(args=NoArgs, route="gateway"),
    "status": Op(args=NoArgs, route="gateway"),
    "shutdown": Op(args=NoArgs, route="gateway"),
    "start_project": Op(args=StartProjectArgs, route="supervisor", correlation=_CORRELATION),
    "stop_project": Op(args=ProjectArgs, route="supervisor", correlation=_CORRELATION),
    "list_projects": Op(args=ListProjectsArgs, route="supervisor"),
    "delete_project": Op(args=DeleteProjectArgs, route="supervisor", timeout_s=600.0),
    "diagnostics": Op(args=ProjectArgs, route="daemon"),
    "list_tools": Op(args=ListToolsArgs, route="project"),
    "describe_project": Op(args=ProjectArgs, route="project"),
    "check_protocol": Op(args=ProtocolArgs, route="project", correlation=_CORRELATION),
    "run_tool": Op(
        args=RunToolArgs, route="project", correlation=("request", "meta", "correlation_id")
    ),
    "start_conversation": Op(args=StartConversationArgs, route="project", correlation=_CORRELATION),
    "live_status": Op(args=ProjectArgs, route="project", client=False),
    "inject_fault": Op(args=InjectFaultArgs, route="project"),
    "stop_conversation": Op(args=ConversationArgs, route="conversation", correlation=_CORRELATION),
    "send_event": Op(
        args=SendEventArgs,
        route="conversation",
        extra_timeout=_wait_timeout,
        waits=_user_message_wait,
        correlation=("event", "correlation_id"),
        idempotency=("idempotency_key",),
    ),
    "cancel": Op(
        args=CancelArgs,
        route="conversation",
        event_type="conversation.cancel",
        correlation=_CORRELATION,
    ),
    "resume": Op(
        args=ConversationArgs,
        route="conversation",
        event_type="conversation.resume",
        correlation=_CORRELATION,
    ),
    "approve": Op(
        args=CallArgs, route="conversation", event_type="tool.approved", correlation=_CORRELATION
    ),
    "reject": Op(
        args=RejectArgs, route="conversation", event_type="tool.rejected", correlation=_CORRELATION
    ),
    "get_projection": Op(args=ProjectionArgs, route="conversation"),
    "incident_timeline": Op(args=TimelineArgs, route="daemon"),
    "incident_report": Op(args=ReportArgs, route="daemon", timeout_s=300.0),
    "project_events": Op(args=ProjectEventsArgs, route="daemon"),
    "verify": Op(args=ProjectArgs, route="daemon", timeout_s=3600.0),
    "subscribe": Op(args=SubscribeArgs, route="stream"),
}
"""Every op, declared once (``live_status`` is the daemon's own, not a client's)."""

OP_ARGS: dict[str, type[Args]] = {name: op.args for name, op in OP_TABLE.items() if op.client}
"""Every client op and the Struct its arguments must match."""

OPS: frozenset[str] = frozenset(OP_ARGS)
"""Every op name."""

GATEWAY_OPS: frozenset[str] = frozenset(n for n in OPS if OP_TABLE[n].route == "gateway")
"""Ops the gateway answers itself."""

STREAM_OPS: frozenset[str] = frozenset(n for n in OPS if OP_TABLE[n].route == "stream")
"""Ops answered with a stream of event frames."""


def route_of(op: str) -> str | None:
    """Who serves ``op`` (:data:`Route`), or None for an unknown op."""
    spec = OP_TABLE.get(op)
    return spec.route if spec is not None else None


def event_type_of(op: str) -> str | None:
    """The inbound event type a conversation op stands for, if it is one."""
    spec = OP_TABLE.get(op)
    return spec.event_type if spec is not None else None


_EVENT_KEYS = ("type", "data", "correlation_id")


def normalize_event(event: dict[str, Any]) -> dict[str, Any]:
    """Return ``event`` in the wire shape ``{type, data, correlation_id}``.

    ``meta.correlation_id`` moves to the top level (SPEC's example); any other top-level
    key (``content``, ``llm``...) is a payload field and moves into ``data``. Raises
    ``BadRequestError`` for a missing ``type``, a non-object ``data`` or ``meta``, an
    unknown ``meta`` key, or a payload field given twice.
    """
    if not isinstance(event, dict) or not isinstance(event.get("type"), str):
        raise BadRequestError("an event must be an object with a string 'type'")
    data = event.get("data", {})
    meta = event.get("meta", {})
    if not isinstance(data, dict) or not isinstance(meta, dict):
        raise BadRequestError("an event's 'data' and 'meta' must be objects")
    unknown_meta = sorted(set(meta) - {"correlation_id"})
    if unknown_meta:
        raise BadRequestError(
            f"unknown event meta keys {unknown_meta}; only correlation_id is allowed",
            reason="unexpected_meta",
            keys=unknown_meta,
        )
    data = dict(data)
    for key, value in event.items():
        if key in (*_EVENT_KEYS, "meta"):
            continue
        if key in data:
            raise BadRequestError(
                f"event field {key!r} given both at the top level and in data",
                reason="duplicate_field",
                key=key,
            )
        data[key] = value
    correlation_id = event.get("correlation_id") or meta.get("correlation_id")
    return {"type": event["type"], "data": data, "correlation_id": correlation_id}


def validate_args(op: str, args: Any) -> dict[str, Any]:
    """Check ``args`` for ``op``; return them as a dict with every default filled in.

    Raises :class:`BadRequestError` with ``reason`` ``unknown_op`` (and ``op``) or
    ``invalid_args`` (with ``op`` and msgspec's ``problem``, e.g. "Object missing required
    field `root`").
    """
    cls = OP_ARGS.get(op)
    if cls is None:
        known = ", ".join(sorted(OPS))
        raise BadRequestError(
            f"unknown operation {op!r}; known operations: {known}", reason="unknown_op", op=op
        )
    if not isinstance(args, dict):
        raise BadRequestError(
            f"arguments of {op} must be an object, got {type(args).__name__}",
            reason="invalid_args",
            op=op,
            problem="args is not an object",
        )
    try:
        checked = msgspec.convert(args, cls)
    except msgspec.ValidationError as e:
        raise BadRequestError(
            f"invalid arguments for {op}: {e}", reason="invalid_args", op=op, problem=str(e)
        ) from e
    result: dict[str, Any] = msgspec.to_builtins(checked)
    return result


def new_idempotency_key() -> str:
    """A fresh idempotency key (a UUID): the client's for its retries, or the gateway's."""
    return str(uuid.uuid4())


def _mint(args: dict[str, Any], path: tuple[str, ...], new: Callable[[], str]) -> dict[str, Any]:
    """``args`` with ``new()`` at ``path`` when nothing is there (copies, never mutates)."""
    *parents, key = path
    copy = dict(args)
    holder = copy
    for name in parents:
        inner = holder.get(name)
        if not isinstance(inner, dict):
            return args
        holder[name] = dict(inner)
        holder = holder[name]
    if holder.get(key) in (None, ""):
        holder[key] = new()
        return copy
    return args


def with_ids(op: str, args: dict[str, Any]) -> dict[str, Any]:
    """``args`` with a fresh correlation id and idempotency key where the client gave none.

    Only where ``op`` has them. The one place the daemon mints a request's correlation id
    and idempotency key (the gateway calls it once the ids the client gave were checked);
    the caller's dict is left alone. Ops that record neither come back unchanged. Below
    the gateway they are only read (:func:`minted_correlation`, :func:`minted_idempotency_key`).
    """
    # the events package is the daemon's: a client (``roost send``) imports this module
    # without it (the ``thin-client`` contract in pyproject.toml)
    from events.envelope import new_correlation_id  # noqa: PLC0415

    spec = OP_TABLE.get(op)
    if spec is None:
        return args
    if spec.correlation is not None:
        args = _mint(args, spec.correlation, new_correlation_id)
    if spec.idempotency is not None:
        args = _mint(args, spec.idempotency, new_idempotency_key)
    return args


def _minted(op: str, args: dict[str, Any], path: tuple[str, ...] | None, what: str) -> str:
    value: Any = args
    for name in path or ():
        value = value.get(name) if isinstance(value, dict) else None
    if path is None or not isinstance(value, str) or not value:
        raise RoostError(
            f"{op} reached {what} without its {path[-1] if path else what}: the gateway mints "
            "it, so this request did not come through the gateway",
            reason=f"missing_{path[-1] if path else 'id'}",
            op=op,
        )
    return value


def minted_correlation(op: str, args: dict[str, Any]) -> str:
    """The correlation id the gateway gave ``op``'s request (``internal_error`` when none)."""
    spec = OP_TABLE.get(op)
    return _minted(op, args, spec.correlation if spec else None, "the runtime")


def minted_idempotency_key(op: str, args: dict[str, Any]) -> str:
    """The idempotency key the gateway gave ``op``'s request (``internal_error`` when none)."""
    spec = OP_TABLE.get(op)
    return _minted(op, args, spec.idempotency if spec else None, "the runtime")


def waits_for_turn(op: str, args: dict[str, Any]) -> bool:
    """Whether a validated request sends a ``user.message`` and waits for its turn to end.

    Such a request is answered with the turn's outcome; the daemon gives it a correlation
    id when the client gave none, and the Project remembers it (a conversation restarted
    after a crash answers it).
    """
    spec = OP_TABLE.get(op)
    return spec is not None and spec.waits is not None and spec.waits(args)


def op_timeout_s(op: str, args: dict[str, Any]) -> float:
    """Seconds the daemon gives a request before its deadline (the client waits a bit longer).

    ``send_event`` with ``wait`` gets its ``wait_timeout_s`` on top of the default; one
    that waits for the turn it starts (a ``user.message``) gets its ``wait_timeout_s``
    alone: the client gives up on the turn after that many seconds (``timeout``).
    """
    spec = OP_TABLE.get(op)
    if spec is None:
        return DEFAULT_OP_TIMEOUT_S
    if spec.waits is not None and spec.waits(args) and spec.extra_timeout is not None:
        return spec.extra_timeout(args)
    extra = spec.extra_timeout(args) if spec.extra_timeout is not None else 0.0
    return spec.timeout_s + extra
