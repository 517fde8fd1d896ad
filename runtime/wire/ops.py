"""The daemon's operations, each declared once in :data:`OP_TABLE`.

A row holds the op's argument Struct (``op_args``), its route (who serves it), its time
limit, its waiting rule and where its ids live (checked by ``runtime.guard.ids``, minted
here by :func:`with_ids`). :func:`validate_args` turns a request's arguments into that
Struct (``bad_request`` with ``reason`` ``unknown_op`` or ``invalid_args``); a
:class:`~runtime.wire.op_args.Call` carries it down, and each level serves the op with its
method ``op_<name>`` (``runtime.wire.dispatch``). What a client needs of the table without
loading msgspec (time limits, ``send_event``'s waiting rule, the event's wire shape, a fresh
idempotency key) is declared in ``runtime.wire.client_ops`` and taken from there.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal

import msgspec

from runtime.errors import BadRequestError
from runtime.wire.client_ops import (
    DEFAULT_OP_TIMEOUT_S,
    OP_TIMEOUTS_S,
    new_idempotency_key,
    normalize_event,
    user_message_wait,
    wait_timeout,
)
from runtime.wire.op_args import (
    PROJECTION_KEYS,
    A,
    Args,
    Call,
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
    "Call",
    "IdKind",
    "IdPath",
    "InboundEvent",
    "Level",
    "ListToolsArgs",
    "Op",
    "Route",
    "ToolMeta",
    "ToolRequest",
    "event_type_of",
    "id_at",
    "new_idempotency_key",
    "normalize_event",
    "op_timeout_s",
    "route_of",
    "validate_args",
    "waits_for_turn",
    "with_ids",
]

Route = Literal["gateway", "stream", "daemon", "supervisor", "project", "conversation"]
"""Who serves an op: the gateway, a stream, the daemon's backend (from the journal), or an
actor of the tree (the Supervisor, the project's Project, the conversation's Conversation)."""

Level = Literal["gateway", "daemon", "supervisor", "project", "conversation"]
"""A place a request passes on its way down; each serves an op with its ``op_<name>``."""

_LEVELS: tuple[Level, ...] = ("gateway", "daemon", "supervisor", "project", "conversation")

ACTOR_ROUTES: frozenset[str] = frozenset({"supervisor", "project", "conversation"})
"""Routes served by the actor tree."""

IdKind = Literal["project_id", "conversation_id", "correlation_id", "idempotency_key"]
"""The ids a client may choose, each with its own shape (``runtime.guard.ids``)."""

IdPath = tuple[IdKind, tuple[str, ...]]
"""An id a client may choose, and where in the arguments it lives."""


class Op(msgspec.Struct, frozen=True, kw_only=True):
    """One op: its arguments, route, ids, time and waiting rules; served by ``op_<name>``."""

    args: type[Args]
    """The Struct its arguments must match; handlers receive it as that Struct (:class:`Call`)."""
    route: Route
    """Who serves it."""
    reaches: tuple[Level, ...] = ()
    """Levels below its route that serve it too (``run_tool`` naming a conversation)."""
    timeout_s: float = DEFAULT_OP_TIMEOUT_S
    """Seconds it may take inside the daemon."""
    extra_timeout: Callable[[Any], float] | None = None
    """Seconds added to ``timeout_s`` for these arguments (``send_event``'s wait)."""
    waits: Callable[[Any], bool] | None = None
    """Whether a request is answered at the end of the turn it starts, not at commit."""
    event_type: str | None = None
    """For a conversation op that is an inbound event: that event's type."""
    client: bool = True
    """False for an op only the daemon asks its actors (``live_status``)."""
    limited: bool = True
    """Counted against ``max_inflight``; ``ping`` and ``shutdown`` are answered at once."""
    correlated: bool = False
    """It records events under a correlation id: the client's (at its ``correlation_id``
    path in :attr:`ids`) or one the gateway mints (:func:`with_ids`). An op with no such
    path (``start_conversation``, ``stop_conversation``) always gets one minted."""
    ids: tuple[IdPath, ...] = ()
    """The ids a client may choose and where they live: checked by the gateway
    (``runtime.guard.ids``); an ``idempotency_key`` is minted when the client gave none."""

    def levels(self) -> tuple[Level, ...]:
        """Every level a request for this op may pass, from the gateway down."""
        last = self.route if self.route in _LEVELS else "daemon"
        return (*_LEVELS[: _LEVELS.index(last) + 1], *self.reaches)

    def serves(self, level: Level) -> bool:
        """Whether ``level`` answers this op itself (rather than passing it down)."""
        return level == self.route or level in self.reaches

    def id_path(self, kind: IdKind) -> tuple[str, ...] | None:
        """Where in the arguments the client may give the id ``kind``, or None."""
        return next((path for k, path in self.ids if k == kind), None)


_CORRELATION: tuple[IdPath, ...] = (("correlation_id", ("correlation_id",)),)

OP_TABLE: dict[str, Op] = {
    "ping": Op(args=NoArgs, route="gateway", limited=False),
    "status": Op(args=NoArgs, route="gateway"),
    "shutdown": Op(args=NoArgs, route="gateway", limited=False),
    "start_project": Op(
        args=StartProjectArgs,
        route="supervisor",
        correlated=True,
        ids=(("project_id", ("project_id",)),),
    ),
    "stop_project": Op(args=ProjectArgs, route="supervisor", correlated=True),
    "list_projects": Op(args=ListProjectsArgs, route="supervisor"),
    "delete_project": Op(
        args=DeleteProjectArgs, route="supervisor", timeout_s=OP_TIMEOUTS_S["delete_project"]
    ),
    "diagnostics": Op(args=ProjectArgs, route="daemon"),
    "list_tools": Op(args=ListToolsArgs, route="project"),
    "describe_project": Op(args=ProjectArgs, route="project"),
    "check_protocol": Op(args=ProtocolArgs, route="project", correlated=True, ids=_CORRELATION),
    "run_tool": Op(
        args=RunToolArgs,
        route="project",
        reaches=("conversation",),
        correlated=True,
        ids=(("correlation_id", ("request", "meta", "correlation_id")),),
    ),
    "start_conversation": Op(
        args=StartConversationArgs,
        route="project",
        correlated=True,
        ids=(("conversation_id", ("conversation_id",)),),
    ),
    "live_status": Op(args=ProjectArgs, route="project", client=False),
    "inject_fault": Op(args=InjectFaultArgs, route="project"),
    "stop_conversation": Op(args=ConversationArgs, route="conversation", correlated=True),
    "send_event": Op(
        args=SendEventArgs,
        route="conversation",
        extra_timeout=wait_timeout,
        waits=user_message_wait,
        correlated=True,
        ids=(
            ("correlation_id", ("event", "correlation_id")),
            ("idempotency_key", ("idempotency_key",)),
        ),
    ),
    "cancel": Op(
        args=CancelArgs,
        route="conversation",
        event_type="conversation.cancel",
        correlated=True,
        ids=_CORRELATION,
    ),
    "resume": Op(
        args=ConversationArgs,
        route="conversation",
        event_type="conversation.resume",
        correlated=True,
    ),
    "approve": Op(args=CallArgs, route="conversation", event_type="tool.approved", correlated=True),
    "reject": Op(
        args=RejectArgs, route="conversation", event_type="tool.rejected", correlated=True
    ),
    "get_projection": Op(args=ProjectionArgs, route="conversation"),
    "incident_timeline": Op(args=TimelineArgs, route="daemon"),
    "incident_report": Op(
        args=ReportArgs, route="daemon", timeout_s=OP_TIMEOUTS_S["incident_report"]
    ),
    "project_events": Op(args=ProjectEventsArgs, route="daemon"),
    "verify": Op(args=ProjectArgs, route="daemon", timeout_s=OP_TIMEOUTS_S["verify"]),
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


def validate_args(op: str, args: Any) -> Args:
    """Check ``args`` for ``op``; return them as its Struct with every default filled in.

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
        return msgspec.convert(args, cls)
    except msgspec.ValidationError as e:
        raise BadRequestError(
            f"invalid arguments for {op}: {e}", reason="invalid_args", op=op, problem=str(e)
        ) from e


def id_at(args: Any, path: tuple[str, ...] | None) -> Any:
    """The value at ``path`` in an op's arguments Struct (None when absent)."""
    value = args if path else None
    for name in path or ():
        value = getattr(value, name, None)
    return value


def _put(args: A, path: tuple[str, ...] | None, value: str | None) -> A:
    """``args`` with ``value`` at ``path`` (a copy; unchanged without a path)."""
    if not path or value is None:
        return args
    name, *rest = path
    inner = value if not rest else _put(getattr(args, name), tuple(rest), value)
    return msgspec.structs.replace(args, **{name: inner})


def with_ids(op: str, args: A) -> Call[A]:
    """The request ``op`` with ``args``, with the ids the gateway gives it.

    A ``correlated`` op gets the client's correlation id, or a fresh one (written at its
    path too, when it has one); an op with an ``idempotency_key`` path gets the client's
    key or a fresh one. The one place the daemon mints them (the gateway calls it once the
    ids the client gave were checked); below the gateway they are only read
    (:meth:`Call.correlation`, :meth:`Call.idempotency`).
    """
    # the events package is the daemon's: a client (``roost send``) imports this module
    # without it (the ``thin-client`` contract in pyproject.toml)
    from events.envelope import new_correlation_id  # noqa: PLC0415

    spec = OP_TABLE[op]
    correlation_path = spec.id_path("correlation_id")
    key_path = spec.id_path("idempotency_key")
    correlation = (
        (id_at(args, correlation_path) or new_correlation_id()) if spec.correlated else None
    )
    key = (id_at(args, key_path) or new_idempotency_key()) if key_path else None
    args = _put(_put(args, correlation_path, correlation), key_path, key)
    return Call(op=op, args=args, correlation_id=correlation, idempotency_key=key)


def waits_for_turn(call: Call[Any]) -> bool:
    """Whether a request sends a ``user.message`` and waits for its turn to end.

    Such a request is answered with the turn's outcome; the daemon gives it a correlation
    id when the client gave none, and the Project remembers it (a conversation restarted
    after a crash answers it).
    """
    spec = OP_TABLE.get(call.op)
    return spec is not None and spec.waits is not None and spec.waits(call.args)


def op_timeout_s(op: str, args: Args | Mapping[str, object]) -> float:
    """Seconds the daemon gives a request before its deadline (the client waits a bit longer).

    ``send_event`` with ``wait`` gets its ``wait_timeout_s`` on top of the default; one
    that waits for the turn it starts (a ``user.message``) gets its ``wait_timeout_s``
    alone: the client gives up on the turn after that many seconds (``timeout``). The
    arguments are the op's Struct, or a client's dict.
    """
    spec = OP_TABLE.get(op)
    if spec is None:
        return DEFAULT_OP_TIMEOUT_S
    if spec.extra_timeout is None:
        return spec.timeout_s
    if spec.waits is not None and spec.waits(args):
        return spec.extra_timeout(args)
    return spec.timeout_s + spec.extra_timeout(args)
