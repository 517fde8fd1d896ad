"""What one soak run does: :class:`SoakConfig`, the command line normalized (``soak.cli``)."""

from __future__ import annotations

from typing import Literal

import msgspec

__all__ = ["Scenario", "SoakConfig"]

Scenario = Literal["steady", "burst", "chaos", "baseline", "slow-model"]
"""The workload shapes of ``roost soak --scenario``."""


class SoakConfig(msgspec.Struct, frozen=True, kw_only=True):
    """What one soak run does (the command line, normalized)."""

    projects: int = 3
    """Projects started."""
    conversations: int = 4
    """Conversations per project."""
    events: int = 3
    """``user.message`` turns per conversation."""
    concurrency: int = 12
    """Turns in flight at once (worker threads)."""
    timeout_ms: int = 15000
    """Longest a turn may take before it counts as failed."""
    scenario: Scenario = "steady"
    """Workload shape."""
    duration_s: float | None = None
    """Keep sending for this long instead of stopping after ``events`` per conversation."""
    home: str | None = None
    """A running daemon's ``ROOST_HOME`` to use; a temporary one is spawned when null."""
    kills: int = 10
    """``chaos``: the least number of actor processes killed."""
    kill_interval_ms: int = 500
    """``chaos``: pause between kills."""
    idle_passivation_ms: int = 5000
    """The soak projects' ``idle_passivation_ms`` (memory must come back after the run)."""
    threshold_pct: float = 10.0
    """``--compare``: a metric worse by more than this is a regression."""
    seed: int | None = None
    """Seed of ``chaos``'s random choices (a fresh one when null; reported)."""
    connection_per_turn: bool = False
    """Each turn on a new client connection (as the CLI and scripts make them)."""
    model_latency_ms: int = 2000
    """``slow-model``: how long the loopback model server waits before each answer."""
