"""Journal appends an actor sends and tracks.

:class:`JournalAppends` is a helper every Roost actor holds (``actors.base.RoostActor``'s
``appends``): the answer runs a callback, a restarted Journal gets the unanswered ones
again (same keys), a commit routes its alerts.
"""

from __future__ import annotations

import functools
import itertools
import uuid
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from actors.messages import Appended, AppendFailed, AppendRequest
from actors.sends import utc_now
from events.envelope import Envelope, NewEvent
from runtime.journal.link import LinkFailed, link_settings
from runtime.journal.link_client import LinkClient

__all__ = ["Appending", "JournalAppends", "batch_key"]


def batch_key(key: str | None) -> str:
    """The journal batch key of an append: the request's idempotency key, or a fresh one.

    Not a request id: a batch the runtime appends on its own (a model round, a crash
    record) gets a random key so that resending it to a restarted Journal (the journal
    link's resend, :meth:`JournalAppends.resend`) never commits it twice. A client's
    ``send_event`` brings the idempotency key the gateway checked or minted.
    """
    return key or str(uuid.uuid4())


class Appending(Protocol):
    """What :class:`JournalAppends` needs of the actor that owns it (``RoostActor``)."""

    log: Any
    hosted: bool
    _myRef: Any
    """The actor's Thespian manager; a hosted entity's ``actors.hosting`` port."""

    def send(self, targetAddr: Any, msg: Any) -> bool:
        """Send an actor message (checked: ``actors.sends.MailboxSends``)."""


class JournalAppends:
    """Fire-and-track appends to the Journal actor, for the actor that owns them."""

    def __init__(self, owner: Appending) -> None:
        self.owner = owner
        self._tokens = itertools.count(1)
        self._appends: dict[int, tuple[AppendRequest, Callable[[Any], None] | None]] = {}
        self.journal: Any = None
        self.alert_options: Mapping[str, Any] | None = None
        """Options whose ``alert_signal_events`` this actor routes after its appends."""
        self.link_client: LinkClient | None = None
        self.routes_alerts = True
        """Whether a commit's routed alerts are appended here (the agent shell queues them)."""

    def over_link(self, events: list[NewEvent], key: str | None) -> Appended | AppendFailed | None:
        """Commit ``events`` over the journal link and wait: the answer, or None (no link).

        The link of this process is made on first use; it resends the same batch, with the
        same key, to a restarted Journal (``runtime.journal.link``).
        """
        if self.link_client is None:
            settings = link_settings()
            if settings is None:
                return None
            self.link_client = LinkClient(*settings)
        result = self.link_client.append(events, batch_key(key))
        if isinstance(result, LinkFailed):
            return AppendFailed(token=0, error=result.error)
        return Appended(token=0, envelopes=result.envelopes)

    def take_answer(self, message: Any) -> bool:
        """Handle the journal's answer to one of this actor's appends (False: not one)."""
        if not isinstance(message, Appended | AppendFailed) or message.token not in self._appends:
            return False
        _request, then = self._appends.pop(message.token)
        self._answered(message, then)
        return True

    def append(
        self,
        events: list[NewEvent],
        then: Callable[[Any], None] | None = None,
        *,
        key: str | None = None,
        redacted: bool = False,
    ) -> AppendRequest:
        """Send ``events`` to the journal; ``then(Appended | AppendFailed)`` on the answer.

        ``redacted``: the caller redacted each event as the journal would; an entity's
        link append says so, and the journal hashes them as they are
        (``runtime.journal.store.Batch.redacted``).
        """
        request = AppendRequest(key=batch_key(key), events=events, token=next(self._tokens))
        if self.owner.hosted:  # an entity: through its host's appender, no relay
            port = self.owner._myRef
            answered = functools.partial(self._answered, then=then)
            if port.append(events, request.key, answered, redacted=redacted):
                return request
        self._appends[request.token] = (request, then)
        if self.journal is not None:
            self.owner.send(self.journal, request)
        return request

    def _answered(self, answer: Any, then: Callable[[Any], None] | None) -> None:
        """An append's answer (the journal's, or in an entity's turn its host appender's).

        A failure is logged, ``then`` runs, a commit's alerts are routed.
        """
        if isinstance(answer, AppendFailed):
            self.owner.log.error("append_failed", error=answer.error)
        if then is not None:
            then(answer)
        if isinstance(answer, Appended):
            self.route_alerts(answer.envelopes)

    def alerts_for(self, envelopes: list[Envelope]) -> list[NewEvent]:
        """Dispatch the committed signals ``alert_options`` route; the ``alert.*`` to append."""
        if not self.alert_options:
            return []
        from runtime.lifecycle.alerts import alert_events  # noqa: PLC0415 - only when alerts are on

        return alert_events(envelopes, self.alert_options, utc_now)

    def route_alerts(self, envelopes: list[Envelope]) -> None:
        """After a commit: dispatch routed signals and append the outcomes (best-effort)."""
        if not self.routes_alerts:
            return
        alerts = self.alerts_for(envelopes)
        if alerts:
            self.append(alerts)

    def resend(self) -> None:
        """Send unanswered appends again (same keys: the journal drops duplicates)."""
        for request, _ in self._appends.values():
            self.owner.send(self.journal, request)
