"""The read-back's allowances (:mod:`soak.readback`)."""

from __future__ import annotations

from soak.readback import READ_BACK_S_PER_EVENT, first_verify_allowance
from soak.turns import Turn, TurnAck, TurnResult


def _result(seq: object, *, ok: bool = True) -> TurnResult:
    turn = Turn(project_id="p0", conversation_id="c0", index=0, correlation_id="k", key="b")
    ack: TurnAck | None = {"seq": seq, "event_id": "e", "correlation_id": "k"} if ok else None
    return TurnResult(turn=turn, ok=ok, latency_ms=1.0, ack=ack)


def test_the_first_verify_is_allowed_time_for_every_event_up_to_the_highest_acked_seq() -> None:
    results = [_result(10), _result(2_400_000), _result(None), _result(7, ok=False)]
    assert first_verify_allowance(results) == 2_400_000 * READ_BACK_S_PER_EVENT
    assert first_verify_allowance([]) == 0
