"""Setting a run up: project roots with seed files, projects, conversations.

Each project gets its own temporary root holding :data:`SEED_FILES` (the model reads
``README.md`` on every turn). Failures to start are counted, not raised: the report says
how many of what was requested started.
"""

from __future__ import annotations

import os

from runtime.client import Client
from runtime.errors import RoostError
from soak.config import SoakConfig
from soak.monitor import Failures

LARGEST_TOKEN_BUDGET = 2**53 - 1
"""The largest integer option a project takes (``docs/configuration.md``): soak turns never
run out of budget."""

__all__ = ["SEED_FILES", "event_counts", "seed_root", "start_conversations", "start_projects"]

SEED_FILES: dict[str, str] = {
    "README.md": "# Soak project\n\nA seed file the model reads on every turn.\n" * 4,
    "src/app.py": 'def main() -> None:\n    print("hello from the soak project")\n',
    "docs/guide.md": "# Guide\n\nNothing to see here; the soak harness made this file.\n",
    "notes.txt": "soak seed notes\n",
}
"""Files every soak project root starts with."""


def seed_root(path: str) -> None:
    """Write :data:`SEED_FILES` under ``path``."""
    for name, text in SEED_FILES.items():
        target = os.path.join(path, name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "w", encoding="utf-8") as f:
            f.write(text)


def start_projects(
    client: Client,
    config: SoakConfig,
    workdir: str,
    run_id: str,
    failures: Failures,
    *,
    options: dict[str, object] | None = None,
) -> list[str]:
    """Start ``config.projects`` projects on fresh roots under ``workdir``; return their ids.

    Ids are ``soak-RUN-pN`` (unique per run, so a shared daemon is never confused). The
    projects' ``idle_passivation_ms`` is the run's, so idle conversations stop after it,
    and their ``token_budget`` is the largest allowed: a long ``chaos`` run makes hundreds
    of turns per conversation, and with the default budget (200,000 tokens, counted over
    each request's whole context) later turns would end at once in ``budget.exceeded``
    instead of doing the work the run is meant to measure. ``options`` are added to
    every project's (``slow-model``: its model adapter and endpoint).
    """
    started = []
    for i in range(config.projects):
        root = os.path.join(workdir, "roots", f"p{i}")
        seed_root(root)
        try:
            project = client.start_project(
                root,
                project_id=f"soak-{run_id}-p{i}",
                options={
                    "idle_passivation_ms": config.idle_passivation_ms,
                    "token_budget": LARGEST_TOKEN_BUDGET,
                    **(options or {}),
                },
            )
        except RoostError as e:
            failures.add("project", e.code, str(e))
            continue
        started.append(project)
    return started


def start_conversations(
    client: Client, projects: list[str], per_project: int, failures: Failures
) -> list[tuple[str, str]]:
    """Start ``per_project`` conversations (``c0``, ``c1``...) in each project."""
    started = []
    for project in projects:
        for j in range(per_project):
            try:
                started.append((project, client.start_conversation(project, f"c{j}")))
            except RoostError as e:
                failures.add("conversation", e.code, str(e))
    return started


def event_counts(client: Client, projects: list[str]) -> dict[str, int]:
    """Events per project now (``verify``'s count, which is also its stream version)."""
    counts = {}
    for project in projects:
        try:
            counts[project] = int(client.verify(project)["checked_events"])
        except RoostError:
            counts[project] = 0
    return counts
