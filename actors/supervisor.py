"""The Supervisor: one per daemon. Starts the Journal and the Projects and supervises them.

On :class:`Boot` it starts the Journal actor, reads which projects were running when the
daemon last stopped or crashed (their last lifecycle event is ``project.started``) and
restores them from their events; one whose root contains ``ROOST_HOME`` or lies inside it
is not restored but recorded as failed (``SupervisorActor._refuse_restore``). A Journal
that dies is restarted and every project is told its new address (unanswered appends are
re-sent with the same idempotency keys). A Project that dies, or escalates a child's
failure, is restarted from its events within its restart intensity; beyond it the project
is marked failed.
"""

from __future__ import annotations

import os
import secrets
import signal
import threading
import time
from datetime import timedelta
from typing import Any

import psutil
from thespian.actors import ActorExitRequest, ChildActorExited, WakeupMessage

from actors.base import RoostActor, error_reply, utc_now
from actors.journal import JournalActor
from actors.messages import (
    ActorStarted,
    Boot,
    Escalate,
    PeerUpdate,
    ReadResult,
    ReadTypes,
    Reply,
    Request,
    SetupJournal,
    SetupProject,
)
from actors.project import ProjectActor
from events import catalog as ev
from events.envelope import format_at, new_correlation_id, new_event
from runtime.errors import (
    AlreadyStartedError,
    BadRequestError,
    InvalidRootPathError,
    ProjectNotFoundError,
)
from runtime.guard.ids import NAME_ID, check_id
from runtime.lifecycle.supervision import ChildNames, RestartPolicy

__all__ = ["SupervisorActor"]


def _home_conflict(root: str, home: str) -> str | None:
    from runtime.guard.paths import root_home_conflict  # noqa: PLC0415

    return root_home_conflict(root, home)


def watch_daemon(pid: int, started: float, interval_s: float = 0.5) -> threading.Thread:
    """Take the actor tree down if the daemon process dies.

    Thespian daemonizes its admin (``setsid`` and a double fork), so the actor processes
    are not the daemon's descendants and would outlive a daemon killed by a signal. A
    thread in the Supervisor watches the daemon's pid (and create time, against pid
    reuse) and, once it is gone, kills this process group: the admin and every actor.
    """

    def alive() -> bool:
        try:
            proc = psutil.Process(pid)
            same = abs(proc.create_time() - started) < 1.0
            return bool(same and proc.status() != psutil.STATUS_ZOMBIE)
        except psutil.NoSuchProcess:
            return False

    def watch() -> None:
        while alive():
            time.sleep(interval_s)
        os.killpg(os.getpgid(0), signal.SIGKILL)

    thread = threading.Thread(target=watch, name="roost-daemon-watch", daemon=True)
    thread.start()
    return thread


class SupervisorActor(RoostActor):
    """Root of the actor tree."""

    kind = "supervisor"
    parent_kind = "thespian-admin"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.home = ""
        self.projects: dict[str, dict[str, Any]] = {}  # id -> {address, root, options, started_at}
        self.by_address = ChildNames()
        self.stopping: set[str] = set()
        self.failed: dict[str, str] = {}
        self.restarts = RestartPolicy(3, 5000)
        self.journal_restarts = RestartPolicy(10, 60000)
        self.journal_crash: tuple[str, int] | None = None
        """When the Journal was seen dead and its restart count, until that is recorded."""
        self.boot_reply: Any = None
        self.exiting = False
        self.pids: dict[str, int] = {"supervisor": os.getpid()}
        self.daemon_pid = 0

    def handle(self, message: Any, sender: Any) -> None:
        """Boot, serve requests, supervise."""
        if isinstance(message, Boot):
            self.home = message.home
            self.boot_reply = sender
            if message.daemon_pid:
                self.daemon_pid = message.daemon_pid
                watch_daemon(message.daemon_pid, message.daemon_started)
            self._start_journal()
        elif isinstance(message, SetupJournal):
            if self.boot_reply is not None:
                self.send(self.journal, ReadTypes(types=["project.started", "project.stopped"]))
        elif isinstance(message, ReadResult):
            self._restore(message)
        elif isinstance(message, Request):
            if message.reply_to is None:
                message = Request(op=message.op, args=message.args, reply_to=sender)
            try:
                self._request(message)
            except Exception as e:
                self.send(message.reply_to, error_reply(e))
        elif isinstance(message, ActorStarted):
            self.pids[message.role] = message.pid
        elif isinstance(message, ChildActorExited):
            self._child_exited(message.childAddress)
        elif isinstance(message, Escalate):
            self._escalated(message)
        elif isinstance(message, WakeupMessage):
            self._restart_project(message.payload)

    # --- boot --------------------------------------------------------------------------

    def _start_journal(self) -> None:
        self.journal = self.createActor(JournalActor)
        # Every actor that appends over the journal link descends from this process.
        roots = [os.getpid(), *([self.daemon_pid] if self.daemon_pid else [])]
        self.send(self.journal, SetupJournal(home=self.home, peer_roots=roots))

    def _restore(self, result: ReadResult) -> None:
        last: dict[str, Any] = {}
        for envelope in result.events:
            last[envelope.project_id] = envelope
        for project_id, envelope in sorted(last.items()):
            if envelope.type != "project.started" or project_id in self.projects:
                continue
            root = str(envelope.data.get("root", ""))
            options = dict(envelope.data.get("options", {}))
            conflict = _home_conflict(root, self.home)
            if conflict is not None:
                self._refuse_restore(project_id, root, conflict)
                continue
            self._create_project(project_id, root, options, restore=True, started_at=envelope.at)
            self.log.info("project_restored", project_id=project_id)
        if self.boot_reply is not None:
            self.send(self.boot_reply, Reply(ok=True, result={"restored": sorted(self.projects)}))
            self.boot_reply = None

    def _refuse_restore(self, project_id: str, root: str, conflict: str) -> None:
        """Leave a project whose root reaches ``ROOST_HOME`` down, visibly.

        It is listed as failed (``diagnostics`` health ``{status: failed, reason}``), logged
        as ``project_restore_refused`` and ended in the journal with ``project.stopped
        {reason}``, so the next daemon start does not try again; the other projects and the
        daemon come up as usual.
        """
        reason = f"invalid_root_path: {conflict}"
        self.failed[project_id] = reason
        self.log.error("project_restore_refused", project_id=project_id, root=root, reason=reason)
        stopped = new_event(
            ev.ProjectStopped(reason=reason),
            project_id=project_id,
            at=format_at(utc_now()),
            correlation_id=new_correlation_id(),
        )
        self.append([stopped])

    # --- requests ----------------------------------------------------------------------

    def _request(self, request: Request) -> None:
        op, args = request.op, request.args
        if op == "start_project":
            self._start_project(request)
        elif op == "stop_project":
            self._stop_project(request)
        elif op == "list_projects":
            live = {
                pid: {"root": p["root"], "started_at": p["started_at"], "status": "running"}
                for pid, p in sorted(self.projects.items())
            }
            live["_actors"] = dict(self.pids)
            for pid, reason in self.failed.items():
                live.setdefault(pid, {"status": "failed", "reason": reason})
            self.send(request.reply_to, Reply(ok=True, result=live))
        elif "project_id" in args:
            project = self.projects.get(str(args["project_id"]))
            if project is None:
                raise ProjectNotFoundError(
                    f"no running project {args['project_id']!r}; start it with "
                    "`roost project start ROOT --id ID`",
                    project_id=args["project_id"],
                )
            self.send(project["address"], request)
        else:
            raise BadRequestError(f"unknown operation {op!r}", reason="unknown_op", op=op)

    def _start_project(self, request: Request) -> None:
        from runtime.policy.options import validate_options  # noqa: PLC0415

        args = request.args
        root_arg = args.get("root")
        if not isinstance(root_arg, str) or not root_arg:
            raise InvalidRootPathError("the project root must be a non-empty path", root=root_arg)
        root = os.path.realpath(root_arg)
        if not os.path.isabs(root_arg) or not os.path.isdir(root):
            raise InvalidRootPathError(
                f"project root {root_arg!r} must be an absolute path to an existing directory",
                root=root_arg,
            )
        conflict = _home_conflict(root, self.home)
        if conflict is not None:
            where = "contains" if conflict == "contains_roost_home" else "lies inside"
            raise InvalidRootPathError(
                f"project root {root_arg!r} {where} the daemon's state directory ROOST_HOME "
                f"({self.home}), which tools must never reach; choose another root or run "
                "the daemon with another --home",
                root=root_arg,
                reason=conflict,
                roost_home=self.home,
            )
        options = validate_options(args.get("options") or {})
        project_id = args.get("project_id") or f"p-{secrets.token_hex(4)}"
        check_id(
            project_id,
            name="project id",
            shape=NAME_ID,
            reason="invalid_project_id",
            field="project_id",
        )
        if project_id in self.projects:
            raise AlreadyStartedError(
                f"project {project_id} is already running", project_id=project_id
            )
        if options.get("strict_asset_loading"):
            from runtime.tools.asset_store import load_assets  # noqa: PLC0415

            load_assets(root, strict=True)
        self.failed.pop(project_id, None)
        self._create_project(
            project_id,
            root,
            options,
            restore=False,
            reply_to=request.reply_to,
            started_at=format_at(utc_now()),
        )

    def _create_project(
        self,
        project_id: str,
        root: str,
        options: dict[str, Any],
        *,
        restore: bool,
        started_at: str,
        reply_to: Any = None,
    ) -> None:
        address = self.createActor(ProjectActor)
        self.projects[project_id] = {
            "address": address,
            "root": root,
            "options": options,
            "started_at": started_at,
        }
        self.by_address.add(address, project_id)
        self.send(
            address,
            SetupProject(
                project_id=project_id,
                root=root,
                options=options,
                journal=self.journal,
                restore=restore,
                reply_to=reply_to,
            ),
        )

    def _stop_project(self, request: Request) -> None:
        project_id = str(request.args["project_id"])
        project = self.projects.pop(project_id, None)
        if project is None:
            raise ProjectNotFoundError(f"no running project {project_id!r}", project_id=project_id)
        self.stopping.add(project_id)
        self.send(project["address"], ActorExitRequest())
        stopped = new_event(
            ev.ProjectStopped(),
            project_id=project_id,
            at=format_at(utc_now()),
            correlation_id=new_correlation_id(),
        )
        reply_to = request.reply_to

        def done(answer: Any) -> None:
            if hasattr(answer, "envelopes"):
                self.send(
                    reply_to, Reply(ok=True, result={"project_id": project_id, "stopped": True})
                )
            else:
                self.send(reply_to, Reply(ok=False, error=answer.error))

        self.append([stopped], then=done)

    # --- supervision -------------------------------------------------------------------

    def _child_exited(self, address: Any) -> None:
        if self.exiting:
            return
        if address == self.journal:
            decision = self.journal_restarts.on_crash("journal")
            self.log.error("journal_exited", restart_count=decision.restart_count)
            self.journal = None
            # Recorded once the replacement runs (the journal is down now).
            self.journal_crash = (format_at(utc_now()), decision.restart_count)
            self.wakeupAfter(timedelta(seconds=decision.delay_s), payload="journal")
            return
        project_id = self.by_address.pop(address)
        if project_id is None:
            return
        if project_id in self.stopping:
            self.stopping.discard(project_id)
            return
        project = self.projects.get(project_id)
        if project is None or project["address"] != address:
            return
        self._crashed(project_id, "process exited")

    def _escalated(self, message: Escalate) -> None:
        project = self.projects.get(message.project_id)
        if project is None:
            return
        self.stopping.add(message.project_id)
        self.send(project["address"], ActorExitRequest())
        self._crashed(message.project_id, f"escalated: {message.child}")

    def _crashed(self, project_id: str, reason: str) -> None:
        project = self.projects.pop(project_id)
        child = f"project:{project_id}"
        decision = self.restarts.on_crash(child)
        correlation = new_correlation_id()
        crashed = new_event(
            ev.ActorCrashed(actor=child, reason=reason, restart_count=decision.restart_count),
            project_id=project_id,
            at=format_at(utc_now()),
            correlation_id=correlation,
        )
        if not decision.restart:
            escalated = new_event(
                ev.ActorEscalated(actor=child, reason=reason, restart_count=decision.restart_count),
                project_id=project_id,
                at=format_at(utc_now()),
                correlation_id=correlation,
                causation_id=crashed.event_id,
            )
            self.append([crashed, escalated])
            self.failed[project_id] = reason
            self.log.error("project_failed", project_id=project_id, reason=reason)
            return
        self.append([crashed])
        self.wakeupAfter(
            timedelta(seconds=decision.delay_s),
            payload={
                "project_id": project_id,
                "project": project,
                "restart_count": decision.restart_count,
                "cause": crashed.event_id,
                "correlation": correlation,
            },
        )

    def _restart_journal(self) -> None:
        self._start_journal()
        update = PeerUpdate(journal=self.journal)
        for project in self.projects.values():
            self.send(project["address"], update)
        self.resend_appends()
        self._record_journal_restart()

    def _record_journal_restart(self) -> None:
        """``actor.crashed`` / ``actor.restarted`` of the Journal in every running project.

        The Journal serves every project, so its crash belongs to each one's record (and,
        like the tool runner's, to each conversation's incident report).
        """
        if self.journal_crash is None:
            return
        crashed_at, restart_count = self.journal_crash
        self.journal_crash = None
        for project_id in sorted(self.projects):
            correlation = new_correlation_id()
            crashed = new_event(
                ev.ActorCrashed(
                    actor="journal", reason="process exited", restart_count=restart_count
                ),
                project_id=project_id,
                at=crashed_at,
                correlation_id=correlation,
            )
            restarted = new_event(
                ev.ActorRestarted(actor="journal", reason="restarted", restart_count=restart_count),
                project_id=project_id,
                at=format_at(utc_now()),
                correlation_id=correlation,
                causation_id=crashed.event_id,
            )
            self.append([crashed, restarted])

    def on_exit(self) -> None:
        """The actor system is shutting down: restart nothing from now on."""
        self.exiting = True

    def child_name(self, address: Any) -> str | None:
        """``journal`` or ``project:ID`` for a live child's address."""
        if self.journal is not None and address == self.journal:
            return "journal"
        for project_id, project in self.projects.items():
            if address == project["address"]:
                return f"project:{project_id}"
        return None

    def overflow_scope(self, name: str) -> str | None:
        """A project's mailbox overflow goes into that project's record; others are logged."""
        if name.startswith("project:"):
            return name.split(":", 1)[1]
        return None

    def _restart_project(self, payload: Any) -> None:
        if self.exiting:
            return
        if payload == "journal":
            self._restart_journal()
            return
        if not isinstance(payload, dict) or payload["project_id"] in self.projects:
            return
        project = payload["project"]
        self._create_project(
            payload["project_id"],
            project["root"],
            project["options"],
            restore=True,
            started_at=project["started_at"],
        )
        restarted = new_event(
            ev.ActorRestarted(
                actor=f"project:{payload['project_id']}",
                reason="restarted from its events",
                restart_count=payload["restart_count"],
            ),
            project_id=payload["project_id"],
            at=format_at(utc_now()),
            correlation_id=payload["correlation"],
            causation_id=payload["cause"],
        )
        self.append([restarted])
