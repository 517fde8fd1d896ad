"""Sends that a full mailbox refuses, and the overflow events a sender records.

:class:`MailboxSends` is the bottom of every Roost actor (``actors.base.RoostActor``): a
send its target's mailbox refuses answers the request's ``reply_to`` with ``overloaded``
at once (``actors.thespian.mailbox``), and each overflow this process saw becomes an
``actor.mailbox_overflow`` event.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from thespian.actors import Actor

from actors.messages import Reply
from actors.thespian import mailbox
from events import catalog as ev
from events.envelope import NewEvent, format_at, new_correlation_id, new_event
from runtime.errors import OverloadedError, wire_error

__all__ = ["MailboxSends", "error_reply", "utc_now"]


def utc_now() -> datetime:
    """The runtime clock (UTC)."""
    return datetime.now(UTC)


def error_reply(error: BaseException) -> Reply:
    """A :class:`Reply` carrying ``error`` in its wire shape."""
    return Reply(ok=False, error=wire_error(error))


class MailboxSends(Actor):  # type: ignore[misc]
    """Sends that report a refusal, and the recording of mailbox overflows."""

    kind = "actor"
    parent_kind = "parent"
    """What the actor's parent is, to name it in mailbox overflow events."""
    log: Any

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._mailbox_names: dict[str, str] = {}

    def append(self, events: list[NewEvent]) -> Any:
        """Commit ``events`` (``actors.appends.JournalAppends``)."""
        raise NotImplementedError

    def send(self, targetAddr: Any, msg: Any) -> bool:
        """Send ``msg``; False when its mailbox refused it (then answer any ``reply_to``).

        A mailbox whose reader does not read refuses sends once this process has too much
        waiting for it (``actors.thespian.mailbox``); the client then gets ``overloaded`` instead
        of waiting out its timeout.
        """
        refused = mailbox.refusals()
        super().send(targetAddr, msg)
        if mailbox.refusals() == refused:
            return True
        reply_to = getattr(msg, "reply_to", None)
        if reply_to is None:
            return False
        name = self.mailbox_name(targetAddr)
        self.log.warning("send_refused", target=name, message=type(msg).__name__)
        error = OverloadedError(
            f"the mailbox of {name} is full (it is not reading); retry later",
            reason="mailbox_full",
            actor=name,
        )
        super().send(reply_to, error_reply(error))
        return False

    def record_overflows(self) -> None:
        """Append an ``actor.mailbox_overflow`` for each overflow this process reported."""
        for overflow in mailbox.take_overflows():
            try:
                self._record_overflow(overflow)
            except Exception:
                self.log.exception("mailbox_overflow_not_recorded")

    def _record_overflow(self, overflow: mailbox.Overflow) -> None:
        key = str(overflow.peer)
        name = self._mailbox_names.get(key) or self.mailbox_name(overflow.peer)
        if overflow.phase == "full":
            self._mailbox_names[key] = name  # the child may be gone when it clears
        else:
            self._mailbox_names.pop(key, None)
        project_id = self.overflow_scope(name)
        if project_id is None:
            return
        payload = ev.ActorMailboxOverflow(
            actor=name,
            sender=self.kind,
            phase=overflow.phase,
            backlog_bytes=overflow.backlog_bytes,
            limit_bytes=overflow.limit_bytes,
            refused=overflow.refused,
            duration_ms=overflow.duration_ms,
        )
        event = new_event(
            payload,
            project_id=project_id,
            at=format_at(utc_now()),
            correlation_id=new_correlation_id(),
        )
        self.append([event])

    def mailbox_name(self, address: Any) -> str:
        """The name of the actor that reads the mailbox at ``address``."""
        if address is None:
            return "unknown"
        if address == self.myAddress:
            return self.kind
        return self.child_name(address) or self.parent_kind

    def child_name(self, address: Any) -> str | None:
        """The name of the child at ``address`` (subclasses that have children)."""
        return None

    def overflow_scope(self, name: str) -> str | None:
        """The project whose record gets an overflow of ``name``'s mailbox, or None.

        None: nowhere (it is logged). By default the project this actor serves, when it
        has one. The event is project-level, like ``actor.crashed``: a conversation's own
        stream only holds what its core appended (its live projection is compared with
        the journal); ``actor: "conversation:ID"`` puts it in that conversation's
        incident views.
        """
        setup = getattr(self, "setup", None)
        project_id = getattr(setup, "project_id", None) or getattr(self, "project_id", None)
        return str(project_id) if project_id else None
