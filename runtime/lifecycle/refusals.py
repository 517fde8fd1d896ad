"""Why the Supervisor refuses to start or delete a project: rules as data, the first wins.

Each rule is ``(applies, error)``: whether it applies to a project id, given what the
Supervisor holds (:class:`ProjectRegistry`), and the error the request then gets.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

from runtime.errors import (
    AlreadyStartedError,
    JournalError,
    ProjectRunningError,
    RoostError,
)

__all__ = [
    "DELETE_REFUSALS",
    "START_REFUSALS",
    "ProjectRegistry",
    "Refusal",
    "journal_restarting",
    "refuse",
]


class ProjectRegistry(Protocol):
    """What the rules read of the Supervisor's state."""

    @property
    def projects(self) -> Mapping[str, object]:
        """The running projects."""

    @property
    def deleting(self) -> Mapping[str, object]:
        """The projects whose deletion is under way."""

    @property
    def journal(self) -> object:
        """The Journal's address (None while it is restarted)."""


def refuse(refusals: tuple[Refusal, ...], registry: ProjectRegistry, project_id: str) -> None:
    """Raise the error of the first of ``refusals`` that applies to ``project_id``."""
    for applies, error in refusals:
        if applies(registry, project_id):
            raise error(project_id)


def journal_restarting(project_id: str) -> JournalError:
    """A deletion that needs the Journal while it is being restarted."""
    return JournalError(
        "the journal is restarting; retry `roost project delete` in a moment",
        project_id=project_id,
    )


Refusal = tuple[Callable[[ProjectRegistry, str], bool], Callable[[str], RoostError]]
"""When a request about a project is refused, and the error it gets."""

START_REFUSALS: tuple[Refusal, ...] = (
    (
        lambda core, project_id: project_id in core.projects,
        lambda project_id: AlreadyStartedError(
            f"project {project_id} is already running", project_id=project_id
        ),
    ),
    (
        lambda core, project_id: project_id in core.deleting,
        lambda project_id: ProjectRunningError(
            f"project {project_id}'s history is being deleted; start it again once "
            "`roost project delete` has returned",
            project_id=project_id,
            reason="deleting",
        ),
    ),
)
"""Why ``start_project`` is refused (checked after its root, options and id)."""

DELETE_REFUSALS: tuple[Refusal, ...] = (
    (
        lambda core, project_id: project_id in core.projects,
        lambda project_id: ProjectRunningError(
            f"project {project_id} is running; stop it first with "
            f"`roost project stop {project_id}`, then delete it",
            project_id=project_id,
            reason="running",
        ),
    ),
    (
        lambda core, project_id: project_id in core.deleting,
        lambda project_id: ProjectRunningError(
            f"project {project_id}'s history is already being deleted",
            project_id=project_id,
            reason="deleting",
        ),
    ),
    (lambda core, project_id: core.journal is None, journal_restarting),
)
"""Why ``delete_project`` is refused, in order (checked after its id)."""
