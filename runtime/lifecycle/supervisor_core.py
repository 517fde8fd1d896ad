"""The Supervisor's decisions as plain code: messages in, effects out.

:class:`SupervisorCore` holds the daemon-wide lifecycle state (the running projects, the
failed ones, the Journal's and the projects' restart intensity) and decides what to do
about each message: which projects to restore at boot (not one whose root reaches
``ROOST_HOME``: it is recorded as failed and stopped), the validation of
``start_project``'s root, options and id, where a request goes, what a crash of the
Journal or of a Project leads to. It returns :mod:`effects <runtime.lifecycle.effects>`;
``actors/supervisor.py`` carries them out. Clocks and the id generator are injected, so
the core is unit-tested without an actor system (``tests/runtime/lifecycle``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any

import msgspec

from events import catalog as ev
from events.envelope import Envelope, format_at, new_correlation_id, new_event
from runtime.errors import BadRequestError, JournalError, ProjectNotFoundError, WireError
from runtime.guard.ids import NAME_ID, check_id
from runtime.guard.workspace import root_home_conflict
from runtime.lifecycle.effects import (
    Answer,
    AppendThen,
    Child,
    DeleteHistory,
    Effect,
    Log,
    PeerChanged,
    ReadLifecycle,
    Send,
    Spawn,
    Stop,
    Wakeup,
    answer_after,
    error_reply,
)
from runtime.lifecycle.new_project import check_new_project, check_root
from runtime.lifecycle.records import ProjectListing, ProjectRecord, project_listing
from runtime.lifecycle.refusals import DELETE_REFUSALS, START_REFUSALS, journal_restarting, refuse
from runtime.lifecycle.supervision import (
    ChildNames,
    RestartPolicy,
    crash_events,
    process_exited,
    restarted_event,
)
from runtime.wire.dispatch import op_handlers
from runtime.wire.op_args import (
    DeleteProjectArgs,
    ListProjectsArgs,
    ProjectArgs,
    StartProjectArgs,
)
from runtime.wire.ops import Call

__all__ = ["JOURNAL", "ProjectRecord", "SupervisorCore", "project_child", "utc_now"]

JOURNAL = "journal"
"""The Journal's child name (and its wakeup payload)."""


def project_child(project_id: str) -> str:
    """A project's child name: ``project:<id>``."""
    return f"project:{project_id}"


def utc_now() -> datetime:
    """The lifecycle cores' default clock (UTC)."""
    return datetime.now(UTC)


class SupervisorCore:
    """One daemon's projects, the Journal, and what their failures lead to."""

    def __init__(
        self,
        *,
        clock: Callable[[], datetime] = utc_now,
        new_id: Callable[[], str] = new_correlation_id,
        restarts: RestartPolicy | None = None,
        journal_restarts: RestartPolicy | None = None,
        is_dead: Callable[[int], bool] = process_exited,
    ) -> None:
        self.is_dead = is_dead
        """Whether a project's host process has exited (checked before a request goes to it)."""
        self.clock = clock
        self.new_id = new_id
        self.home = ""
        self.journal: Any = None
        self.projects: dict[str, ProjectRecord] = {}
        self.by_address = ChildNames()
        self.stopping: set[str] = set()
        self.failed: dict[str, str] = {}
        self.restarting: dict[str, list[tuple[Call[Any], Any, Any]]] = {}
        """Projects waiting for their restart's backoff, with the requests held for them."""
        self.deleting: dict[str, DeleteHistory] = {}
        """Projects whose deletion is under way (sent to the Journal, or waiting for the
        project's actor to be gone), and who waits for each."""
        self.delete_sent: set[str] = set()
        """Those of :attr:`deleting` the Journal was asked to delete."""
        self.restarts = restarts or RestartPolicy(3, 5000)
        self.journal_restarts = journal_restarts or RestartPolicy(10, 60000)
        self.journal_crash: tuple[str, int] | None = None
        """When the Journal was seen dead and its restart count, until that is recorded."""
        self.boot_reply: Any = None
        self.exiting = False
        self.pids: dict[str, int] = {"supervisor": os.getpid()}

    # --- children ------------------------------------------------------------------------

    def address(self, name: str) -> Any:
        """The address of the child ``name`` (``journal`` or ``project:<id>``)."""
        if name == JOURNAL:
            return self.journal
        return self.projects[name.split(":", 1)[1]].address

    def spawned(self, name: str, address: Any) -> None:
        """The shell created the child ``name`` at ``address``."""
        if name == JOURNAL:
            self.journal = address
            return
        project_id = name.split(":", 1)[1]
        self.projects[project_id].address = address
        self.by_address.add(address, project_id)
        self.pids.pop(name, None)  # a former host's pid, until the new one announces its own

    def actor_started(self, role: str, pid: int) -> None:
        """A descendant announced its pid."""
        self.pids[role] = pid

    # --- boot ----------------------------------------------------------------------------

    def boot(self, home: str, reply_to: Any) -> list[Effect]:
        """Start the Journal; ``reply_to`` hears which projects were restored."""
        self.home = home
        self.boot_reply = reply_to
        return [Spawn(name=JOURNAL)]

    def journal_ready(self, error: WireError | None = None) -> list[Effect]:
        """The Journal is set up: at boot, read which projects were running.

        ``error`` (its store did not open): at boot the boot fails with it, at once; later
        it is logged (every append fails with ``journal_error`` until a restart).
        """
        if error is not None:
            if self.boot_reply is None:
                return [Log(level="error", event="journal_not_open", fields={"error": error})]
            reply_to, self.boot_reply = self.boot_reply, None
            return [Answer(to=reply_to, ok=False, error=error)]
        return [ReadLifecycle()] if self.boot_reply is not None else []

    def restore(self, events: Iterable[Envelope]) -> list[Effect]:
        """Restore each project whose last lifecycle event is ``project.started``."""
        last: dict[str, Envelope] = {}
        for envelope in events:
            last[envelope.project_id] = envelope
        effects: list[Effect] = []
        for project_id, envelope in sorted(last.items()):
            if envelope.type != "project.started" or project_id in self.projects:
                continue
            root = str(envelope.data.get("root", ""))
            options = dict(envelope.data.get("options", {}))
            conflict = root_home_conflict(root, self.home)
            if conflict is not None:
                effects += self._refuse_restore(project_id, root, conflict)
                continue
            effects += self._create(project_id, root, options, restore=True, at=envelope.at)
            effects.append(
                Log(level="info", event="project_restored", fields={"project_id": project_id})
            )
        if self.boot_reply is not None:
            restored = {"restored": sorted(self.projects)}
            effects.append(Answer(to=self.boot_reply, ok=True, result=restored))
            self.boot_reply = None
        return effects

    def _refuse_restore(self, project_id: str, root: str, conflict: str) -> list[Effect]:
        """Leave a project whose root reaches ``ROOST_HOME`` down, visibly.

        It is listed as failed (``diagnostics`` health ``{status: failed, reason}``), logged
        as ``project_restore_refused`` and ended in the journal with ``project.stopped
        {reason}``, so the next daemon start does not try again; the other projects and the
        daemon come up as usual.
        """
        reason = f"invalid_root_path: {conflict}"
        self.failed[project_id] = reason
        fields = {"project_id": project_id, "root": root, "reason": reason}
        return [
            Log(level="error", event="project_restore_refused", fields=fields),
            AppendThen(events=[self._stopped_event(project_id, reason)]),
        ]

    def _stopped_event(
        self, project_id: str, reason: str | None = None, correlation_id: str | None = None
    ) -> Any:
        """``project.stopped``, under the stop request's correlation.

        A fresh correlation for the runtime's own stop (a refused restore).
        """
        payload = ev.ProjectStopped(reason=reason) if reason else ev.ProjectStopped()
        return new_event(
            payload,
            project_id=project_id,
            at=format_at(self.clock()),
            correlation_id=correlation_id or self.new_id(),
        )

    # --- requests ------------------------------------------------------------------------

    def request(self, call: Call[Any], reply_to: Any, message: Any) -> list[Effect]:
        """Serve or route a client request (``message`` is passed on as it came)."""
        try:
            handler = _OPS.get(call.op)
            if handler is None:
                raise BadRequestError(
                    f"unknown operation {call.op!r}", reason="unknown_op", op=call.op
                )
            effects: list[Effect] = handler(self, call, reply_to, message)
            return effects
        except Exception as e:
            return [error_reply(reply_to, e)]

    def op_stop_project(self, call: Call[ProjectArgs], reply_to: Any, message: Any) -> list[Effect]:
        """``stop_project``: stop its actors, then record ``project.stopped``."""
        return self._stop_project(call.args.project_id, reply_to, call.correlation())

    def op_list_projects(
        self, call: Call[ListProjectsArgs], reply_to: Any, message: Any
    ) -> list[Effect]:
        """``list_projects``: the running and failed projects (the daemon adds the rest)."""
        return [Answer(to=reply_to, ok=True, result=self.list_projects())]

    def _to_project(self, call: Call[Any], reply_to: Any, message: Any) -> list[Effect]:
        """A request for a project or one of its conversations: on to its Project actor."""
        project_id = str(call.args.project_id)
        held = self.restarting.get(project_id)
        if held is not None:  # its host is being restarted: served by the new one
            held.append((call, reply_to, message))
            return []
        project = self.projects.get(project_id)
        pid = self.pids.get(project_child(project_id))
        if project is not None and pid is not None and self.is_dead(pid):
            # killed, and Thespian has not told us yet: restart it, hold the request
            crashed = self.child_exited(project.address)
            if project_id not in self.projects:
                return crashed + self._to_project(call, reply_to, message)
        if project is None:
            raise ProjectNotFoundError(
                f"no running project {project_id!r}; start it with "
                "`roost project start ROOT --id ID`",
                project_id=project_id,
            )
        return [Send(to=Child(project_child(project_id)), message=message)]

    def list_projects(self) -> dict[str, ProjectListing | dict[str, int]]:
        """Running and failed projects, and the pids of the actors (``_actors``)."""
        return project_listing(self.projects, self.failed, self.pids)

    def op_start_project(
        self, call: Call[StartProjectArgs], reply_to: Any, message: Any
    ) -> list[Effect]:
        """``start_project``: check the root, options and id, then spawn the project."""
        correlation = call.correlation()
        new = check_new_project(call.args, self.home)
        project_id, root, options = new.project_id, new.root, new.options
        refuse(START_REFUSALS, self, project_id)
        if new.settings.strict_asset_loading:
            from runtime.tools.asset_store import load_assets  # noqa: PLC0415

            load_assets(root, strict=True)
        self.failed.pop(project_id, None)
        at = format_at(self.clock())
        spawn = self._create(project_id, root, options, restore=False, at=at, reply_to=reply_to)
        return [msgspec.structs.replace(s, correlation_id=correlation) for s in spawn]

    def check_root(self, root_arg: Any) -> str:
        """The resolved root of a new project, or :class:`InvalidRootPathError`."""
        return check_root(root_arg, self.home)

    def _create(
        self,
        project_id: str,
        root: str,
        options: dict[str, Any],
        *,
        restore: bool,
        at: str,
        reply_to: Any = None,
    ) -> list[Effect]:
        self.projects[project_id] = ProjectRecord(root, options, at)
        return [Spawn(name=project_child(project_id), restore=restore, reply_to=reply_to)]

    def _stop_project(self, project_id: str, reply_to: Any, correlation: str) -> list[Effect]:
        project = self.projects.pop(project_id, None)
        if project is None:
            raise ProjectNotFoundError(f"no running project {project_id!r}", project_id=project_id)
        self.stopping.add(project_id)
        stopped = self._stopped_event(project_id, correlation_id=correlation)
        done = answer_after(reply_to, {"project_id": project_id, "stopped": True})
        return [Stop(to=project.address), AppendThen(events=[stopped], then=done)]

    def op_delete_project(
        self, call: Call[DeleteProjectArgs], reply_to: Any, message: Any
    ) -> list[Effect]:
        """Delete a stopped project's history through the Journal (its answer: :meth:`deleted`).

        Refused with ``project_running`` while the project runs or is being deleted; a
        project whose stop is still under way (its actors exiting) is deleted once its
        actor is gone, so no late append of theirs outlives the deletion.
        """
        project_id = call.args.project_id
        check_id(
            project_id,
            name="project id",
            shape=NAME_ID,
            reason="invalid_project_id",
            field="project_id",
        )
        refuse(DELETE_REFUSALS, self, project_id)
        delete = DeleteHistory(
            project_id=project_id,
            deleted_by=call.args.deleted_by,
            reply_to=reply_to,
        )
        self.deleting[project_id] = delete
        if project_id in self.stopping:
            return []
        self.delete_sent.add(project_id)
        return [delete]

    def deleted(
        self,
        project_id: str,
        reply_to: Any,
        result: dict[str, Any] | None,
        error: WireError | None,
    ) -> list[Effect]:
        """The Journal answered a deletion: answer its client."""
        self.deleting.pop(project_id, None)
        self.delete_sent.discard(project_id)
        if error is not None or result is None:
            error = error or JournalError("the journal answered no deletion").to_wire()
            return [Answer(to=reply_to, ok=False, error=error)]
        self.failed.pop(project_id, None)
        fields = {"project_id": project_id, "deleted_events": result.get("deleted_events")}
        return [
            Log(level="info", event="project_deleted", fields=fields),
            Answer(to=reply_to, ok=True, result=result),
        ]

    def _deletions_lost(self) -> list[Effect]:
        """The Journal died: the deletions it was asked for are answered with an error.

        A deletion is one transaction, so it happened whole or not at all;
        ``roost project list --all`` shows which.
        """
        effects: list[Effect] = []
        for project_id in sorted(self.delete_sent):
            delete = self.deleting.pop(project_id)
            error = JournalError(
                f"the journal exited while deleting project {project_id}; see whether it is "
                "gone with `roost project list --all` and retry if it is not",
                project_id=project_id,
            )
            effects.append(error_reply(delete.reply_to, error))
        self.delete_sent.clear()
        return effects

    # --- supervision ---------------------------------------------------------------------

    def send_refused(self, send: Send) -> list[Effect]:
        """The shell could not deliver ``send``: nothing to undo (nothing counts forwards).

        Its client already got ``overloaded`` from the shell.
        """
        return []

    def child_exited(self, address: Any) -> list[Effect]:
        """A child's process is gone: restart it, or give up on it."""
        if self.exiting:
            return []
        if self.journal is not None and address == self.journal:
            decision = self.journal_restarts.on_crash(JOURNAL)
            self.journal = None
            # Recorded once the replacement runs (the journal is down now).
            self.journal_crash = (format_at(self.clock()), decision.restart_count)
            fields = {"restart_count": decision.restart_count}
            return [
                Log(level="error", event="journal_exited", fields=fields),
                *self._deletions_lost(),
                Wakeup(delay_s=decision.delay_s, payload=JOURNAL),
            ]
        project_id = self.by_address.pop(address)
        if project_id is None:
            return []
        if project_id in self.stopping:
            self.stopping.discard(project_id)
            waiting = self.deleting.get(project_id)
            if waiting is not None and project_id not in self.delete_sent:
                if self.journal is None:
                    self.deleting.pop(project_id)
                    return [error_reply(waiting.reply_to, journal_restarting(project_id))]
                self.delete_sent.add(project_id)
                return [waiting]
            return []
        project = self.projects.get(project_id)
        if project is None or project.address != address:
            return []
        return self._crashed(project_id, "process exited")

    def escalated(
        self, project_id: str, child: str, error: WireError | None = None
    ) -> list[Effect]:
        """A project gave up on one of its children: restart the project.

        With ``error``, its start could not be recorded (its client got the error): the
        project is forgotten, not restarted, so no request finds it half there.
        """
        project = self.projects.get(project_id)
        if project is None:
            return []
        if error is not None:
            del self.projects[project_id]
            self.stopping.add(project_id)
            fields = {"project_id": project_id, "error": error}
            return [
                Stop(to=project.address),
                Log(level="error", event="project_start_not_recorded", fields=fields),
            ]
        self.stopping.add(project_id)
        return [Stop(to=project.address), *self._crashed(project_id, f"escalated: {child}")]

    def _crashed(self, project_id: str, reason: str) -> list[Effect]:
        project = self.projects.pop(project_id)
        child = project_child(project_id)
        decision = self.restarts.on_crash(child)
        correlation = self.new_id()
        events = crash_events(
            project_id=project_id,
            actor=child,
            reason=reason,
            restart_count=decision.restart_count,
            at=format_at(self.clock()),
            correlation_id=correlation,
            escalation=None if decision.restart else reason,
        )
        held = self.restarting.pop(project_id, [])
        if not decision.restart:
            self.failed[project_id] = reason
            fields = {"project_id": project_id, "reason": reason}
            refused: list[Effect] = []
            for _call, waiting, _message in held:
                error = ProjectNotFoundError(
                    f"project {project_id} failed ({reason}) and is not restarted",
                    project_id=project_id,
                )
                refused.append(error_reply(waiting, error))
            return [
                AppendThen(events=events),
                Log(level="error", event="project_failed", fields=fields),
                *refused,
            ]
        self.restarting[project_id] = held
        payload = {
            "project_id": project_id,
            "project": project,
            "restart_count": decision.restart_count,
            "cause": events[0].event_id,
            "correlation": correlation,
        }
        return [AppendThen(events=events), Wakeup(delay_s=decision.delay_s, payload=payload)]

    def wakeup(self, payload: Any) -> list[Effect]:
        """A restart's backoff is over: restart the Journal or the project."""
        if self.exiting:
            return []
        if payload == JOURNAL:
            return [Spawn(name=JOURNAL), PeerChanged(peer=JOURNAL), *self._journal_restarted()]
        if not isinstance(payload, dict) or payload["project_id"] in self.projects:
            return []
        project_id = payload["project_id"]
        project: ProjectRecord = payload["project"]
        held = self.restarting.pop(project_id, [])
        effects = self._create(
            project_id, project.root, project.options, restore=True, at=project.started_at
        )
        for request in held:  # the new project holds them until it has read its events
            effects += self.request(*request)
        restarted = restarted_event(
            project_id=project_id,
            actor=project_child(project_id),
            reason="restarted from its events",
            restart_count=payload["restart_count"],
            at=format_at(self.clock()),
            correlation_id=payload["correlation"],
            cause=payload["cause"],
        )
        return [*effects, AppendThen(events=[restarted])]

    def _journal_restarted(self) -> list[Effect]:
        """``actor.crashed`` / ``actor.restarted`` of the Journal in every running project.

        The Journal serves every project, so its crash belongs to each one's record (and,
        like the tool runner's, to each conversation's incident report).
        """
        if self.journal_crash is None:
            return []
        crashed_at, restart_count = self.journal_crash
        self.journal_crash = None
        effects: list[Effect] = []
        for project_id in sorted(self.projects):
            correlation = self.new_id()
            (crashed,) = crash_events(
                project_id=project_id,
                actor=JOURNAL,
                reason="process exited",
                restart_count=restart_count,
                at=crashed_at,
                correlation_id=correlation,
            )
            restarted = restarted_event(
                project_id=project_id,
                actor=JOURNAL,
                reason="restarted",
                restart_count=restart_count,
                at=format_at(self.clock()),
                correlation_id=correlation,
                cause=crashed.event_id,
            )
            effects.append(AppendThen(events=[crashed, restarted]))
        return effects

    def exit(self) -> None:
        """The actor system is shutting down: restart nothing from now on."""
        self.exiting = True


_OPS = op_handlers(SupervisorCore, "supervisor", forward=SupervisorCore._to_project)
"""Each op that reaches the Supervisor, and its method (``_to_project``: on to the project)."""
