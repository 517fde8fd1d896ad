"""Telling a turn's outcome apart from a late answer to an earlier request."""

from __future__ import annotations

from actors.messages import Reply
from runtime.daemon.backend import _stale_outcome, _wait_correlation


def test_a_waited_user_message_gets_a_correlation_id_when_it_has_none() -> None:
    args = {"event": {"type": "user.message", "data": {}}, "wait": True}
    stamped, expected = _wait_correlation("send_event", args)
    assert expected is not None and expected.startswith("corr-")
    assert stamped["event"]["correlation_id"] == expected
    assert "correlation_id" not in args["event"]  # the caller's dict is left alone


def test_a_given_correlation_id_is_kept() -> None:
    args = {"event": {"type": "user.message", "correlation_id": "mine"}, "wait": True}
    assert _wait_correlation("send_event", args) == (args, "mine")


def test_other_requests_expect_no_outcome() -> None:
    for op, args in [
        ("send_event", {"event": {"type": "user.message"}, "wait": False}),
        ("send_event", {"event": {"type": "conversation.cancel"}, "wait": True}),
        ("get_projection", {"key": "timeline"}),
    ]:
        assert _wait_correlation(op, args) == (args, None)


def test_only_an_outcome_for_another_correlation_is_stale() -> None:
    outcome = {"seq": 3, "event_id": "e", "correlation_id": "a", "outcome": "llm.completed"}
    assert not _stale_outcome(Reply(ok=True, result=outcome), "a")
    assert _stale_outcome(Reply(ok=True, result=outcome), "b")
    assert _stale_outcome(Reply(ok=True, result=outcome), None)
    ack = {"seq": 3, "event_id": "e", "correlation_id": "a"}
    assert not _stale_outcome(Reply(ok=True, result=ack), "b")
    assert not _stale_outcome(Reply(ok=False, error={"code": "x"}), "b")
    assert not _stale_outcome(None, "b")
