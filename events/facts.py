"""What an event type means to the incident views (``EventFacts``); the stages and sections.

Each payload class in ``events.catalog`` declares its facts once, as a ``facts`` class
variable: its error kind, the report's problem section it is listed in, its mark on the
timeline, the stages it opens and closes, its describer, whether it is a signal and, for
a policy decision, the decision. Every table the report, the HTML page, OpenTelemetry
and the agent loop read (``ERROR_KINDS``, ``SIGNAL_TYPES``, ``TURN_END_TYPES``, the marks,
the stage boundaries...) is derived from them; ``tests/events/test_facts.py`` fails when a
type declares none or declares one the views cannot show.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

__all__ = [
    "PLAIN",
    "SECTIONS",
    "STAGES",
    "Decision",
    "ErrorKind",
    "EventFacts",
    "Mark",
    "Section",
    "SectionInfo",
    "Stage",
    "StageInfo",
]

ErrorKind = Literal["denial", "security", "failure", "timeout", "crash"]
"""What kind of error an event is (the report's ``first_error.kind``)."""

Mark = Literal["denial", "security", "failure", "timeout", "crash", "restart", "cancel"]
"""How an event is marked on the HTML page's waterfall and causal tree (a colour each)."""

Section = Literal[
    "denials",
    "failures",
    "timeouts",
    "cancellations",
    "security_signals",
    "actor_events",
    "model_retries",
]
"""A problem list of the incident report."""

Stage = Literal["turn", "model_round", "policy", "approval", "tool_call", "tool_run"]
"""A stage of a turn: a span from the event that opens it to the one that closes it."""

Decision = Literal["allow", "deny", "ask"]
"""What a policy decision decided."""


@dataclass(frozen=True, kw_only=True)
class EventFacts:
    """What one event type means to the incident report, its page and its spans."""

    kind: ErrorKind | None = None
    """Its error kind: the first event with one is the report's ``first_error``."""
    section: Section | None = None
    """The problem list it is listed in."""
    mark: Mark | None = None
    """Its mark on the timeline; None: its ``kind``, if any."""
    opens: tuple[Stage, ...] = ()
    """The stages it opens (a call's stages open once per call until closed)."""
    closes: tuple[Stage, ...] = ()
    """The stages it closes (of its correlation, or of its call)."""
    describe: Callable[[Mapping[str, object]], str] | None = None
    """Its one-line summary; None: its set fields as ``key=value``."""
    signal: bool = False
    """A signal (``source: signal`` in incident timelines), not a conversation event."""
    decision: Decision | None = None
    """What it decided, when it is a policy decision."""
    timeout_when: Callable[[Any], bool] | None = None
    """Listed under ``timeouts`` too when this holds of its payload."""

    @property
    def marked(self) -> Mark | None:
        """Its mark on the timeline: ``mark``, else its error kind."""
        return self.mark or self.kind


PLAIN: Final = EventFacts()
"""The facts of an event type the incident views show as is: no error, no mark, no stage."""


@dataclass(frozen=True)
class SectionInfo:
    """How a problem list is shown: its title and, in the page's header, its chip."""

    title: str
    """The list's heading."""
    chip: tuple[str, str, Mark] | None
    """The header chip: one, many and its colour (None: no chip)."""


SECTIONS: Final[dict[Section, SectionInfo]] = {
    "denials": SectionInfo("Denials", ("denial", "denials", "denial")),
    "failures": SectionInfo("Failures", ("failure", "failures", "failure")),
    "timeouts": SectionInfo("Timeouts", ("timeout", "timeouts", "timeout")),
    "cancellations": SectionInfo("Cancellations", ("cancellation", "cancellations", "cancel")),
    "security_signals": SectionInfo(
        "Security signals", ("security signal", "security signals", "security")
    ),
    "actor_events": SectionInfo(
        "Actor crashes, restarts and escalations",
        ("actor crash or restart", "actor crashes and restarts", "crash"),
    ),
    "model_retries": SectionInfo("Model retries and circuit breaker", None),
}
"""The report's problem lists, in the order both renderings show them."""


@dataclass(frozen=True)
class StageInfo:
    """How a stage is keyed, shown and measured."""

    per_call: bool
    """Keyed by its call (else by its correlation)."""
    name: str
    """Its name on the HTML page."""
    depth: int
    """Its indent on the HTML page's waterfall."""
    measured: bool = True
    """Measured by the incident report (its ``stages`` and ``latency``)."""


STAGES: Final[dict[Stage, StageInfo]] = {
    "turn": StageInfo(per_call=False, name="turn", depth=0),
    "model_round": StageInfo(per_call=False, name="model round", depth=1),
    "policy": StageInfo(per_call=True, name="policy", depth=2),
    "approval": StageInfo(per_call=True, name="approval", depth=2),
    "tool_call": StageInfo(per_call=True, name="tool call", depth=2),
    "tool_run": StageInfo(per_call=True, name="tool run", depth=3, measured=False),
}
"""Every stage, in the order the report shows those that start on the same event.

The report measures all but ``tool_run`` (its time is the call's ``run_ms``);
OpenTelemetry exports them all (``runtime.telemetry.spans``)."""
