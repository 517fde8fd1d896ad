"""Restart policy, Erlang style: intensity within a period, backoff, then escalation.

Plain code the supervising cores call: :meth:`RestartPolicy.on_crash` says whether a
crashed child is restarted (and after what delay) or the failure escalates to the parent;
:func:`crash_events` and :func:`restarted_event` are the one place the ``actor.crashed``,
``actor.escalated`` and ``actor.restarted`` events are built.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from typing import Any

import msgspec

from events import catalog as ev
from events.envelope import NewEvent, new_event

__all__ = [
    "ChildNames",
    "RestartDecision",
    "RestartPolicy",
    "crash_events",
    "process_exited",
    "restarted_event",
]


class RestartDecision(msgspec.Struct, frozen=True, kw_only=True):
    """What to do about one crash."""

    restart: bool
    """True: restart the child; False: escalate."""
    restart_count: int
    """Crashes of this child within the current period (this one included)."""
    delay_s: float = 0.0
    """Backoff before the restart."""


class RestartPolicy:
    """At most ``max_restarts`` restarts of a child within ``period_ms``.

    Backoff doubles from ``base_delay_s`` up to ``max_delay_s``. One instance per supervisor.
    """

    def __init__(
        self,
        max_restarts: int,
        period_ms: int,
        *,
        base_delay_s: float = 0.05,
        max_delay_s: float = 2.0,
        clock: Callable[[], float] | None = None,
    ) -> None:
        import time  # noqa: PLC0415

        self.max_restarts = max_restarts
        self.period_s = period_ms / 1000
        self.base_delay_s = base_delay_s
        self.max_delay_s = max_delay_s
        self.clock = clock or time.monotonic
        self._crashes: dict[str, list[float]] = {}

    def on_crash(self, child: str) -> RestartDecision:
        """Record a crash of ``child`` and decide."""
        now = self.clock()
        recent = [t for t in self._crashes.get(child, []) if now - t <= self.period_s]
        recent.append(now)
        self._crashes[child] = recent
        count = len(recent)
        if count > self.max_restarts:
            return RestartDecision(restart=False, restart_count=count)
        delay = min(self.max_delay_s, self.base_delay_s * (2 ** (count - 1)))
        return RestartDecision(restart=True, restart_count=count, delay_s=delay)

    def forget(self, child: str) -> None:
        """Drop a child's history (it stopped normally)."""
        self._crashes.pop(child, None)


class ChildNames:
    """Which child an actor address belongs to, found by address equality.

    Thespian addresses cannot be keys: they are unhashable, and a new child's address is a
    local placeholder until the child starts, so its ``str`` changes and differs from the
    address a later ``ChildActorExited`` carries. Only ``==`` resolves them.
    """

    def __init__(self) -> None:
        self._entries: list[tuple[Any, str]] = []

    def add(self, address: Any, name: str) -> None:
        """Remember that ``address`` is the child ``name``."""
        self._entries.append((address, name))

    def pop(self, address: Any) -> str | None:
        """The name of the child at ``address`` (forgotten from now on), or None."""
        for index, (known, name) in enumerate(self._entries):
            if known == address:
                del self._entries[index]
                return name
        return None


def crash_events(
    *,
    project_id: str,
    actor: str,
    reason: str,
    restart_count: int,
    at: str,
    correlation_id: str,
    escalation: str | None = None,
) -> list[NewEvent]:
    """``actor.crashed`` of ``actor``, then ``actor.escalated`` if it is not restarted.

    ``escalation`` (the reason it is not restarted) adds the ``actor.escalated``, caused by
    the crash; both events carry ``correlation_id``.
    """
    crashed = new_event(
        ev.ActorCrashed(actor=actor, reason=reason, restart_count=restart_count),
        project_id=project_id,
        at=at,
        correlation_id=correlation_id,
    )
    if escalation is None:
        return [crashed]
    escalated = new_event(
        ev.ActorEscalated(actor=actor, reason=escalation, restart_count=restart_count),
        project_id=project_id,
        at=at,
        correlation_id=correlation_id,
        causation_id=crashed.event_id,
    )
    return [crashed, escalated]


def restarted_event(
    *,
    project_id: str,
    actor: str,
    reason: str,
    restart_count: int,
    at: str,
    correlation_id: str,
    cause: str,
) -> NewEvent:
    """``actor.restarted`` of ``actor``, caused by its ``actor.crashed`` (``cause``)."""
    return new_event(
        ev.ActorRestarted(actor=actor, reason=reason, restart_count=restart_count),
        project_id=project_id,
        at=at,
        correlation_id=correlation_id,
        causation_id=cause,
    )


def process_exited(pid: int) -> bool:
    """Whether the child process ``pid`` has exited or is being killed (without reaping it).

    A process with ``SIGKILL`` pending never runs again, but its exit takes a while (its
    threads, its memory, a busy machine), and until it ends ``waitid`` calls it alive: a
    request forwarded to it meanwhile would wait in its mailbox for ever. The kernel keeps
    a ``kill`` or the OOM killer's ``SIGKILL`` pending for the whole process until it is
    reaped (``ShdPnd`` in ``/proc/PID/status``; ``SigPnd`` for one sent to a thread).

    An entity hosted in this process (``actors.hosting``) announces this process's pid: it
    lives as long as we do.
    """
    if pid == os.getpid():
        return False
    try:
        if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
            return True
    except ChildProcessError:
        return True
    return _being_killed(pid)


_SIGKILL_BIT = 1 << (signal.SIGKILL - 1)


def _being_killed(pid: int) -> bool:
    """Whether ``SIGKILL`` is pending for ``pid`` (it cannot be blocked, caught or undone)."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as status:
            masks = [line.split()[1] for line in status if line.startswith(("SigPnd:", "ShdPnd:"))]
        return any(int(mask, 16) & _SIGKILL_BIT for mask in masks)
    except (OSError, ValueError, IndexError):
        return False
