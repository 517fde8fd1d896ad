"""What the exporter thread and ``roost export otel`` hand a turn's spans and measures to.

:class:`TurnExporter` is the seam: :class:`runtime.telemetry.sdk.Exporter` implements it
over the OpenTelemetry SDK, which only that module imports, so the callers name the type
without loading the SDK.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from runtime.telemetry.measures import TurnMeasures
from runtime.telemetry.spans import SpanRecord

__all__ = ["TurnExporter"]


class TurnExporter(Protocol):
    """Takes finished turns' spans and measures, and actor restarts."""

    def export_spans(self, records: Sequence[SpanRecord]) -> bool:
        """Export one turn's spans; True when they were taken."""
        ...

    def record(self, measures: TurnMeasures) -> None:
        """Add one finished turn to the metrics."""
        ...

    def count_restart(self, actor: str) -> None:
        """Add one actor restart to the metrics."""
        ...

    def shutdown(self) -> None:
        """Flush and close."""
        ...
