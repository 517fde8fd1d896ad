"""The client's ``json`` frames against a real daemon: what is journaled is what was sent.

``user.message``'s ``llm`` directives are an open JSON object the journal keeps as given,
so they carry every kind of value the client may send: text of any script, integers up
to 64 bits (the journal keeps no more), floats, and the values msgspec writes its own
way (NaN as null, bytes as base64).
"""

from __future__ import annotations

import json

import msgspec
import pytest

from runtime.errors import BadRequestError
from tests.integration.conftest import Daemon, roost_cli

TEXT = 'héllo ✓ 🦜 שלום \u2028 \x00 "q" \\ \t end'
LLM: dict[str, object] = {
    "ints": [2**53 + 1, 2**63, 2**64 - 1, -(2**63), 0, -1],  # the journal keeps 64 bits
    "floats": [0.1, 1e16, 1.5e-7, -2.5, 1e300],
    "flags": [True, False, None],
    "nested": {"ключ": {"deep": [[["ü"]]]}},
    "odd": {"nan": float("nan"), "inf": float("inf"), "raw": b"\x00\xff"},
}


def journaled(daemon: Daemon, correlation_id: str) -> dict[str, object]:
    with daemon.client() as c:
        entries = c.incident_timeline("p1", "c1", 500, correlation_id)["entries"]
    sent = next(e for e in entries if e["type"] == "user.message")
    data: dict[str, object] = sent["data"]
    return data


def test_what_the_client_sends_is_journaled_as_msgspec_would_have_sent_it(
    daemon: Daemon, project_root: str
) -> None:
    with daemon.client() as c:
        c.start_project(project_root, project_id="p1")
        c.start_conversation("p1", conversation_id="c1")
        c.send_message("p1", "c1", TEXT, correlation_id="corr-codec", llm=LLM)
    expected = msgspec.json.decode(msgspec.json.encode({"content": TEXT, "llm": LLM}))
    assert expected["llm"]["odd"] == {"nan": None, "inf": None, "raw": "AP8="}
    assert journaled(daemon, "corr-codec") == expected


def test_the_cli_sends_any_text_as_typed(daemon: Daemon, project_root: str) -> None:
    with daemon.client() as c:
        c.start_project(project_root, project_id="p1")
        c.start_conversation("p1", conversation_id="c1")
    text = TEXT.replace("\x00", "")  # an argument cannot hold a NUL
    done = roost_cli(daemon.home, "--json", "send", "p1", "c1", text, "--wait")
    assert done.returncode == 0, done.stderr
    ack = json.loads(done.stdout)
    assert ack["outcome"] == "llm.completed"
    assert journaled(daemon, ack["correlation_id"])["content"] == text


def test_a_value_the_daemon_refuses_is_an_invalid_argument_not_a_malformed_frame(
    daemon: Daemon,
) -> None:
    with daemon.client() as c, pytest.raises(BadRequestError) as info:
        c.call("incident_timeline", {"project_id": "p1", "conversation_id": "c1", "after_seq": -1})
    assert info.value.details["reason"] == "invalid_args"
    with daemon.client() as c:  # a lone surrogate never leaves the client; the link stays
        with pytest.raises(UnicodeEncodeError):
            c.send_message("p1", "c1", "\udcff")
        assert c.ping()["pong"] is True
