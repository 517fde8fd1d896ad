"""The soak and benchmark harness (``roost soak``) and the journal benchmark.

General layout: ``cli`` (argument parsing, the ``roost soak`` entry point; ``summary``
prints its report for people), ``harness`` (drives a real daemon through the client; its
steps in ``steps``), ``bootstrap`` (temporary projects and seed files), ``scenarios``
(steady, burst, chaos, baseline, slow-model; ``turns`` what they send, ``model_server``
slow-model's loopback model), ``chaos`` (kills actor processes), ``baseline`` (bare
Thespian and bare eventsourcing), ``monitor`` (memory sampling), ``readback`` and
``integrity`` (what the journal says afterwards), ``config`` (what a run does), ``report``
(what it found), ``figures`` (percentiles, the design's figures), ``verdict`` (goals,
comparisons), ``journal_bench`` (``python -m soak.journal_bench``), ``command_bench`` (one
``command.run``, or with ``--mcp`` one MCP stdio call, through a real daemon).
"""

from collections.abc import Sequence

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``roost soak`` (imports the harness only when called)."""
    from soak.cli import main as run

    return run(argv)
