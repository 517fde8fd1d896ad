"""One tool-call pipeline: decide → admit → execute → cap → scan → redact.

Every tool call of a project, whoever makes it, passes the same stages in the SPEC
section 6 order, through one :class:`ToolPipeline`:

1. **decide** (:meth:`ToolPipeline.decide`, the only caller of
   :func:`runtime.policy.decisions.decide`): unknown tool → schema → env controls → policy
   rules → approval;
2. **admit** (quotas), 3. **execute** (the tool with its timeout), then caps → sensitivity
   scan → redaction (:class:`~runtime.execution.runner.ToolRunnerCore`,
   :mod:`runtime.execution.results`), 4. **release**.

The caller's :data:`Source` says what happens to a call that needs approval:

- ``model``: a model's call. The Policy actor decides it (``ask`` stays ``ask``); the
  conversation appends the verdict and, once it is allowed or approved, the ToolRunner
  actor admits, executes and releases it.
- ``run_tool`` and ``mcp``: nobody is there to approve (:data:`UNATTENDED`), so ``ask``
  becomes a refusal (``policy.denied {reason: approval_required}``, ``tool.failed {code:
  denied, reason: approval_required}``). :meth:`ToolPipeline.run` is the whole pipeline in
  one call: a new entry point (an MCP server's call) is ``run(call, cancelled,
  source="mcp")``.
- ``workflow``: a step of a workflow call that was allowed (the runner decides each step
  through :meth:`ToolPipeline.decide` with the workflow's spec). A step may not run
  another workflow (``tool.failed {code: denied, reason: nested_workflow}``). A step's
  ``ask`` becomes ``policy.allowed {reason: workflow_approved}`` only when the workflow
  itself needed approval (its flags are the union of its steps', so it was asked about
  and approved); otherwise the step is refused with ``approval_required`` as an
  unattended call is: a workflow never lets a step skip an approval its direct call needs.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any, Literal

from events import catalog as ev
from runtime.execution.runner import RunnerStats, ToolRunnerCore
from runtime.policy.decisions import (
    PolicyContext,
    Verdict,
    decide,
    needs_approval,
    refused_every_call,
)
from runtime.tools.base import CallSpec, ToolSpec
from runtime.tools.registry import ToolRegistry

__all__ = ["UNATTENDED", "Source", "ToolPipeline", "offered_tools"]

Source = Literal["model", "run_tool", "workflow", "mcp"]
"""Who made a call: a model, a client's ``run_tool``, a workflow step, an MCP server."""

UNATTENDED: frozenset[str] = frozenset({"run_tool", "mcp"})
"""Sources with nobody to approve a call: ``ask`` is refused; :meth:`ToolPipeline.run` runs them."""


def offered_tools(
    registry: ToolRegistry, options: Mapping[str, Any], source: Source
) -> list[ToolSpec]:
    """The tools worth offering to ``source``: those the policy does not refuse every call of.

    ``list_tools`` with a ``source`` answers with these (``roost mcp serve`` lists them as
    MCP tools): ``allow_tools`` / ``deny_tools`` apply as always, a protocol tool needs its
    protocol in ``protocol_allowlist``, and an unattended source (:data:`UNATTENDED`) is
    not offered the tools ``approval_mode`` always asks about, since it would be refused
    each call (:func:`runtime.policy.decisions.refused_every_call`). An unavailable tool
    (:attr:`ToolRegistry.unavailable`) is never offered.
    """
    unattended = source in UNATTENDED
    return [
        spec
        for spec in registry.specs()
        if spec.name not in registry.unavailable
        and refused_every_call(spec, options, unattended=unattended) is None
    ]


class ToolPipeline:
    """One project's tool calls, from the decision to the redacted result (thread-safe).

    Built from the project's options and its one :class:`ToolRegistry`; the Policy actor
    and the ToolRunner actor each hold one built from the same registry value.
    """

    def __init__(
        self, project_id: str, root: str, options: Mapping[str, Any], registry: ToolRegistry
    ) -> None:
        self.policy = PolicyContext(
            project_id=project_id, root=root, options=dict(options), registry=registry
        )
        """What the decision knows about the project."""
        self.runner = ToolRunnerCore(
            project_id,
            root,
            options,
            registry,
            decide_step=self._decide_step,
        )
        """Quotas, execution, caps, scans; it decides workflow steps through :meth:`decide`."""

    # --- decide -----------------------------------------------------------------------

    def _decide_step(self, call: CallSpec, workflow: ToolSpec) -> Verdict:
        return self.decide(call, source="workflow", workflow=workflow)

    def decide(
        self, call: CallSpec, *, source: Source, workflow: ToolSpec | None = None
    ) -> Verdict:
        """Decide ``call`` made by ``source`` (see the module doc); ``ask`` only for ``model``.

        ``workflow`` is the spec of the workflow a ``workflow`` step belongs to.
        """
        if source == "workflow" and self._kind(call) == "workflow":
            reason = {
                "code": "denied",
                "message": "a workflow step cannot run another workflow",
                "reason": "nested_workflow",
            }
            failed = ev.ToolFailed(call_id=call.call_id, name=call.name, reason=reason)
            return Verdict(outcome="deny", events=[failed])
        verdict = decide(call, self.policy)
        if verdict.outcome != "ask" or source == "model":
            return verdict
        approved = workflow is not None and needs_approval(workflow, self.policy.settings)
        if source == "workflow" and approved:
            allowed = ev.PolicyAllowed(
                tool=call.name, reason="workflow_approved", source="policy", call_id=call.call_id
            )
            return Verdict(outcome="allow", events=[*verdict.events, allowed])
        denied = ev.PolicyDenied(
            tool=call.name, reason="approval_required", source="policy", call_id=call.call_id
        )
        failed = ev.ToolFailed(
            call_id=call.call_id,
            name=call.name,
            reason={
                "code": "denied",
                "reason": "approval_required",
                "message": f"{call.name} needs approval (approval_mode is "
                f"{self.policy.settings.approval_mode}); run it in a conversation to "
                "approve it",
            },
        )
        return Verdict(outcome="deny", events=[denied, failed])

    def _kind(self, call: CallSpec) -> str | None:
        entry = self.policy.registry.get(call.name)
        return None if entry is None else entry[0].kind

    # --- admit, execute, release --------------------------------------------------------

    def runs_inline(self, call: CallSpec) -> bool:
        """Whether the ToolRunner's own thread waits on ``call`` (an ``inline`` tool, ``sync``).

        File and asset tools are ``inline``; other calls go to its worker threads.
        """
        entry = self.policy.registry.get(call.name)
        return entry is not None and entry[0].inline and call.run_mode == "sync"

    def admit(self, call: CallSpec) -> list[ev.Event] | None:
        """Count an allowed call in flight (None), or return its quota refusal."""
        return self.runner.admit(call)

    def execute(self, call: CallSpec, cancelled: threading.Event) -> list[ev.Event]:
        """Run an allowed, admitted call: its signals, then its terminal event."""
        return self.runner.execute(call, cancelled)

    def release(self, call_id: str) -> None:
        """Stop counting ``call_id`` in flight."""
        self.runner.release(call_id)

    # --- the whole pipeline ---------------------------------------------------------------

    def run(
        self, call: CallSpec, cancelled: threading.Event, *, source: Source
    ) -> tuple[list[ev.Event], dict[str, Any]]:
        """Decide → admit → execute → release a call from an unattended ``source``.

        Returns the events (without ``tool.requested`` and ``tool.started``) and the SPEC
        section 6 ``run_tool`` result dict. Raises ``ValueError`` for a source that can
        wait for approval (``model``) or is part of another call (``workflow``).
        """
        if source not in UNATTENDED:
            raise ValueError(f"run() serves {sorted(UNATTENDED)}, not {source!r}")
        self.runner.remember(call)
        verdict = self.decide(call, source=source)
        if verdict.outcome != "allow":
            events = list(verdict.events)
        else:
            refused = self.admit(call)
            if refused is not None:
                events = [*verdict.events, *refused]
            else:
                try:
                    events = [*verdict.events, *self.execute(call, cancelled)]
                finally:
                    self.release(call.call_id)
        return events, self.result_of(events, call)

    def result_of(self, events: list[ev.Event], call: CallSpec | None = None) -> dict[str, Any]:
        """The ``run_tool`` result dict from the terminal event in ``events``."""
        return self.runner.result_of(events, call)

    def statistics(self) -> RunnerStats:
        """A snapshot of calls in flight and timeout counts."""
        return self.runner.statistics()
