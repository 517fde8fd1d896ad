"""When a host collects what its exited entities left behind.

An entity's objects point at each other (the actor and its core, bound methods the core
keeps, the folds of its history), so when a conversation passivates nothing is freed by
reference counting: its state waits for the collector's next full pass. Python makes that
pass rarely (a generation-2 collection needs ten generation-1 ones and new long-lived
objects a quarter as many as the old), so a host held its passivated conversations as
garbage for minutes, and the next wave of rehydrations took fresh allocator arenas beside
it. Measured on a host of four conversations, each rehydration wave after a long warm-up
left +2.3 MiB (24.3 -> 26.6 -> 29.1 MiB, flat after the second) without a collection at
the exits and +0.8 MiB, then nothing (24.1 -> 24.9 -> 24.9 MiB), with one
(docs/performance.md, "The hosts' step").

So the host collects after exits, as often as what they left is worth a full pass:
once the entities that exited since the last pass are at least :data:`RATIO` of the
ones still live (always when none is left). The cost of a pass grows with what is live,
and so does the number of exits between two passes: amortised, each exit pays for about
``RATIO`` times its own share, not for the whole host.
"""

from __future__ import annotations

import gc
from collections.abc import Callable

__all__ = ["RATIO", "ExitCollector"]

RATIO = 0.25
"""Exits since the last pass, as a share of the live entities, that make a pass due."""


class ExitCollector:
    """Counts a host's exits and runs a full collection when they are worth it."""

    def __init__(self, collect: Callable[[], object] = gc.collect) -> None:
        self.collect = collect
        self.exits = 0
        """Entities exited since the last pass."""
        self.due = False
        self.passes = 0

    def exited(self, live: int) -> None:
        """An entity exited; ``live`` entities are left in the host."""
        self.exits += 1
        if self.exits >= RATIO * live:
            self.due = True

    def collect_if_due(self) -> None:
        """Run the pass if one is due: call it where no frame still holds an exited entity."""
        if not self.due:
            return
        self.due = False
        self.exits = 0
        self.passes += 1
        self.collect()
