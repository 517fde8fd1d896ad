"""A project stopped and started again under its id keeps its conversations."""

from __future__ import annotations

from tests.integration.conftest import Daemon


def test_a_project_started_again_keeps_its_conversations(daemon: Daemon, project_root: str) -> None:
    with daemon.client() as c:
        c.start_project(project_root, project_id="p1")
        c.start_conversation("p1", conversation_id="c1")
        c.send_message("p1", "c1", "first", correlation_id="corr-first", wait=True)
        before = c.get_projection("p1", "c1", "timeline")
        c.stop_project("p1")
        assert c.list_projects() == []
        assert c.start_project(project_root, project_id="p1") == "p1"
        ack = c.send_message("p1", "c1", "second", correlation_id="corr-second", wait=True)
        assert ack["outcome"] == "llm.completed"
        after = c.get_projection("p1", "c1", "timeline")
        assert after[: len(before)] == before
        assert {e["correlation_id"] for e in after[len(before) :]} == {"corr-second"}
        assert c.diagnostics("p1")["conversations"] == ["c1"]
        assert c.verify("p1")["ok"] is True
