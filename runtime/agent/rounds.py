"""Model rounds: the request sent to the model, and what its reply or failure records."""

from __future__ import annotations

from typing import Any

from events import catalog as ev
from events.envelope import NewEvent, new_call_id
from runtime.agent.effects import (
    AppendBatch,
    AskPolicy,
    Effect,
)
from runtime.agent.state import LoopState, TurnState
from runtime.llm.base import ModelReply, ModelRequest
from runtime.llm.resilience import ModelNote

__all__ = ["ModelRounds"]


def note_payload(note: ModelNote, round_: int) -> ev.Event:
    """The event of a retry or a breaker transition the model call met.

    ``llm.retried`` or ``llm.breaker_changed``.
    """
    if note.change is not None:
        return ev.LlmBreakerChanged(
            provider=note.provider,
            previous=note.change.previous,
            state=note.change.state,
            consecutive_failures=note.change.consecutive_failures,
            failure_threshold=note.failure_threshold,
            last_error=note.message,
            round=round_,
            elapsed_ms=note.elapsed_ms,
        )
    return ev.LlmRetried(
        round=round_,
        attempt=note.attempt,
        reason=note.reason,
        status=note.status,
        retry_after_ms=None if note.retry_after_s is None else round(note.retry_after_s * 1000),
        delay_ms=round(note.delay_s * 1000),
        message=note.message,
        elapsed_ms=note.elapsed_ms,
    )


class ModelRounds(LoopState):
    """The steps of a model round (one group of the core's)."""

    def _noted(self, notes: list[ModelNote], round_: int, corr: str, cause: str | None) -> Any:
        return [
            self._new(note_payload(note, round_), correlation_id=corr, causation_id=cause)
            for note in notes
        ]

    def model_replied(
        self, round_: int, reply: ModelReply, notes: list[ModelNote] | None = None
    ) -> list[Effect]:
        """The model answered round ``round_``: record its deltas, calls and message.

        ``notes``: the retries and breaker transitions of the call, recorded first.
        """
        turn = self.turn
        if turn is None or turn.round != round_ or turn.model_done:
            return []
        corr = turn.correlation_id
        cause = turn.round_event_id
        batch: list[NewEvent] = self._noted(notes or [], round_, corr, cause)
        for chunk in reply.deltas:
            batch.append(
                self._new(ev.AssistantDelta(content=chunk), correlation_id=corr, causation_id=cause)
            )
        for request in reply.tool_calls:
            mode = request.run_mode if request.run_mode in ("sync", "async") else "sync"
            batch.append(
                self._new(
                    ev.ToolRequested(
                        call_id=new_call_id(), name=request.name, args=request.args, run_mode=mode
                    ),
                    correlation_id=corr,
                    causation_id=cause,
                )
            )
        message = self._new(
            ev.AssistantMessage(content=reply.text, round=round_, usage=dict(reply.usage)),
            correlation_id=corr,
            causation_id=cause,
        )
        batch.append(message)
        if not reply.tool_calls:
            usage = dict(turn.usage)
            for key, value in reply.usage.items():
                usage[key] = usage.get(key, 0) + int(value)
            batch.append(
                self._new(
                    ev.LlmCompleted(
                        finish_reason=reply.finish_reason,
                        tool_call_count=turn.tool_call_count,
                        usage=usage,
                    ),
                    correlation_id=corr,
                    causation_id=message.event_id,
                )
            )
            return [AppendBatch(events=batch)]
        # The calls are decided before anything of this round is committed: the round's
        # reply, its calls and their decisions then go to the journal in one batch (one
        # commit instead of two). Nothing is lost by a crash meanwhile: the round had not
        # been recorded, so a restarted conversation simply asks the model again.
        self._draft = batch
        self._draft_calls = {
            e.data["call_id"]: self._spec_of(e) for e in batch if e.type == "tool.requested"
        }
        self._draft_verdicts = {}
        return [AskPolicy(call=spec) for spec in self._draft_calls.values()]

    def model_failed(
        self, round_: int, reason: str, message: str = "", notes: list[ModelNote] | None = None
    ) -> list[Effect]:
        """The model call of round ``round_`` failed: the turn ends with ``llm.failed``.

        ``reason`` is the stable code (``ModelError.reason``), ``message`` the provider's
        own words (``HTTP 404 from ...: model 'x' does not exist``); ``notes``, the call's
        retries and breaker transitions, are recorded before it.
        """
        turn = self.turn
        if turn is None or turn.round != round_ or turn.model_done:
            return []
        corr, cause = turn.correlation_id, turn.round_event_id
        return [
            AppendBatch(
                events=[
                    *self._noted(notes or [], round_, corr, cause),
                    self._new(
                        ev.LlmFailed(reason=reason, message=message),
                        correlation_id=corr,
                        causation_id=cause,
                    ),
                ]
            )
        ]

    def _request_messages(self) -> list[dict[str, Any]]:
        """The context window as the model gets it (``runtime.agent.window``)."""
        return self._sent.messages(self._context)

    def _model_request(self, turn: TurnState) -> ModelRequest:
        settings = self.settings
        timeout_s = settings.llm_timeout_ms / 1000
        return ModelRequest(
            messages=self._request_messages(),
            tools=self.tools,
            round=turn.round,
            directives=turn.directives if turn.round == 1 else None,
            model=settings.llm_model,
            system_prompt=settings.llm_system_prompt,
            temperature=settings.llm_temperature,
            max_tokens=settings.llm_max_tokens,
            timeout_s=timeout_s,
        )
