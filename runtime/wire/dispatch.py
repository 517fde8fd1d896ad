"""Each level's dispatch, built from the op table: an op is served by a method named after it.

A request passes levels on its way down (:data:`runtime.wire.ops.Level`: the gateway, the
daemon's backend, the Supervisor, the Project, the Conversation). Each level serves the ops
its route reaches with its methods ``op_<name>``; :func:`op_handlers` builds the dict it
dispatches with, once, and fails (at import or start, never on a request) when a method is
missing or names no op. No ``if op == ...`` chain exists to drift from the table.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import msgspec

from runtime.wire.op_args import Args, Call
from runtime.wire.ops import ACTOR_ROUTES, OP_TABLE, Level

__all__ = ["Handlers", "call_from_wire", "op_handlers"]


def call_from_wire(call: Call[Any]) -> Call[Args]:
    """A request decoded from a frame (its arguments a map), with its op's Struct again."""
    args = msgspec.convert(call.args, OP_TABLE[call.op].args)
    return Call(
        op=call.op,
        args=args,
        correlation_id=call.correlation_id,
        idempotency_key=call.idempotency_key,
    )


Handlers = dict[str, Callable[..., Any]]
"""Op name → the handler one level serves it with."""


def op_handlers(owner: Any, level: Level, *, forward: Callable[..., Any] | None = None) -> Handlers:
    """Each op that reaches ``level``, and the method ``op_<name>`` of ``owner`` serving it.

    An op ``level`` only passes down is served by ``forward`` unless ``owner`` has a method
    of its own for it; without ``forward``, every op needs one. Raises ``TypeError`` (at
    import or start, never on a request) when a method is missing or one names no such op.
    """
    wanted = {
        name: op
        for name, op in OP_TABLE.items()
        if op.route != "stream" and level in op.levels() and (op.client or level in ACTOR_ROUTES)
    }
    stray = sorted(
        name[3:] for name in dir(owner) if name.startswith("op_") and name[3:] not in wanted
    )
    missing = sorted(
        name
        for name, op in wanted.items()
        if not hasattr(owner, "op_" + name) and (op.serves(level) or forward is None)
    )
    if stray or missing:
        raise TypeError(
            f"{getattr(owner, '__name__', type(owner).__name__)} at level {level}: "
            f"no handler for ops {missing}, handlers for no such ops {stray} (runtime.wire.ops)"
        )
    # every name has a method or ``forward`` (checked above)
    return {
        name: cast(Callable[..., Any], getattr(owner, "op_" + name, forward)) for name in wanted
    }
