"""The Policy actor: decides every tool call with :func:`runtime.policy.decide`.

It holds the project's registry and options; the decision and the events that record it
are plain code. The conversation appends those events before anything runs.
"""

from __future__ import annotations

from typing import Any

from actors.base import RoostActor
from actors.messages import CallDecision, DecideCall, SetupPolicy

__all__ = ["PolicyActor"]


class PolicyActor(RoostActor):
    """Answers :class:`DecideCall` with :class:`CallDecision`."""

    kind = "policy"
    parent_kind = "project"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.context: Any = None

    def handle(self, message: Any, sender: Any) -> None:
        """Configure, or decide one call."""
        if isinstance(message, SetupPolicy):
            self.announce(sender, "policy")
            from runtime.policy import PolicyContext  # noqa: PLC0415
            from runtime.registry import ToolRegistry  # noqa: PLC0415

            self.context = PolicyContext(
                project_id=message.project_id,
                root=message.root,
                options=message.options,
                registry=ToolRegistry.for_project(message.root, message.options),
            )
        elif isinstance(message, DecideCall):
            from runtime.policy import decide  # noqa: PLC0415

            verdict = decide(message.call, self.context)
            self.send(sender, CallDecision(call_id=message.call.call_id, events=verdict.events))
