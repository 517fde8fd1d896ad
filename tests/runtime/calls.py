"""Requests as the gateway hands them down: the op's arguments Struct and the ids it minted."""

from __future__ import annotations

from typing import Any

import msgspec

from runtime.wire.op_args import ConversationArgs
from runtime.wire.ops import OP_TABLE, Call, with_ids


def call_of(op: str, args: dict[str, Any] | None = None, **more: Any) -> Call[Any]:
    """``op``'s request as the gateway passes it on.

    The project is ``p1`` and the conversation ``c1`` unless given; a ``correlation_id`` the
    op's Struct has no field for stands for the one the gateway minted.
    """
    spec = OP_TABLE[op]
    fields = {f.name for f in msgspec.structs.fields(spec.args)}
    given: dict[str, Any] = {"project_id": "p1"} if "project_id" in fields else {}
    if issubclass(spec.args, ConversationArgs):
        given["conversation_id"] = "c1"
    given |= {**(args or {}), **more}
    minted = given.pop("correlation_id", None) if "correlation_id" not in fields else None
    call = with_ids(op, msgspec.convert(given, spec.args))
    return msgspec.structs.replace(call, correlation_id=minted) if minted else call
