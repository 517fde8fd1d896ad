"""Telling a turn's outcome apart from a late answer to an earlier request."""

from __future__ import annotations

from actors.messages import Reply
from runtime.daemon.backend import _expected_correlation, _stale_outcome


def test_a_waited_user_message_expects_the_outcome_of_its_own_correlation() -> None:
    args = {"event": {"type": "user.message", "correlation_id": "mine"}, "wait": True}
    assert _expected_correlation("send_event", args) == "mine"


def test_other_requests_expect_no_outcome() -> None:
    for op, args in [
        ("send_event", {"event": {"type": "user.message"}, "wait": False}),
        ("send_event", {"event": {"type": "conversation.cancel"}, "wait": True}),
        ("get_projection", {"key": "timeline"}),
    ]:
        assert _expected_correlation(op, args) is None


def test_only_an_outcome_for_another_correlation_is_stale() -> None:
    outcome = {"seq": 3, "event_id": "e", "correlation_id": "a", "outcome": "llm.completed"}
    assert not _stale_outcome(Reply(ok=True, result=outcome), "a")
    assert _stale_outcome(Reply(ok=True, result=outcome), "b")
    assert _stale_outcome(Reply(ok=True, result=outcome), None)
    ack = {"seq": 3, "event_id": "e", "correlation_id": "a"}
    assert not _stale_outcome(Reply(ok=True, result=ack), "b")
    assert not _stale_outcome(Reply(ok=False, error={"code": "x"}), "b")
    assert not _stale_outcome(None, "b")
