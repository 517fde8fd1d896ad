"""The real backend: the Thespian actor system behind the daemon's socket.

Mutations and live state go to the actors (``ask`` through a private endpoint lent for
that one request by :class:`runtime.daemon.endpoints.EndpointPool`, so concurrent requests
never share one, and a connection that ends leaves nothing behind). Read-only queries —
incident timelines and reports, diagnostics (``live_views``), verification (``verify``),
subscriptions — read the journal directly from the daemon process: they never queue behind
a busy actor.

The actor system is ``multiprocQueueBase``: actors are processes talking over
multiprocessing queues, and nothing listens on a network interface. It is started
(``actor_system`` readies the process first) before the daemon opens its own (read-only)
journal connection, so no actor process inherits an open SQLite handle.
"""

from __future__ import annotations

import os
import secrets
import threading
import time
from collections.abc import Iterator
from typing import Any

import msgspec
import psutil

from actors.messages import Boot, Reply, Request
from actors.supervisor import SupervisorActor
from actors.thespian import mailbox
from actors.thespian import patches as thespian_tuning
from events.projections import get_projection
from events.view_types import TimelineEvent
from runtime.daemon import actor_system, live_views
from runtime.daemon.activity import ActivityFollower, LineEvents
from runtime.daemon.config import MAILBOX_DIR, DaemonConfig
from runtime.daemon.endpoints import EndpointPool
from runtime.daemon.host_link_client import HostLinks
from runtime.daemon.live_views import LiveProject
from runtime.daemon.verify import verify_project
from runtime.errors import (
    BadRequestError,
    DaemonUnreachableError,
    OverloadedError,
    ProjectNotFoundError,
    RequestError,
    RequestTimeoutError,
    error_from_wire,
)
from runtime.guard.home import roost_home
from runtime.journal import link as journal_link
from runtime.journal import views as journal_views
from runtime.journal.scope import Scope
from runtime.journal.seal import load_key
from runtime.journal.store import Journal
from runtime.logging import get_logger
from runtime.telemetry import start_telemetry, telemetry_status
from runtime.wire import counters
from runtime.wire.dispatch import op_handlers
from runtime.wire.op_args import (
    DeleteProjectArgs,
    InjectFaultArgs,
    ListProjectsArgs,
    ProjectArgs,
    ProjectEventsArgs,
    ProjectionArgs,
    ReportArgs,
    SendEventArgs,
    SubscribeArgs,
    TimelineArgs,
)
from runtime.wire.ops import Call, route_of, waits_for_turn

__all__ = ["ActorBackend", "create_backend"]

_POLL_S = 0.05


log = get_logger("runtime.daemon.backend")


def _expected_correlation(call: Call[Any]) -> str | None:
    """The correlation of the turn a request waits for (the gateway minted it), or None."""
    return call.correlation_id if waits_for_turn(call) else None


def _stale_outcome(reply: Any, expected: str | None) -> bool:
    """True for a turn outcome that answers another request than the one waiting."""
    if not isinstance(reply, Reply) or not reply.ok or not isinstance(reply.result, dict):
        return False
    result = reply.result
    return "outcome" in result and result.get("correlation_id") != expected


def _turn_wait_timeout(args: SendEventArgs, correlation_id: str) -> RequestTimeoutError:
    """The ``timeout`` of a client that waited ``wait_timeout_s`` for a turn still running."""
    wait_s = args.wait_timeout_s
    project, conversation = args.project_id, args.conversation_id
    return RequestTimeoutError(
        f"turn {correlation_id} did not end within the {wait_s:g} s waited for it "
        f"(--wait-timeout); it goes on: follow it with "
        f"`roost tail {project} {conversation}` or cancel it with "
        f"`roost cancel {project} {conversation}`",
        op="send_event",
        timeout_s=wait_s,
        correlation_id=correlation_id,
    )


def _no_answer(
    call: Call[Any], expected: str | None, within: str, timeout_s: float
) -> RequestTimeoutError:
    """The ``timeout`` of a request whose answer did not come ``within`` its time.

    A client waiting for its turn (``expected``: its correlation) hears how to follow the
    turn, which goes on (``--wait-timeout``).
    """
    if expected is not None:
        return _turn_wait_timeout(call.args, expected)
    return RequestTimeoutError(
        f"{call.op} did not finish {within}", op=call.op, timeout_s=timeout_s
    )


def create_backend(config: DaemonConfig) -> ActorBackend:
    """The default backend factory (``ROOST_BACKEND`` unset)."""
    return ActorBackend(config)


class ActorBackend:
    """Serves requests with the actor tree and the journal."""

    def __init__(self, config: DaemonConfig, *, boot_timeout_s: float = 120.0) -> None:
        from thespian.actors import ActorSystem  # noqa: PLC0415

        self.config = config
        load_key(config.home)  # made here at the first start; a bad key file fails the start
        actor_system.preload()
        actor_system.remove_spill_dir(os.path.join(config.home, MAILBOX_DIR))
        thespian_tuning.apply()
        counters.enable()  # shared with every actor process: status's ``counters``
        # Inherited by every actor process (forks of this one); never written to disk.
        token = secrets.token_hex(16)
        journal_link.configure(os.path.join(config.home, journal_link.LINK_SOCKET_NAME), token)
        # A project's requests go straight to its host (runtime.daemon.host_link_client).
        self.host_links = HostLinks(config.home, token)
        # Inherited too: no tool's Workspace reads or writes this home, whatever its options.
        roost_home.protect(config.home)
        actor_system.clean_up_dead_daemon()  # its cgroups are named after the home
        self.system = ActorSystem(
            "multiprocQueueBase", logDefs=actor_system.thespian_logging(config.home)
        )
        self._endpoints = EndpointPool(self._open_endpoint, max_idle=config.max_inflight)
        self.closed = False
        self._actors: dict[str, int] = {}
        try:
            self.supervisor = self.system.createActor(
                SupervisorActor, globalName="roost-supervisor"
            )
            me = psutil.Process()
            boot = Boot(
                home=config.home,
                journal=config.journal,
                daemon_pid=me.pid,
                daemon_started=me.create_time(),
            )
            reply = self.system.ask(self.supervisor, boot, boot_timeout_s)
            if isinstance(reply, Reply) and not reply.ok and reply.error:
                raise error_from_wire(reply.error)  # e.g. the Journal's store did not open
            if not isinstance(reply, Reply) or not reply.ok:
                raise DaemonUnreachableError(f"the actor system did not boot: {reply!r}")
            self.restored: list[str] = list((reply.result or {}).get("restored", []))
            self.journal = Journal.open(config.home, config.journal)
            # OpenTelemetry: None (and no SDK loaded) unless OTEL_* configure an exporter.
            self.telemetry = start_telemetry(
                os.environ,
                lambda seq: self.journal.read_all(after_seq=seq, limit=500),
                self.journal.max_seq(),
            )
            # `roost logs`: a line per project, conversation, turn and tool step
            self.activity = ActivityFollower(
                LineEvents(self.journal), self.journal.max_seq()
            ).start()
        except BaseException:
            self.system.shutdown()
            raise

    # --- actor requests -----------------------------------------------------------------

    def _open_endpoint(self) -> tuple[Any, Any]:
        manager = self.system.private()
        return manager.__enter__(), lambda: manager.__exit__(None, None, None)

    def endpoint_counts(self) -> dict[str, int]:
        """The pool's counts, and the endpoints Thespian's transport holds (``transport``)."""
        counts = self._endpoints.stats()
        core = getattr(getattr(self.system._systemBase, "transport", None), "_QCore", None)
        queues = getattr(core, "_my_tqueues", None)
        if isinstance(queues, dict):  # the main endpoint, and one per private() still open
            counts["transport"] = sum(1 for q in queues.values() if q is not None)
        return counts

    def ask(self, call: Call[Any], deadline: float) -> Any:
        """Send a request down the actor tree and wait for its reply.

        A turn's outcome (``send_event`` with ``wait``) may be answered twice: by the
        conversation, and again by its replacement if it crashed after answering. Such an
        answer names its correlation, and one that is not for this request is dropped.
        """
        op, args = call.op, call.args
        expected = _expected_correlation(call)
        timeout = max(0.05, deadline - time.monotonic())
        if route_of(op) in ("project", "conversation"):
            answer = self.host_links.ask(args.project_id, call, deadline)
            if answer is not None:
                if answer.ok:
                    return answer.result
                if answer.error is not None:
                    raise error_from_wire(answer.error)
                raise _no_answer(call, expected, f"within {timeout:.1f} s", round(timeout, 3))
            timeout = max(0.05, deadline - time.monotonic())
        with self._endpoints.lease() as lease:
            endpoint = lease.endpoint
            refused = mailbox.refusals()
            request = Request(call=call, reply_to=None)
            reply = endpoint.ask(self.supervisor, request, timeout)
            if reply is None and mailbox.refusals() != refused:
                raise OverloadedError(
                    f"{op} was refused: the actor system's mailbox is full (its reader is "
                    "stuck); retry later",
                    op=op,
                    reason="mailbox_full",
                )
            while _stale_outcome(reply, expected):
                reply = endpoint.listen(max(0.05, deadline - time.monotonic()))
            if reply is None:
                raise _no_answer(call, expected, f"within {timeout:.1f} s", round(timeout, 3))
            if not isinstance(reply, Reply):
                raise RequestError(f"unexpected answer to {op}: {type(reply).__name__}")
            lease.healthy = True  # its answer came: nothing late can reach the next request
        if not reply.ok:
            raise error_from_wire(reply.error or {})
        return reply.result

    # --- Backend interface --------------------------------------------------------------

    def handle(self, call: Call[Any], *, deadline: float) -> Any:
        """Serve one request with its ``op_<name>`` method, or down the actor tree."""
        return _OPS[call.op](self, call, deadline)

    def status(self, *, deadline: float) -> dict[str, Any]:
        """The backend's part of ``status``: the actors, links, telemetry and counters."""
        live = self._live(deadline)
        return {
            "projects": sum(1 for p in live.values() if p.get("status") == "running"),
            "actor_system": "multiprocQueueBase",
            "actors": self._actors,
            "admin_pid": self._admin_pid(),
            "telemetry": telemetry_status(self.telemetry),
            "endpoints": self.endpoint_counts(),
            "host_links": self.host_links.stats(),
            "counters": counters.snapshot(),
            "live_conversations": live_views.live_conversation_counts(live, self.ask, deadline),
        }

    # --- ops the backend serves itself (the others go down the actor tree: ``ask``) ------

    def op_list_projects(self, call: Call[ListProjectsArgs], deadline: float) -> Any:
        """The running projects; with ``all``, every project the journal knows."""
        live = self._live(deadline)
        running = live_views.running_projects(self.journal, live, self.ask, deadline)
        return live_views.all_projects(self.journal, live, running) if call.args.all else running

    def op_project_events(self, call: Call[ProjectEventsArgs], deadline: float) -> Any:
        """The project's own history, from the journal."""
        return journal_views.project_events_view(self.journal, call.args)

    def op_inject_fault(self, call: Call[InjectFaultArgs], deadline: float) -> Any:
        """Crash a hosted child, only when the daemon runs with ``ROOST_FAULT_INJECTION=1``."""
        if os.environ.get("ROOST_FAULT_INJECTION") != "1":
            raise BadRequestError(
                "inject_fault is refused: the daemon was not started with "
                "ROOST_FAULT_INJECTION=1 (a testing aid)",
                reason="fault_injection_disabled",
            )
        return self.ask(call, deadline)

    def op_get_projection(self, call: Call[ProjectionArgs], deadline: float) -> Any:
        """A conversation's projection; the ``timeline`` one is read from the journal."""
        if call.args.key == "timeline":
            return self._timeline(call, deadline)
        return self.ask(call, deadline)

    def op_stop_project(self, call: Call[ProjectArgs], deadline: float) -> Any:
        """Stop the project; the runs the stop ended are reviewed before it returns."""
        result = self.ask(call, deadline)
        self.host_links.forget(call.args.project_id)
        actor_system.review_dead_runs("project_stop", wait_s=5.0, project_id=call.args.project_id)
        return result

    def op_delete_project(self, call: Call[DeleteProjectArgs], deadline: float) -> Any:
        """Delete a stopped project's history (through the Supervisor and the Journal)."""
        result = self.ask(call, deadline)
        self.host_links.forget(call.args.project_id)
        return result

    def op_diagnostics(self, call: Call[ProjectArgs], deadline: float) -> Any:
        """The project's health, options, decisions and problems."""
        live = self._live(deadline)
        return live_views.diagnostics(self.journal, call.args.project_id, live, self.ask, deadline)

    def op_incident_timeline(self, call: Call[TimelineArgs], deadline: float) -> Any:
        """One page of the timeline, through the conversation's index."""
        return journal_views.timeline_view(self.journal, call.args)

    def op_incident_report(self, call: Call[ReportArgs], deadline: float) -> Any:
        """The incident report, from the journal."""
        return journal_views.report_view(self.journal, call.args)

    def op_verify(self, call: Call[ProjectArgs], deadline: float) -> Any:
        """The hash chain, the snapshots and the live projections, checked."""
        project_id, live = call.args.project_id, self._live(deadline)
        return verify_project(self.journal, project_id, live, self.ask, deadline)

    def _timeline(self, call: Call[ProjectionArgs], deadline: float) -> Any:
        """The ``timeline`` projection: every event of the conversation, read from the journal.

        The live conversation keeps its folded state, not its events (``runtime.agent.
        state``); it is asked for its diagnostics first, so a conversation that does not run
        gets the same error as for any projection, and the read sees what it committed.
        """
        diagnostics = msgspec.structs.replace(call.args, key="diagnostics")
        self.ask(msgspec.structs.replace(call, args=diagnostics), deadline)
        project_id, conversation_id = call.args.project_id, call.args.conversation_id
        events = self.journal.read_conversation(project_id, conversation_id)
        return get_projection(events, conversation_id, "timeline")

    def _admin_pid(self) -> int | None:
        """The Thespian admin: parent of the Supervisor, root of the actor processes."""
        supervisor = self._actors.get("supervisor")
        if not supervisor:
            return None
        try:
            return int(psutil.Process(supervisor).ppid())
        except psutil.NoSuchProcess:
            return None

    def _live(self, deadline: float) -> dict[str, LiveProject]:
        result = dict(self.ask(Call(op="list_projects", args=ListProjectsArgs()), deadline))
        self._actors = dict(result.pop("_actors", {}))
        return result

    def subscribe(self, args: SubscribeArgs, stop: threading.Event) -> Iterator[TimelineEvent]:
        """Poll the journal for the project's events after ``after_seq``."""
        project_id, conversation_id, cursor = args.project_id, args.conversation_id, args.after_seq
        if not self.journal.has_project(project_id):
            raise ProjectNotFoundError(
                f"no project {project_id!r} in the journal", project_id=project_id
            )
        while not stop.is_set() and not self.closed:
            if conversation_id is not None:  # one conversation: through its index
                scope = Scope(conversation_id=conversation_id, after_seq=cursor)
                chunk = self.journal.read_scope(project_id, scope, limit=500)
            else:
                chunk = self.journal.read_all(after_seq=cursor, limit=500)
            for envelope in chunk:
                cursor = envelope.seq
                if envelope.project_id != project_id:
                    continue
                if conversation_id is not None and envelope.conversation_id != conversation_id:
                    continue
                yield msgspec.to_builtins(envelope)
            if not chunk:
                stop.wait(_POLL_S)

    def close(self) -> None:
        """Shut the actor system down (no orphan process) and close the journal."""
        if self.closed:
            return
        self.closed = True
        try:
            self._endpoints.close()
            self.host_links.close()
            self.system.shutdown()
            actor_system.review_dead_runs("daemon_stop", wait_s=5.0)
        finally:
            try:
                self.activity.stop()  # the lines of what the shutdown committed
            except Exception:
                log.exception("activity_stop_failed")
            try:
                if self.telemetry is not None:  # exports what is committed, then flushes
                    self.telemetry.stop()
            finally:
                self.journal.close()


_OPS = op_handlers(ActorBackend, "daemon", forward=ActorBackend.ask)
"""Each op that reaches the backend, and the method serving it (``ask``: the actors)."""
