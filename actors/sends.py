"""Sends that a full mailbox refuses, and the overflow events a sender records.

:class:`MailboxSends` is a helper every Roost actor holds (``actors.base.RoostActor``'s
``outbox``): a send its target's mailbox refuses answers the request's ``reply_to`` with
``overloaded`` at once (``actors.thespian.mailbox``), and each overflow this process saw
becomes an ``actor.mailbox_overflow`` event.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Protocol

from actors.messages import Reply
from actors.thespian import mailbox
from events import catalog as ev
from events.envelope import NewEvent, format_at, new_correlation_id, new_event
from runtime.errors import OverloadedError, wire_error

__all__ = ["MailboxSends", "Sender", "error_reply", "utc_now"]


def utc_now() -> datetime:
    """The runtime clock (UTC)."""
    return datetime.now(UTC)


def error_reply(error: BaseException) -> Reply:
    """A :class:`Reply` carrying ``error`` in its wire shape."""
    return Reply(ok=False, error=wire_error(error))


class Sender(Protocol):
    """What :class:`MailboxSends` needs of the actor that owns it (``RoostActor``)."""

    kind: str
    parent_kind: str
    log: Any

    @property
    def myAddress(self) -> Any:
        """The actor's own address."""

    def append(self, events: list[NewEvent]) -> Any:
        """Commit ``events`` (``actors.appends.JournalAppends``)."""

    def child_name(self, address: Any) -> str | None:
        """The name of the child at ``address``, or None."""

    def overflow_scope(self, name: str) -> str | None:
        """The project whose record gets an overflow of ``name``'s mailbox, or None."""


class MailboxSends:
    """Sends that report a refusal, and the recording of mailbox overflows."""

    def __init__(self, owner: Sender, transmit: Callable[[Any, Any], None]) -> None:
        """``transmit(target, message)``: the owner's Thespian send, unchecked."""
        self.owner = owner
        self.transmit = transmit
        self._mailbox_names: dict[str, str] = {}

    def send(self, targetAddr: Any, msg: Any) -> bool:
        """Send ``msg``; False when its mailbox refused it (then answer any ``reply_to``).

        A mailbox whose reader does not read refuses sends once this process has too much
        waiting for it (``actors.thespian.mailbox``); the client then gets ``overloaded`` instead
        of waiting out its timeout.
        """
        refused = mailbox.refusals()
        self.transmit(targetAddr, msg)
        if mailbox.refusals() == refused:
            return True
        reply_to = getattr(msg, "reply_to", None)
        if reply_to is None:
            return False
        name = self.mailbox_name(targetAddr)
        self.owner.log.warning("send_refused", target=name, message=type(msg).__name__)
        error = OverloadedError(
            f"the mailbox of {name} is full (it is not reading); retry later",
            reason="mailbox_full",
            actor=name,
        )
        self.transmit(reply_to, error_reply(error))
        return False

    def record_overflows(self) -> None:
        """Append an ``actor.mailbox_overflow`` for each overflow this process reported."""
        for overflow in mailbox.take_overflows():
            try:
                self._record_overflow(overflow)
            except Exception:
                self.owner.log.exception("mailbox_overflow_not_recorded")

    def _record_overflow(self, overflow: mailbox.Overflow) -> None:
        key = str(overflow.peer)
        name = self._mailbox_names.get(key) or self.mailbox_name(overflow.peer)
        if overflow.phase == "full":
            self._mailbox_names[key] = name  # the child may be gone when it clears
        else:
            self._mailbox_names.pop(key, None)
        project_id = self.owner.overflow_scope(name)
        if project_id is None:
            return
        payload = ev.ActorMailboxOverflow(
            actor=name,
            sender=self.owner.kind,
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
        self.owner.append([event])

    def mailbox_name(self, address: Any) -> str:
        """The name of the actor that reads the mailbox at ``address``."""
        if address is None:
            return "unknown"
        if address == self.owner.myAddress:
            return self.owner.kind
        return self.owner.child_name(address) or self.owner.parent_kind
