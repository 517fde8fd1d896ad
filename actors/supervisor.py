"""The Supervisor: one per daemon, a shell over :class:`SupervisorCore`.

On :class:`Boot` it starts the Journal and restores the projects that were running; it
starts and stops projects, restarts a Journal that dies (every project is told its new
address; unanswered appends are re-sent with the same idempotency keys) and a Project
that dies or escalates, within its restart intensity. Every decision is the core's
(``runtime/lifecycle/supervisor_core.py``); this module hands it each message and carries
out the effects it returns.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from actors.dispatch import handles
from actors.journal import JournalActor
from actors.messages import (
    Boot,
    DeleteProject,
    Escalate,
    JournalMoved,
    ProjectDeleted,
    ReadResult,
    ReadTypes,
    Request,
    SetupJournal,
    SetupProject,
)
from actors.project import ProjectActor
from actors.shell import CoreShell
from runtime.lifecycle import effects as fx
from runtime.lifecycle.daemon_watch import watch_daemon
from runtime.lifecycle.supervisor_core import JOURNAL, SupervisorCore
from runtime.settings_table import JOURNAL_KINDS, JournalKind

__all__ = ["SupervisorActor"]


class SupervisorActor(CoreShell):
    """Root of the actor tree."""

    kind = "supervisor"
    parent_kind = "thespian-admin"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.core = SupervisorCore()
        self.daemon_pid = 0
        self.journal_kind: JournalKind = JOURNAL_KINDS[0]
        """The journal's kind, from :class:`Boot` (before it: the default)."""

    @handles(Boot)
    def _boot(self, message: Boot, sender: Any) -> None:
        self.journal_kind = message.journal
        if message.daemon_pid:
            self.daemon_pid = message.daemon_pid
            watch_daemon(message.daemon_pid, message.daemon_started)
        self.run(self.core.boot(message.home, sender))

    @handles(SetupJournal)
    def _journal_ready(self, message: SetupJournal, sender: Any) -> None:
        self.run(self.core.journal_ready(message.error))

    @handles(ReadResult)
    def _restore(self, message: ReadResult, sender: Any) -> None:
        self.run(self.core.restore(message.events))

    @handles(Request)
    def _request(self, message: Request, sender: Any) -> None:
        """A request from the daemon's ``ask`` is answered to its sender."""
        if message.reply_to is None:
            message = Request(call=message.call, reply_to=sender)
        self.run(self.core.request(message.call, message.reply_to, message))

    @handles(Escalate)
    def _escalated(self, message: Escalate, sender: Any) -> None:
        self.run(self.core.escalated(message.project_id, message.child, message.error))

    @handles(ProjectDeleted)
    def _deleted(self, message: ProjectDeleted, sender: Any) -> None:
        outcome = (message.result, message.error)
        self.run(self.core.deleted(message.project_id, message.reply_to, *outcome))

    def on_exit(self) -> None:
        """The actor system is shutting down: restart nothing from now on."""
        self.core.exit()

    def child_name(self, address: Any) -> str | None:
        """``journal`` or ``project:ID`` for a live child's address."""
        if self.journal is not None and address == self.journal:
            return "journal"
        for project_id, project in self.core.projects.items():
            if address == project.address:
                return f"project:{project_id}"
        return None

    def overflow_scope(self, name: str) -> str | None:
        """A project's mailbox overflow goes into that project's record; others are logged."""
        if name.startswith("project:"):
            return name.split(":", 1)[1]
        return None

    def run(self, effects: list[fx.Effect]) -> None:
        """Carry out ``effects`` in order (the Journal's address may have changed)."""
        self.journal = self.core.journal
        super().run(effects)

    def carry_out(self, effect: fx.Effect) -> None:
        """Create a child, read the lifecycle, tell the projects of a new Journal."""
        match effect:
            case fx.Spawn():
                self._spawn(effect)
            case fx.DeleteHistory(project_id=project_id, deleted_by=by, reply_to=reply_to):
                self.send(
                    self.journal,
                    DeleteProject(project_id=project_id, deleted_by=by, reply_to=reply_to),
                )
            case fx.ReadLifecycle():
                self.send(self.journal, ReadTypes(types=["project.started", "project.stopped"]))
            case fx.PeerChanged():
                update = JournalMoved(journal=self.journal)
                for project in self.core.projects.values():
                    self.send(project.address, update)
                self.appends.resend()

    def _spawn(self, spawn: fx.Spawn) -> None:
        """Create the child ``spawn`` names (:data:`_SPAWNS`) and send it its set-up."""
        _SPAWNS.get(spawn.name, SupervisorActor._spawn_project)(self, spawn)

    def _spawn_journal(self, spawn: fx.Spawn) -> None:
        core = self.core
        address = self.createActor(JournalActor)
        core.spawned(JOURNAL, address)
        self.journal = address
        # Every actor that appends over the journal link descends from this process.
        roots = [os.getpid(), *([self.daemon_pid] if self.daemon_pid else [])]
        self.send(
            address, SetupJournal(home=core.home, journal=self.journal_kind, peer_roots=roots)
        )

    def _spawn_project(self, spawn: fx.Spawn) -> None:
        core = self.core
        address = self.createActor(ProjectActor)
        core.spawned(spawn.name, address)
        project_id = spawn.name.split(":", 1)[1]
        project = core.projects[project_id]
        setup = SetupProject(
            project_id=project_id,
            root=project.root,
            options=project.options,
            journal=self.journal,
            restore=spawn.restore,
            reply_to=spawn.reply_to,
            correlation_id=spawn.correlation_id,
        )
        self.send(address, setup)


_SPAWNS: dict[str, Callable[[SupervisorActor, fx.Spawn], None]] = {
    JOURNAL: SupervisorActor._spawn_journal,
}
"""A child's name -> how the Supervisor creates it; any other name is a project's."""
