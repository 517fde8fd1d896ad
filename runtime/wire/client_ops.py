"""What a client needs of the op table, without it: time limits, the event shape, keys.

:data:`runtime.wire.ops.OP_TABLE` declares every op with its argument Struct (msgspec),
which a client does not load: the daemon validates every request it reads. The few rules a
client applies before sending are here, and the table takes them from here: each op's
time limit (:data:`OP_TIMEOUTS_S`, :func:`op_timeout_s`; ``tests/runtime/wire`` checks
that both give the same limit for every op), ``send_event``'s waiting rule, the wire shape
of an inbound event (:func:`normalize_event`) and a fresh idempotency key.
"""

from __future__ import annotations

import os
from typing import Any

from runtime.errors import BadRequestError

__all__ = [
    "DEFAULT_OP_TIMEOUT_S",
    "OP_TIMEOUTS_S",
    "arg",
    "new_idempotency_key",
    "normalize_event",
    "op_timeout_s",
    "user_message_wait",
    "wait_timeout",
]

DEFAULT_OP_TIMEOUT_S = 60.0
"""Seconds a request may take inside the daemon unless its op says otherwise."""

OP_TIMEOUTS_S: dict[str, float] = {
    "delete_project": 600.0,
    "incident_report": 300.0,
    "verify": 3600.0,
}
"""The ops whose time limit is not :data:`DEFAULT_OP_TIMEOUT_S`, and theirs."""


def arg(args: Any, name: str, default: Any = None) -> Any:
    """A field of an op's arguments: its Struct's, or (a client's) its dict's."""
    return args.get(name, default) if isinstance(args, dict) else getattr(args, name, default)


def user_message_wait(args: Any) -> bool:
    """Whether a ``send_event`` waits for the turn its ``user.message`` starts."""
    return bool(arg(args, "wait")) and arg(arg(args, "event"), "type") == "user.message"


def wait_timeout(args: Any) -> float:
    """The seconds a ``send_event`` with ``wait`` waits (its ``wait_timeout_s``), else 0."""
    if not arg(args, "wait"):
        return 0.0
    wait = arg(args, "wait_timeout_s", 60.0)
    return float(wait) if isinstance(wait, int | float) else 60.0


def op_timeout_s(op: str, args: Any) -> float:
    """Seconds the daemon gives a request before its deadline (the client waits a bit longer).

    ``send_event`` with ``wait`` gets its ``wait_timeout_s`` on top of the default; one
    that waits for the turn it starts (a ``user.message``) gets its ``wait_timeout_s``
    alone. The arguments are a client's dict, or the op's Struct.
    """
    limit = OP_TIMEOUTS_S.get(op, DEFAULT_OP_TIMEOUT_S)
    if op != "send_event":
        return limit
    return wait_timeout(args) if user_message_wait(args) else limit + wait_timeout(args)


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
    fields = {key: value for key, value in event.items() if key not in (*_EVENT_KEYS, "meta")}
    twice = [key for key in fields if key in data]
    if twice:
        raise BadRequestError(
            f"event field {twice[0]!r} given both at the top level and in data",
            reason="duplicate_field",
            key=twice[0],
        )
    data = {**data, **fields}
    correlation_id = event.get("correlation_id") or meta.get("correlation_id")
    return {"type": event["type"], "data": data, "correlation_id": correlation_id}


def new_idempotency_key() -> str:
    """A fresh idempotency key: a random (version 4) UUID, the client's for its retries.

    Spelt as ``str(uuid.uuid4())`` is, from 16 random bytes, without loading ``uuid`` (which
    loads ``platform``): the gateway mints its own with this too.
    """
    raw = bytearray(os.urandom(16))
    raw[6] = (raw[6] & 0x0F) | 0x40  # version 4
    raw[8] = (raw[8] & 0x3F) | 0x80  # the RFC 4122 variant
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
