"""The reply frame to one request the gateway serves.

The request runs under its op's time limit (:func:`runtime.wire.ops.op_timeout_s`) with
its ids bound to every log line; a Roost error becomes its error frame, anything else an
``internal_error``, and a reply larger than ``max_frame_bytes`` a ``reply_too_large``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from runtime.errors import BadRequestError, RoostError
from runtime.logging import bind_context, get_logger
from runtime.wire.ops import Call, op_timeout_s
from runtime.wire.protocol import encode_error, encode_reply, internal_error

__all__ = ["reply_frame"]

log = get_logger("roost.gateway")


def reply_frame(
    request_id: int,
    call: Call[Any],
    handlers: Mapping[str, Callable[[Call[Any], float], Any]],
    max_frame_bytes: int,
) -> bytes:
    """Serve ``call`` with its op's handler (given its deadline); its reply or error frame."""
    op = call.op
    started = time.monotonic()
    with bind_context(
        op=op,
        request_id=request_id,
        project_id=getattr(call.args, "project_id", None),
        conversation_id=getattr(call.args, "conversation_id", None),
        correlation_id=call.correlation_id,
    ):
        try:
            deadline = started + op_timeout_s(op, call.args)
            frame = encode_reply(request_id, handlers[op](call, deadline))
        except RoostError as e:
            log.info("request_failed", code=e.code, message=e.message)
            return encode_error(request_id, e)
        except Exception as e:
            log.exception("request_crashed")
            return encode_error(request_id, internal_error(op, e))
        if len(frame) - 4 > max_frame_bytes:
            log.warning("reply_too_large", size=len(frame) - 4)
            return encode_error(
                request_id,
                BadRequestError(
                    f"the reply to {op} is {len(frame) - 4} bytes, over the "
                    f"{max_frame_bytes}-byte frame limit; ask for less",
                    reason="reply_too_large",
                    size=len(frame) - 4,
                    max=max_frame_bytes,
                ),
            )
        log.debug("request_served", ms=round((time.monotonic() - started) * 1000, 3))
        return frame
