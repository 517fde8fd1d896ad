"""The Supervisor's core deleting a project's history: refusals, routing, waiting for a stop."""

from __future__ import annotations

from pathlib import Path

from runtime.lifecycle import effects as fx
from tests.runtime.lifecycle.helpers import error_of, of
from tests.runtime.lifecycle.test_supervisor_core import ask, make_core, start

DONE = {"project_id": "p1", "deleted_events": 3, "deletion_seq": 9}


def test_a_running_project_is_refused_with_project_running(tmp_path: Path) -> None:
    core, _ = make_core(tmp_path)
    start(core, tmp_path / "r")
    error = error_of(ask(core, "delete_project", {"project_id": "p1"}))
    assert error["code"] == "project_running"
    assert "stop it first with `roost project stop p1`" in error["message"]


def test_a_stopped_project_goes_to_the_journal_and_its_answer_to_the_client(
    tmp_path: Path,
) -> None:
    core, _ = make_core(tmp_path)
    effects = ask(core, "delete_project", {"project_id": "p1", "deleted_by": "ops@h"})
    assert effects == [fx.DeleteHistory(project_id="p1", deleted_by="ops@h", reply_to="client")]
    # While it is under way, neither a second deletion nor a start of that id is accepted.
    refused = error_of(ask(core, "delete_project", {"project_id": "p1"}))
    assert refused["code"] == "project_running"
    (tmp_path / "r").mkdir()
    started = ask(core, "start_project", {"root": str(tmp_path / "r"), "project_id": "p1"})
    assert error_of(started)["code"] == "project_running"
    answer = core.deleted("p1", "client", DONE, None)
    assert of(answer, fx.Answer) == [fx.Answer(to="client", ok=True, result=DONE)]
    assert [s.name for s in of(start(core, tmp_path / "r"), fx.Spawn)] == ["project:p1"]


def test_the_journals_error_is_answered_and_the_id_is_free_again(tmp_path: Path) -> None:
    core, _ = make_core(tmp_path)
    ask(core, "delete_project", {"project_id": "p1"})
    error = {"code": "project_not_found", "message": "no project 'p1'", "details": {}}
    assert core.deleted("p1", "client", None, error) == [
        fx.Answer(to="client", ok=False, error=error)
    ]
    assert ask(core, "delete_project", {"project_id": "p1"})[0] == fx.DeleteHistory(
        project_id="p1", reply_to="client"
    )


def test_a_project_still_stopping_is_deleted_once_its_actor_is_gone(tmp_path: Path) -> None:
    core, _ = make_core(tmp_path)
    start(core, tmp_path / "r")
    ask(core, "stop_project", {"project_id": "p1"})
    assert ask(core, "delete_project", {"project_id": "p1"}) == []
    assert core.child_exited("addr-project:p1") == [
        fx.DeleteHistory(project_id="p1", reply_to="client")
    ]


def test_a_journal_crash_answers_the_deletions_it_had(tmp_path: Path) -> None:
    core, _ = make_core(tmp_path)
    ask(core, "delete_project", {"project_id": "p1"})
    effects = core.child_exited("journal-1")
    (answer,) = of(effects, fx.Answer)
    assert answer.error is not None and answer.error["code"] == "journal_error"
    assert "project list --all" in answer.error["message"]
    refused = error_of(ask(core, "delete_project", {"project_id": "p1"}))
    assert refused["code"] == "journal_error"


def test_an_invalid_id_is_refused(tmp_path: Path) -> None:
    core, _ = make_core(tmp_path)
    error = error_of(ask(core, "delete_project", {"project_id": "_roost.deletions"}))
    assert error["code"] == "bad_request"
