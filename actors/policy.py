"""The Policy actor: decides a model's tool calls with the project's tool-call pipeline.

It holds a :class:`runtime.execution.pipeline.ToolPipeline` built from the project's
options and the registry the Project built (the value the ToolRunner's pipeline has too),
and decides each call with ``decide(call, source="model")``; the decision and the events
that record it are plain code. The conversation appends those events before anything runs.
"""

from __future__ import annotations

from typing import Any

from actors.base import RoostActor
from actors.dispatch import handles
from actors.messages import CallDecision, DecideCall, SetupPolicy

__all__ = ["PolicyActor"]


class PolicyActor(RoostActor):
    """Answers :class:`DecideCall` with :class:`CallDecision`."""

    kind = "policy"
    parent_kind = "project"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.pipeline: Any = None

    @handles(SetupPolicy)
    def _setup(self, message: SetupPolicy, sender: Any) -> None:
        self.announce(sender, "policy")
        from runtime.execution.pipeline import ToolPipeline  # noqa: PLC0415

        self.pipeline = ToolPipeline(
            message.project_id, message.root, message.options, message.registry
        )

    @handles(DecideCall)
    def _decide(self, message: DecideCall, sender: Any) -> None:
        verdict = self.pipeline.decide(message.call, source="model")
        self.send(sender, CallDecision(call_id=message.call.call_id, events=verdict.events))
