"""``roost approve --wait``: follow an approved call's turn until it is over.

``send --wait`` is answered by the conversation when its turn ends; an approval is
answered once ``tool.approved`` is committed, and the turn it belongs to goes on. This
follows that turn on the event stream (``subscribe``, from the approval's ``seq``, so no
event is missed) and returns what ``send --wait`` would have returned at that point: the
turn's outcome (``llm.completed``, ``llm.failed``, ``budget.exceeded`` with the event's
data) or ``awaiting_approval`` when the turn stopped again for calls a person must decide.
The caller prints it and exits as ``send --wait`` does (``commands.turn_failure``).
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

from runtime.client.connection import Client
from runtime.errors import RequestTimeoutError, RoostError

if TYPE_CHECKING:  # a type only: the client does not load the events package
    from events.view_types import PendingToolCall

__all__ = ["TURN_END_TYPES", "wait_for_turn"]

TURN_END_TYPES = frozenset({"llm.completed", "llm.failed", "budget.exceeded"})
"""Events that end a turn (``events.conversation_fold``)."""


def _awaiting(pending: list[PendingToolCall]) -> list[str] | None:
    """The call ids when every pending call awaits a person's decision, else None."""
    if not pending or any(c["status"] != "awaiting_approval" for c in pending):
        return None
    return sorted(c["call_id"] for c in pending)


def wait_for_turn(
    client: Client,
    project_id: str,
    conversation_id: str,
    ack: dict[str, Any],
    *,
    deadline: float,
    timeout_s: float,
) -> dict[str, Any]:
    """Follow the turn of ``ack`` (an approval's ``{seq, event_id, correlation_id}``).

    Returns ``ack`` with ``outcome`` and ``outcome_data`` once the turn ended or awaits
    approval again. Raises ``timeout`` (``RequestTimeoutError``) at ``deadline`` (a
    ``time.monotonic()`` value; ``timeout_s`` is only for the message) and
    ``daemon_unreachable`` or ``not_seen`` (as ``roost tail --until``) when the project,
    the conversation or the daemon stops first.
    """
    correlation = ack.get("correlation_id")
    after = int(ack.get("seq") or 0)
    expired = threading.Event()
    # The project's stream: its stop (``project.stopped``) is not a conversation's event.
    with client.subscribe(project_id, None, after_seq=after) as stream:

        def expire() -> None:
            expired.set()
            stream.close()

        timer = threading.Timer(max(0.0, deadline - time.monotonic()), expire)
        timer.daemon = True
        timer.start()
        try:
            for event in stream:
                kind = str(event.get("type"))
                mine = event.get("conversation_id") == conversation_id
                if kind == "project.stopped" or (mine and kind == "conversation.stopped"):
                    stopped = "project" if kind == "project.stopped" else "conversation"
                    raise _StreamEnded(
                        f"the {stopped} stopped (seq {event.get('seq')}) before the turn "
                        f"{correlation} ended",
                        correlation_id=correlation,
                        seq=event.get("seq"),
                    )
                if not mine or event.get("correlation_id") != correlation:
                    continue
                if kind in TURN_END_TYPES:
                    return {**ack, "outcome": kind, "outcome_data": event.get("data") or {}}
                if kind.startswith("tool."):  # a call was decided, asked about or ended
                    pending: list[PendingToolCall] = client.get_projection(
                        project_id, conversation_id, "pending_tool_calls"
                    )
                    call_ids = _awaiting(pending)
                    if call_ids is not None:
                        data = {"call_ids": call_ids}
                        return {**ack, "outcome": "awaiting_approval", "outcome_data": data}
        finally:
            timer.cancel()
    if expired.is_set():
        raise RequestTimeoutError(  # worded as send --wait's (runtime.daemon.backend)
            f"turn {correlation} did not end within the {timeout_s:g} s waited for it "
            f"(--wait-timeout); it goes on: follow it with `roost tail {project_id} "
            f"{conversation_id} --correlation-id {correlation}` or cancel it with "
            f"`roost cancel {project_id} {conversation_id}`",
            correlation_id=correlation,
            timeout_s=timeout_s,
        )
    raise _StreamEnded(
        f"the event stream of {project_id}/{conversation_id} ended before the turn "
        f"{correlation} did (the project or the daemon stopped)",
        correlation_id=correlation,
    )


class _StreamEnded(RoostError):
    code = "not_seen"
