"""The execution stages of the tool-call pipeline: quotas, running a tool, what comes back.

:class:`ToolRunnerCore` is plain code behind :class:`runtime.execution.pipeline.ToolPipeline`
(which decides calls and is what the actors hold). For one allowed call:
:meth:`~ToolRunnerCore.admit` (quotas) → :meth:`~ToolRunnerCore.execute` (run with the
timeout → caps → sensitivity scan → redaction) → :meth:`~ToolRunnerCore.release`. Each
step returns event payloads (signals first, the terminal ``tool.completed`` /
``tool.failed`` last); the caller appends them.

**Timeouts.** A call may run ``tool_timeout_ms`` (or its ``timeout_ms`` argument, capped by
it). Every tool function runs on one of this core's worker threads, which the caller waits
on: the ToolRunner actor's own thread for a ``sync`` call of an ``inline`` tool
(``ToolSpec.inline``: file and asset tools), one of its worker threads for every other call.
Tools that run processes or reach the network enforce the timeout themselves (killing the
process tree) and get :data:`SELF_ENFORCED_GRACE_S` more before the runner gives up on them;
in-process tools (files, assets) are abandoned at the deadline: Python cannot kill a
thread, so an abandoned tool keeps running in the background until it returns, and its
result is thrown away. Every timeout counts
per (project, tool) for the life of the runner: ``tool.timeout`` carries the count, and
``security.repeated_timeout_failures`` is added when the count reaches
``tool_timeout_alert_threshold`` and again at every multiple of it.

**Workflows.** A ``workflow`` tool (``workflow.run.<key>``) returns a plan; the runner runs
its steps in order, each decided by the ``decide_step`` the pipeline gives (its ``decide``
with source ``workflow`` and the workflow's spec) and run through the same path (no second
quota), as call ``<call_id>.step-<index>``. Step signals (decisions, security signals,
timeouts) are kept; their terminal events are not (the workflow call has one). The first
step refused or failed fails the workflow with that step's reason plus ``step`` (index) and
``step_tool``.
"""

from __future__ import annotations

import functools
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any, TypedDict

import msgspec

from events import catalog as ev
from events.catalog import SIGNAL_TYPES
from runtime.errors import ToolError
from runtime.execution.results import (
    NO_FINDINGS,
    ScanSummary,
    check_caps,
    completed_events,
    mask_events,
    tool_kind,
)
from runtime.execution.workers import WORKERS, give_up_time
from runtime.guard.secrets.masking import SecretMasker
from runtime.guard.secrets.redaction import SecretKind, redact
from runtime.guard.secrets.sources import SecretSources, project_sources
from runtime.option_table import RuntimeOptions
from runtime.policy.decisions import Verdict
from runtime.tools.base import CallSpec, ToolContext, ToolFn, ToolSpec
from runtime.tools.registry import ToolRegistry

__all__ = ["SELF_ENFORCED_GRACE_S", "RunnerStats", "ToolRunnerCore", "tool_kind"]

SELF_ENFORCED_GRACE_S = 2.0
"""Seconds a tool that enforces its own timeout (commands, HTTP) gets past the deadline."""

_POLL_S = 0.05


_REMEMBERED_CALLS = 4096


class RunnerStats(msgspec.Struct, frozen=True, kw_only=True):
    """A snapshot of the runner's quotas and timeout counters."""

    in_flight: int
    """Admitted calls not yet released."""
    per_conversation: dict[str, int]
    """Calls in flight per conversation."""
    timeout_counts: dict[str, int]
    """Timeouts so far per tool."""


class _StepResult(TypedDict):
    """One step's part of a workflow's result."""

    tool: str
    call_id: str
    result: Any


class _StepFailure(ToolError):
    """A workflow step's failure, already counted (timeouts) and signalled by the step."""


def _signals(events: list[ev.Event]) -> list[ev.Event]:
    return [e for e in events if e.__struct_config__.tag in SIGNAL_TYPES]


def _from_reason(reason: Mapping[str, Any], **extra: Any) -> _StepFailure:
    fields = {k: v for k, v in reason.items() if k not in ("code", "message")}
    code = str(reason.get("code", "tool_error"))
    message = str(reason.get("message", code))
    return _StepFailure(code, message, **{**fields, **extra})


class ToolRunnerCore:
    """Quotas, execution, caps and scans for one project's tool calls (thread-safe)."""

    def __init__(
        self,
        project_id: str,
        root: str,
        options: Mapping[str, Any],
        registry: ToolRegistry,
        *,
        decide_step: Callable[[CallSpec, ToolSpec], Verdict],
    ) -> None:
        self.project_id = project_id
        self.root = root
        self.options = dict(options)
        self.settings = RuntimeOptions.of(self.options)
        """The options, typed."""
        self.registry = registry
        self._decide = decide_step
        """Decides a workflow step, given the workflow's spec (never ``ask``)."""
        self._lock = threading.Lock()
        self._in_flight: dict[str, str | None] = {}
        self._per_conversation: dict[str, int] = {}
        self._timeouts: dict[str, int] = {}
        self._calls: OrderedDict[str, CallSpec] = OrderedDict()

    def secret_masker(self) -> SecretMasker:
        """The masker of the secret values known now (``runtime.guard.secrets.sources``)."""
        return self._secrets.masker()

    @functools.cached_property
    def _secrets(self) -> SecretSources:
        """The project's secret sources, found at the first call that needs them."""
        return project_sources(self.root, self.options)

    def remember(self, call: CallSpec) -> None:
        """Keep ``call`` so :meth:`result_of` can name its conversation and correlation."""
        with self._lock:
            self._calls[call.call_id] = call
            self._calls.move_to_end(call.call_id)
            while len(self._calls) > _REMEMBERED_CALLS:
                self._calls.popitem(last=False)

    # --- quotas -----------------------------------------------------------------------

    def admit(self, call: CallSpec) -> list[ev.Event] | None:
        """Count ``call`` in flight and return None, or return its ``tool.failed`` refusal.

        ``tool_max_concurrency`` applies project-wide, then
        ``tool_max_concurrency_per_conversation`` to calls of a conversation (0: none may
        run). A call already in flight is admitted again without counting twice.
        """
        self.remember(call)
        with self._lock:
            if call.call_id in self._in_flight:
                return None
            limit = self.settings.tool_max_concurrency
            if len(self._in_flight) >= limit:
                reason = {
                    "code": "max_concurrency_reached",
                    "message": f"{limit} tool calls are already running in this project "
                    "(tool_max_concurrency); retry when one finishes",
                    "limit": limit,
                }
                return [ev.ToolFailed(call_id=call.call_id, name=call.name, reason=reason)]
            conversation = call.conversation_id
            if conversation is not None:
                per = self.settings.tool_max_concurrency_per_conversation
                if self._per_conversation.get(conversation, 0) >= per:
                    reason = {
                        "code": "conversation_max_concurrency_reached",
                        "message": f"{per} tool calls are already running in conversation "
                        f"{conversation} (tool_max_concurrency_per_conversation)",
                        "limit": per,
                    }
                    return [ev.ToolFailed(call_id=call.call_id, name=call.name, reason=reason)]
                self._per_conversation[conversation] = (
                    self._per_conversation.get(conversation, 0) + 1
                )
            self._in_flight[call.call_id] = conversation
        return None

    def release(self, call_id: str) -> None:
        """Stop counting ``call_id`` in flight; unknown or already released ids are ignored."""
        with self._lock:
            if call_id not in self._in_flight:
                return
            conversation = self._in_flight.pop(call_id)
            if conversation is not None:
                left = self._per_conversation.get(conversation, 1) - 1
                if left > 0:
                    self._per_conversation[conversation] = left
                else:
                    self._per_conversation.pop(conversation, None)

    def statistics(self) -> RunnerStats:
        """A snapshot of calls in flight and timeout counts."""
        with self._lock:
            return RunnerStats(
                in_flight=len(self._in_flight),
                per_conversation=dict(sorted(self._per_conversation.items())),
                timeout_counts=dict(sorted(self._timeouts.items())),
            )

    # --- running ----------------------------------------------------------------------

    def execute(self, call: CallSpec, cancelled: threading.Event) -> list[ev.Event]:
        """Run an allowed, admitted call; return its signals and terminal event."""
        return self._execute(call, cancelled, None)

    def _execute(
        self, call: CallSpec, cancelled: threading.Event, limit_s: float | None
    ) -> list[ev.Event]:
        self.remember(call)
        started = time.monotonic()
        entry = self.registry.get(call.name)
        if entry is None:
            reason = {
                "code": "unknown_tool",
                "message": f"there is no tool named {call.name!r}; "
                f"`roost project tools {self.project_id}` lists the tools",
            }
            return [ev.ToolFailed(call_id=call.call_id, name=call.name, reason=reason)]
        spec, fn = entry
        timeout_s = self._timeout_s(call.args, limit_s)
        steps = NO_FINDINGS
        if spec.kind == "workflow":
            signals, outcome, steps = self._workflow(call, spec, fn, cancelled, timeout_s)
        else:
            signals, outcome = self._attempt(call, spec, fn, cancelled, timeout_s)
        return self._finish(call, spec, outcome, started=started, signals=signals, steps=steps)

    def _timeout_s(self, args: Mapping[str, Any], limit_s: float | None) -> float:
        limit_ms = self.settings.tool_timeout_ms
        asked = args.get("timeout_ms")
        if isinstance(asked, int) and not isinstance(asked, bool) and asked >= 1:
            limit_ms = min(limit_ms, asked)
        seconds = limit_ms / 1000
        return seconds if limit_s is None else max(0.0, min(seconds, limit_s))

    def _attempt(
        self,
        call: CallSpec,
        spec: ToolSpec,
        fn: ToolFn,
        cancelled: threading.Event,
        timeout_s: float,
    ) -> tuple[list[ev.Event], dict[str, Any] | ToolError]:
        """Run ``fn`` on a worker thread; give up on it at the deadline (see the module doc)."""
        ctx = ToolContext(
            root=self.root,
            options=self.options,
            call_id=call.call_id,
            project_id=self.project_id,
            conversation_id=call.conversation_id,
            timeout_s=timeout_s,
            cancelled=cancelled,
        )
        outcome: list[dict[str, Any] | ToolError] = []
        done = threading.Event()

        def work() -> None:
            try:
                result = fn(ctx, dict(call.args))
                if not isinstance(result, dict):
                    raise ToolError(
                        "tool_error",
                        f"{call.name} returned {type(result).__name__}, not an object",
                        reason="not_an_object",
                    )
                outcome.append(result)
            except ToolError as e:
                outcome.append(e)
            except BaseException as e:  # every other failure becomes the call's reason
                outcome.append(
                    ToolError(
                        "tool_error",
                        f"{call.name} raised {type(e).__name__}: {e}",
                        exception=type(e).__name__,
                    )
                )
            finally:
                done.set()

        WORKERS.run(work)
        grace = SELF_ENFORCED_GRACE_S if spec.runs_commands or spec.network_capable else 0.0
        deadline = ctx.started_at + timeout_s + grace + spec.cold_start_s
        give_up_at = deadline
        while not done.wait(max(0.0, min(_POLL_S, give_up_at - time.monotonic()))):
            now = time.monotonic()
            if cancelled.is_set() and give_up_at == deadline:  # a cancel's wait (see give_up_time)
                give_up_at = give_up_time(deadline, now, grace, spec.kills_on_cancel)
            if now >= give_up_at:
                signals = list(ctx.signals)
                if cancelled.is_set():
                    return signals, ToolError(
                        "conversation_cancelled",
                        f"{call.name} was cancelled and abandoned while it ran",
                        abandoned=True,
                    )
                timeout_ms = round(timeout_s * 1000)
                return signals, ToolError(
                    "timeout",
                    f"{call.name} did not finish within {timeout_ms} ms and was abandoned "
                    "(an in-process tool cannot be killed; it may still finish in the "
                    "background, its result is discarded)",
                    timeout_ms=timeout_ms,
                    abandoned=True,
                )
        return list(ctx.signals), outcome[0]

    def _count_timeout(self, call: CallSpec) -> list[ev.Event]:
        with self._lock:
            count = self._timeouts.get(call.name, 0) + 1
            self._timeouts[call.name] = count
        threshold = self.settings.tool_timeout_alert_threshold
        out: list[ev.Event] = [
            ev.ToolTimeout(call_id=call.call_id, timeout_count=count, tool=call.name)
        ]
        if threshold > 0 and count % threshold == 0:
            out.append(
                ev.SecurityRepeatedTimeoutFailures(
                    tool=call.name, timeout_count=count, threshold=threshold
                )
            )
        return out

    def _finish(
        self,
        call: CallSpec,
        spec: ToolSpec,
        outcome: dict[str, Any] | ToolError,
        *,
        started: float,
        signals: list[ev.Event],
        steps: ScanSummary,
    ) -> list[ev.Event]:
        """Caps → known secret values masked → sensitivity scan → redaction, then the terminal.

        Every event of the call passes here before it is returned for the journal: the
        result or the failure's reason, and the signals the tool recorded, are masked
        (:func:`runtime.execution.results.mask_events`).
        """
        masker = self.secret_masker()
        events, masked = mask_events(masker, list(signals))
        if isinstance(outcome, dict):
            try:
                check_caps(
                    outcome,
                    self.settings.tool_max_output_bytes,
                    self.settings.tool_max_artifact_bytes,
                )
            except ToolError as e:
                outcome = e
        duration_ms = int((time.monotonic() - started) * 1000)
        if isinstance(outcome, ToolError):
            if outcome.code == "timeout" and not isinstance(outcome, _StepFailure):
                events.extend(self._count_timeout(call))
            reason, count = masker.mask(outcome.reason())
            masked += count
            if masked:
                events.append(
                    ev.SecuritySensitiveArtifactDetected(
                        finding_count=masked,
                        finding_kinds=[SecretKind.SECRET_VALUE.value],
                        tool=call.name,
                        call_id=call.call_id,
                    )
                )
            failed = ev.ToolFailed(
                call_id=call.call_id,
                name=call.name,
                duration_ms=duration_ms,
                reason=redact(reason),
            )
            return [*events, failed]
        result, count = masker.mask(outcome)
        return [
            *events,
            *completed_events(call, spec, result, duration_ms, steps, secret_values=masked + count),
        ]

    # --- workflows --------------------------------------------------------------------

    def _workflow(
        self,
        call: CallSpec,
        spec: ToolSpec,
        fn: ToolFn,
        cancelled: threading.Event,
        timeout_s: float,
    ) -> tuple[list[ev.Event], dict[str, Any] | ToolError, ScanSummary]:
        deadline = time.monotonic() + timeout_s
        signals, plan = self._attempt(call, spec, fn, cancelled, timeout_s)
        if isinstance(plan, ToolError):
            return signals, plan, NO_FINDINGS
        steps = plan.get("steps")
        if not isinstance(steps, list):
            error = ToolError("tool_error", f"{call.name} returned no steps", reason="no_steps")
            return signals, error, NO_FINDINGS
        results: list[_StepResult] = []
        flags: set[str] = set()
        kinds: set[str] = set()
        count = 0
        for index, step in enumerate(steps):
            name = str(step.get("tool", "")) if isinstance(step, dict) else ""
            where = {"step": index, "step_tool": name}
            if cancelled.is_set():
                error = ToolError("conversation_cancelled", f"{call.name} was cancelled", **where)
                return signals, error, NO_FINDINGS
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                message = f"{call.name} ran out of time before step {index}"
                return signals, ToolError("timeout", message, **where), NO_FINDINGS
            step_call = CallSpec(
                call_id=f"{call.call_id}.step-{index}",
                name=name,
                args=dict(step.get("args") or {}) if isinstance(step, dict) else {},
                conversation_id=call.conversation_id,
                correlation_id=call.correlation_id,
                causation_id=call.causation_id,
            )
            refused = self._decide_step(step_call, spec, signals)
            if refused is not None:
                return signals, _from_reason(refused.reason, **where), NO_FINDINGS
            events = self._execute(step_call, cancelled, remaining)
            signals.extend(_signals(events))
            deadline += _cold_starts_s(events)  # a server's start is not the workflow's time
            terminal = events[-1]
            if isinstance(terminal, ev.ToolFailed):
                return signals, _from_reason(terminal.reason, **where), NO_FINDINGS
            assert isinstance(terminal, ev.ToolCompleted)
            flags.update(terminal.risk_flags)
            count += int(terminal.result.get("sensitivity_findings_count", 0))
            kinds.update(terminal.result.get("sensitivity_finding_kinds", []))
            results.append(
                _StepResult(tool=name, call_id=step_call.call_id, result=terminal.result["result"])
            )
        summary = ScanSummary(
            risk_flags=sorted(flags), findings_count=count, finding_kinds=sorted(kinds)
        )
        return signals, {"workflow": plan.get("workflow"), "steps": results}, summary

    def _decide_step(
        self, step: CallSpec, workflow: ToolSpec, signals: list[ev.Event]
    ) -> ev.ToolFailed | None:
        """Decide a step; record its signals; return its refusal, or None to run it."""
        verdict = self._decide(step, workflow)
        signals.extend(_signals(verdict.events))
        if verdict.outcome == "allow":
            return None
        terminal = verdict.events[-1]
        assert isinstance(terminal, ev.ToolFailed), verdict.outcome
        return terminal

    # --- results ----------------------------------------------------------------------

    def result_of(self, events: list[ev.Event], call: CallSpec | None = None) -> dict[str, Any]:
        """The SPEC section 6 ``run_tool`` dict from the terminal event in ``events``.

        ``call`` supplies the conversation and correlation of a failure; without it the
        runner uses the calls it has seen. Raises ``ValueError`` without a terminal event.
        """
        terminal = next(
            (
                e
                for e in reversed(events)
                if isinstance(e, ev.ToolCompleted | ev.ToolFailed | ev.ToolCancelled)
            ),
            None,
        )
        if terminal is None:
            raise ValueError("the events hold no tool.completed, tool.failed or tool.cancelled")
        if isinstance(terminal, ev.ToolCompleted) and terminal.result.get("status") == "ok":
            return dict(terminal.result)
        if call is None:
            with self._lock:
                call = self._calls.get(terminal.call_id)
        failed = _as_failure(terminal)
        reason, duration_ms = dict(failed.reason), failed.duration_ms
        return {
            "status": "error",
            "tool": terminal.name,
            "call_id": terminal.call_id,
            "conversation_id": call.conversation_id if call is not None else None,
            "correlation_id": (call.correlation_id or None) if call is not None else None,
            "duration_ms": duration_ms,
            "reason": redact(reason),
        }


@functools.singledispatch
def _as_failure(terminal: ev.Event) -> ev.ToolFailed:
    """A call's terminal event that is no success, as the failure it reports."""
    raise TypeError(f"{type(terminal).__name__} does not end a call")


@_as_failure.register
def _(terminal: ev.ToolCompleted) -> ev.ToolFailed:
    reason = {"code": "tool_error", "message": "the result has no status"}
    return ev.ToolFailed(
        call_id=terminal.call_id,
        name=terminal.name,
        duration_ms=terminal.duration_ms,
        reason=reason,
    )


@_as_failure.register
def _(terminal: ev.ToolFailed) -> ev.ToolFailed:
    return terminal


@_as_failure.register
def _(terminal: ev.ToolCancelled) -> ev.ToolFailed:
    reason = {"code": terminal.reason, "message": "the call was cancelled"}
    return ev.ToolFailed(call_id=terminal.call_id, name=terminal.name, reason=reason)


def _cold_starts_s(events: list[ev.Event]) -> float:
    """Seconds a step spent starting MCP servers (``mcp.server_started``/``_restarted``)."""
    starts = (e for e in events if isinstance(e, ev.McpServerStarted | ev.McpServerRestarted))
    return sum(e.start_ms for e in starts) / 1000
