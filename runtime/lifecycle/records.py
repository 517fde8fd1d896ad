"""What the Supervisor keeps of each running project, and how ``list_projects`` shows them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict

__all__ = ["ProjectListing", "ProjectRecord", "project_listing"]


class ProjectListing(TypedDict, total=False):
    """A project as ``list_projects`` shows it: running (``root``, ``started_at``) or failed."""

    root: str
    """Its root."""
    started_at: str
    """When it started."""
    status: str
    """``running`` or ``failed``."""
    reason: str
    """Why it failed."""


class ProjectRecord:
    """A running project as the Supervisor knows it."""

    def __init__(self, root: str, options: dict[str, Any], started_at: str) -> None:
        self.root = root
        self.options = options
        self.started_at = started_at
        self.address: Any = None
        """Set by :meth:`SupervisorCore.spawned` once the shell created the actor."""


def project_listing(
    projects: Mapping[str, ProjectRecord], failed: Mapping[str, str], pids: Mapping[str, int]
) -> dict[str, ProjectListing | dict[str, int]]:
    """Running and failed projects by id, and the pids of the actors (``_actors``)."""
    live: dict[str, ProjectListing | dict[str, int]] = {
        pid: {"root": p.root, "started_at": p.started_at, "status": "running"}
        for pid, p in sorted(projects.items())
    }
    live["_actors"] = dict(pids)
    for pid, reason in failed.items():
        live.setdefault(pid, {"status": "failed", "reason": reason})
    return live
