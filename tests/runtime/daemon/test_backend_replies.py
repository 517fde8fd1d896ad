"""Telling a turn's outcome apart from a late answer to an earlier request."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

import pytest

from actors.messages import Reply
from runtime.daemon.backend import ActorBackend, _expected_correlation, _stale_outcome
from runtime.errors import RequestTimeoutError
from runtime.wire.host_link import HostReply
from tests.runtime.calls import call_of


def test_a_waited_user_message_expects_the_outcome_of_its_own_correlation() -> None:
    event = {"type": "user.message", "correlation_id": "mine"}
    assert _expected_correlation(call_of("send_event", event=event, wait=True)) == "mine"


def test_other_requests_expect_no_outcome() -> None:
    for call in [
        call_of("send_event", event={"type": "user.message"}, wait=False),
        call_of("send_event", event={"type": "conversation.cancel"}, wait=True),
        call_of("get_projection", key="timeline"),
    ]:
        assert _expected_correlation(call) is None


def test_only_an_outcome_for_another_correlation_is_stale() -> None:
    outcome = {"seq": 3, "event_id": "e", "correlation_id": "a", "outcome": "llm.completed"}
    assert not _stale_outcome(Reply(ok=True, result=outcome), "a")
    assert _stale_outcome(Reply(ok=True, result=outcome), "b")
    assert _stale_outcome(Reply(ok=True, result=outcome), None)
    ack = {"seq": 3, "event_id": "e", "correlation_id": "a"}
    assert not _stale_outcome(Reply(ok=True, result=ack), "b")
    assert not _stale_outcome(Reply(ok=False, error={"code": "x"}), "b")
    assert not _stale_outcome(None, "b")


def test_a_host_that_does_not_answer_in_time_is_a_timeout_naming_the_time_given() -> None:
    class SilentHosts:
        def ask(self, project_id: str, call: Any, deadline: float) -> HostReply:
            return HostReply(id=1, ok=False, error=None)  # the link gave up at the deadline

    backend: Any = SimpleNamespace(host_links=SilentHosts())
    with pytest.raises(RequestTimeoutError) as raised:
        ActorBackend.ask(backend, call_of("describe_project"), time.monotonic() + 2.0)
    assert 0 < raised.value.details["timeout_s"] <= 2.0  # the time given, not a clock reading
    assert raised.value.message.startswith("describe_project did not finish within ")
