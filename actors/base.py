"""What every Roost actor shares: logging per process, error storms, journal appends.

An exception inside ``receiveMessage`` makes Thespian redeliver once and then bounce the
message as a ``PoisonMessage``; it never restarts the actor. Our actors catch exceptions
themselves, reply with an error where someone waits, and count them: a storm (more than
``STORM_LIMIT`` within ``STORM_WINDOW_S``) makes the actor exit, so its parent sees
``ChildActorExited`` and restarts it from its events.
"""

from __future__ import annotations

import ctypes
import itertools
import os
import signal
import time
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

import structlog
from thespian.actors import Actor, ActorExitRequest

from actors.messages import ActorStarted, Appended, AppendFailed, AppendRequest, Reply
from actors.thespian import mailbox
from events import catalog as ev
from events.envelope import Envelope, NewEvent, format_at, new_correlation_id, new_event
from runtime.errors import OverloadedError, RoostError

__all__ = [
    "STORM_LIMIT",
    "STORM_WINDOW_S",
    "RoostActor",
    "batch_key",
    "error_reply",
    "profiling_wanted",
    "utc_now",
]

STORM_LIMIT = 5
"""Exceptions within the window that make an actor exit to be restarted."""
STORM_WINDOW_S = 10.0
"""The storm window."""


def utc_now() -> datetime:
    """The runtime clock (UTC)."""
    return datetime.now(UTC)


def batch_key(key: str | None) -> str:
    """The journal batch key of an append: the request's idempotency key, or a fresh one.

    Not a request id: a batch the runtime appends on its own (a model round, a crash
    record) gets a random key so that resending it to a restarted Journal (the journal
    link's resend, :meth:`RoostActor.resend_appends`) never commits it twice. A client's
    ``send_event`` brings the idempotency key the gateway checked or minted.
    """
    return key or str(uuid.uuid4())


def error_reply(error: BaseException) -> Reply:
    """A :class:`Reply` carrying ``error`` in its wire shape."""
    if isinstance(error, RoostError):
        return Reply(ok=False, error=error.to_wire())
    return Reply(
        ok=False,
        error={
            "code": "internal_error",
            "message": f"{type(error).__name__}: {error}",
            "details": {},
        },
    )


class RoostActor(Actor):  # type: ignore[misc]
    """Base actor: per-process logging, storm counting and fire-and-track appends."""

    kind = "actor"
    parent_kind = "parent"
    """What the actor's parent is, to name it in mailbox overflow events."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._errors: list[float] = []
        self._tokens = itertools.count(1)
        self._appends: dict[int, tuple[AppendRequest, Callable[[Any], None] | None]] = {}
        self.journal: Any = None
        self.alert_options: Mapping[str, Any] | None = None
        """Options whose ``alert_signal_events`` this actor routes after its appends."""
        # Configure first: binding materializes a logger on the current output, and
        # configuring closes the file inherited from the parent process.
        _configure_process_logging(self.kind)
        self.log = structlog.get_logger("roost").bind(
            component=f"roost.{self.kind}", actor=self.kind, pid=os.getpid()
        )
        self._mailbox_names: dict[str, str] = {}
        _die_with_parent()

    def receiveMessage(self, message: Any, sender: Any) -> None:
        """Dispatch ``message``; count and survive exceptions."""
        # Thespian configures logging in a new actor process after the instance exists
        # (closing inherited handlers), so ours is configured on the first message.
        _configure_process_logging(self.kind)
        if isinstance(message, ActorExitRequest):
            self.on_exit()
            _dump_profile(self.kind)
            return
        try:
            if isinstance(message, Appended | AppendFailed) and message.token in self._appends:
                _request, then = self._appends.pop(message.token)
                if isinstance(message, AppendFailed):
                    self.log.error("append_failed", error=message.error)
                if then is not None:
                    then(message)
                if isinstance(message, Appended):
                    self.route_alerts(message.envelopes)
            else:
                self.handle(message, sender)
        except Exception as e:
            self.log.exception("actor_error", message=type(message).__name__)
            self.on_error(message, sender, e)
            now = time.monotonic()
            self._errors = [t for t in self._errors if now - t < STORM_WINDOW_S] + [now]
            if len(self._errors) > STORM_LIMIT:
                self.log.error("actor_error_storm", errors=len(self._errors))
                self.send(self.myAddress, ActorExitRequest())
        self.record_overflows()

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

    def handle(self, message: Any, sender: Any) -> None:
        """Handle one message (subclasses)."""

    def announce(self, parent: Any, role: str) -> None:
        """Tell ``parent`` this actor's role and pid."""
        self.send(parent, ActorStarted(role=role, pid=os.getpid()))

    def on_error(self, message: Any, sender: Any, error: Exception) -> None:
        """Answer whoever waits on ``message`` with ``error`` (subclasses may refine)."""
        reply_to = getattr(message, "reply_to", None)
        if reply_to is not None:
            self.send(reply_to, error_reply(error))

    def on_exit(self) -> None:
        """Release resources before the actor stops (subclasses)."""

    def append(
        self,
        events: list[NewEvent],
        then: Callable[[Any], None] | None = None,
        *,
        key: str | None = None,
    ) -> AppendRequest:
        """Send ``events`` to the journal; ``then(Appended | AppendFailed)`` on the answer."""
        request = AppendRequest(key=batch_key(key), events=events, token=next(self._tokens))
        self._appends[request.token] = (request, then)
        if self.journal is not None:
            self.send(self.journal, request)
        return request

    def alerts_for(self, envelopes: list[Envelope]) -> list[NewEvent]:
        """Dispatch the committed signals ``alert_options`` route; the ``alert.*`` to append."""
        if not self.alert_options:
            return []
        from runtime.lifecycle.alerts import alert_events  # noqa: PLC0415 - only when alerts are on

        return alert_events(envelopes, self.alert_options, utc_now)

    def route_alerts(self, envelopes: list[Envelope]) -> None:
        """After a commit: dispatch routed signals and append the outcomes (best-effort)."""
        alerts = self.alerts_for(envelopes)
        if alerts:
            self.append(alerts)

    def resend_appends(self) -> None:
        """Send unanswered appends again (same keys: the journal drops duplicates)."""
        for request, _ in self._appends.values():
            self.send(self.journal, request)


_configured: list[int] = []


def _die_with_parent() -> None:
    """Have the kernel SIGKILL this actor process when its parent actor's process dies.

    Thespian leaves the children of a killed actor running: they would live on as orphans
    next to the replacements the restarted parent creates (two actors for one conversation,
    a tool runner nobody talks to). An orderly stop is unaffected: Thespian parents wait for
    their children to exit first. Linux ``PR_SET_PDEATHSIG``; a no-op elsewhere.
    """
    parent = os.getppid()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG = 1
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent died before the request took effect
        os.kill(os.getpid(), signal.SIGKILL)


_profiler: list[Any] = []


def _dump_profile(kind: str) -> None:
    """With ``ROOST_PROFILE_DIR`` set, write this process's cProfile stats on exit."""
    if _profiler:
        directory = os.environ.get("ROOST_PROFILE_DIR", "")
        _profiler[0].disable()
        _profiler[0].dump_stats(os.path.join(directory, f"{kind}-{os.getpid()}.prof"))
        _profiler.clear()


def profiling_wanted(kind: str, environ: Mapping[str, str]) -> bool:
    """Whether an actor of ``kind`` profiles itself.

    Yes when ``ROOST_PROFILE_DIR`` is set and ``ROOST_PROFILE_KINDS`` (comma-separated) is
    unset or names ``kind``.
    """
    kinds = environ.get("ROOST_PROFILE_KINDS", "")
    return bool(environ.get("ROOST_PROFILE_DIR")) and (not kinds or kind in kinds.split(","))


def _configure_process_logging(kind: str) -> None:
    """Configure structlog once per actor process (never carried in pickled state).

    With ``ROOST_PROFILE_DIR`` set (a debugging aid, see docs/performance.md), each actor
    process also runs cProfile and writes its stats there when it stops;
    ``ROOST_PROFILE_KINDS`` (comma-separated kinds, e.g. ``conversation,journal``) limits
    that to some kinds of actor.
    """
    if os.getpid() in _configured:
        return
    _configured.append(os.getpid())
    if profiling_wanted(kind, os.environ):
        import cProfile  # noqa: PLC0415 - only when profiling

        _profiler.clear()
        _profiler.append(cProfile.Profile())
        _profiler[0].enable()
    try:
        from runtime.logging import configure_logging  # noqa: PLC0415

        configure_logging(
            json=os.environ.get("ROOST_LOG_FORMAT", "json") != "console",
            log_file=os.environ.get("ROOST_LOG_FILE"),
        )
    except Exception:
        return
