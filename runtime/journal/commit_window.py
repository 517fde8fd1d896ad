"""The journal link's commit window: wait a moment for more appends when more are coming.

The link's loop (:class:`runtime.journal.link.LinkServer`) commits what has arrived
together. On a fast disk it is idle most of the time, so it commits the first append to
arrive with the few that came with it, and under load most commits are small (2.7-5.4
appends each at 32 turns in flight, issue 18). Before committing, the loop asks
:meth:`CommitWindow.wait_s` how long to keep reading; it waits only when

- fewer than ``target`` appends are in hand, and
- at least ``target`` conversations appended within the last ``active_s`` (as PostgreSQL's
  ``commit_siblings``): one conversation alone, or a few, never wait, since theirs is the
  only append coming (a sequential turn pays nothing), and
- no more than ``gap_s`` passed since the last append arrived (so among busy
  conversations even a lone append waits up to ``gap_s`` for a second one, then as long
  as appends keep arriving), for at most ``max_wait_s`` from the first.

No append is answered before it is committed: waiting only delays the commit and its
answers. Plain code with the clock passed in (``tests/runtime/journal``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from events.envelope import NewEvent

__all__ = ["CommitWindow", "gather"]

TARGET = 12
"""Appends in hand that end the wait at once (and conversations active for one to start)."""
MAX_WAIT_S = 0.006
"""The longest an append waits for others."""
GAP_S = 0.003
"""A wait ends when nothing more came for this long."""
ACTIVE_S = 0.25
"""A conversation that appended within this long counts as active."""


class CommitWindow:
    """Which conversations append lately, and how long a commit waits for more."""

    def __init__(
        self,
        *,
        target: int = TARGET,
        max_wait_s: float = MAX_WAIT_S,
        gap_s: float = GAP_S,
        active_s: float = ACTIVE_S,
    ) -> None:
        self.target = target
        self.max_wait_s = max_wait_s
        self.gap_s = gap_s
        self.active_s = active_s
        self.seen: dict[tuple[str, str | None], float] = {}
        """(project, conversation) -> when it last appended."""
        self._pruned = 0.0
        self.waits = 0
        """Commits that waited."""

    def note(self, batches: Iterable[list[NewEvent]], now: float) -> None:
        """Record the conversations of ``batches`` (just committed) as active at ``now``."""
        for events in batches:
            if events:
                self.seen[(events[0].project_id, events[0].conversation_id)] = now

    def active(self, now: float) -> int:
        """Conversations that appended within ``active_s`` of ``now``."""
        if now - self._pruned >= self.active_s / 4:
            self._pruned = now
            horizon = now - self.active_s
            self.seen = {k: t for k, t in self.seen.items() if t >= horizon}
        return len(self.seen)

    def wait_s(self, in_hand: int, first: float, last: float, now: float) -> float:
        """How much longer to read before committing ``in_hand`` appends (0: commit now).

        ``first``/``last``: when the first and the latest of them arrived.
        """
        if not 0 < in_hand < self.target or self.active(now) < self.target:
            return 0.0
        return max(0.0, min(first + self.max_wait_s, last + self.gap_s) - now)


def gather(
    window: CommitWindow | None,
    pending: list[Any],
    appends: Callable[[list[Any]], int],
    read: Callable[[float], list[Any]],
    clock: Callable[[], float],
) -> list[Any]:
    """``pending`` and what :func:`read` (its timeout) brings while the window says wait.

    ``appends``: how many appends a list of pending requests holds.
    """
    if window is None:
        return pending
    first = last = clock()
    count = appends(pending)
    waited = False
    while (wait := window.wait_s(count, first, last, clock())) > 0:
        waited = True
        more = read(wait)
        if more:
            pending.extend(more)
            count += appends(more)
            last = clock()
    window.waits += waited
    return pending
