"""The Project actor: a shell over :class:`ProjectCore`; owns Policy, ToolRunner, Conversations.

Every decision (routing, passivation, restarts, escalation) is the core's
(``runtime/lifecycle/project_core.py``); this module hands it each message, does the I/O
(the tool registry, the sandbox probe) and carries out the effects it returns.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Callable
from functools import partial
from typing import Any

from actors.conversation import ConversationActor
from actors.dispatch import handles
from actors.host_appender import Appender
from actors.host_link_server import HostLinkServer, is_link_address
from actors.hosting import EntityHost
from actors.messages import (
    ConversationFailed,
    ConversationIdle,
    Escalate,
    JournalMoved,
    Message,
    PolicyRestarted,
    ReadProject,
    ReadResult,
    RunDirect,
    RunnerRestarted,
    SetupConversation,
    SetupPolicy,
    SetupProject,
    SetupRunner,
)
from actors.policy import PolicyActor
from actors.shell import CoreShell
from actors.toolrunner import ToolRunnerActor
from runtime.journal.link import daemon_pid, link_settings
from runtime.lifecycle import effects as fx
from runtime.lifecycle.project_core import POLICY, TOOLRUNNER, ProjectCore
from runtime.tools.registry import ToolRegistry
from runtime.wire.host_link import host_socket_path

__all__ = ["ProjectActor"]


class ProjectActor(CoreShell):
    """One project: its children, its routing, its supervision."""

    kind = "project"
    parent_kind = "supervisor"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.core: ProjectCore | None = None
        self.setup: SetupProject | None = None
        self.supervisor: Any = None
        self.tools: list[dict[str, Any]] = []
        self.fold_tools: list[str] = []
        self.registry: Any = None  # the project's ToolRegistry, built once in _setup
        self.host = EntityHost(self)
        """The project's Conversations, Policy and ToolRunner, hosted in this process (its
        appender, with a journal link, comes with the set-up)."""
        self.host_link: HostLinkServer | None = None

    def receiveMessage(self, message: Any, sender: Any) -> None:
        """Hand the entities what is theirs; then run every entity that has mail."""
        if not self.host.take(message):
            super().receiveMessage(message, sender)
        self.host.run()

    def send(self, targetAddr: Any, msg: Any) -> bool:
        """Send ``msg``: in memory to one of our entities, else as an actor message."""
        if self.host.owns(targetAddr):
            self.host.deliver(targetAddr, msg, self.myAddress)
            return True
        if is_link_address(targetAddr):
            return self.host_link is not None and self.host_link.reply(targetAddr, msg)
        return super().send(targetAddr, msg)

    def _serve_host_link(self, project_id: str) -> None:
        """Serve the daemon's requests for this project on its host socket (with a link)."""
        settings, daemon = link_settings(), daemon_pid()
        if settings is None or daemon is None:
            return
        home = os.path.dirname(settings[0])
        host = self.host
        me = self.myAddress
        server = HostLinkServer(
            host_socket_path(home, project_id),
            settings[1],
            lambda request: host.post(me, request),
            tree_roots={daemon},
        )
        try:
            server.start()
        except OSError as e:  # the daemon asks through the actor tree instead
            self.log.warning("host_link_unavailable", error=str(e))
            return
        self.host_link = server

    def entity_exited(self, address: Any) -> None:
        """A hosted entity exited (passivated, stopped, or an error storm): a child's exit."""
        if self.core is not None:
            self.run(self.core.child_exited(address))

    def host_queue(self) -> Any:
        """The Thespian mailbox of this actor (threads of the host wake it through it)."""
        return self._myRef.transport._QCore._myInputQ

    def handle(self, message: Any, sender: Any) -> None:
        """Before its set-up a project serves only the set-up; then each message by its row."""
        if self.core is not None or isinstance(message, SetupProject):
            super().handle(message, sender)

    @property
    def ready(self) -> ProjectCore:
        """The core, which every row but the set-up's finds made (:meth:`handle`)."""
        assert self.core is not None
        return self.core

    @handles(ReadResult)
    def _restored(self, message: ReadResult, sender: Any) -> None:
        self.run(self.ready.restored(message.events))

    @handles(ConversationIdle)
    def _idle(self, message: ConversationIdle, sender: Any) -> None:
        self.run(self.ready.idle(message.conversation_id, message.handled, sender))

    @handles(ConversationFailed)
    def _failed(self, message: ConversationFailed, sender: Any) -> None:
        failed = self.ready.failed(
            message.conversation_id, unrecorded=message.unrecorded, code=message.code
        )
        self.run(failed)

    @handles(JournalMoved)
    def _journal_moved(self, message: JournalMoved, sender: Any) -> None:
        self.journal = message.journal
        self.run(self.ready.journal_changed())

    @handles(SetupProject)
    def _setup(self, setup: SetupProject, sender: Any) -> None:
        from runtime.guard.sandbox.layers import probe_layers  # noqa: PLC0415
        from runtime.lifecycle.readme import describe  # noqa: PLC0415

        self.setup, self.supervisor = setup, sender
        self.journal = setup.journal
        self.announce(self.supervisor, f"project:{setup.project_id}")  # its host's pid
        settings = link_settings()
        self.host.appender = Appender(*settings) if settings is not None else None
        self._serve_host_link(setup.project_id)
        self.appends.alert_options = setup.options
        registry = self.registry = ToolRegistry.for_project(setup.root, setup.options)
        self.tools = registry.model_tools(setup.options)
        self.fold_tools = sorted(
            spec.name for spec in registry.visible(setup.options) if spec.read_only and spec.inline
        )
        self.core = ProjectCore(
            project_id=setup.project_id,
            options=setup.options,
            restore=setup.restore,
            reply_to=setup.reply_to,
            list_tools=partial(_listed, registry, setup),
            describe=partial(describe, setup.root, setup.options),
            pid=os.getpid(),
            correlation_id=setup.correlation_id,
        )
        layers = None if setup.restore else probe_layers()
        # What the set-up loaded lives as long as the host: out of the collector's passes
        # (one follows exits: actors.host_collector), as what the process started with.
        gc.freeze()
        self.run(self.core.start(setup.root, registry.asset_summary(), layers))

    def child_name(self, address: Any) -> str | None:
        """``toolrunner``, ``policy`` or ``conversation:ID`` for a live child's address."""
        return None if self.core is None else self.core.child_name(address)

    def on_exit(self) -> None:
        """Stopping (project stop or shutdown): restart nothing from now on."""
        if self.core is not None:
            self.core.exit()
        if self.host_link is not None:
            self.host_link.close()
            self.host_link = None
        self.host.stop_all()

    def carry_out(self, effect: fx.Effect) -> None:
        """Create a child, read the project, run a tool, tell children of a new peer."""
        assert self.core is not None and self.setup is not None
        core, project_id = self.core, self.setup.project_id
        match effect:
            case fx.Spawn():
                self._spawn(effect)
            case fx.ReadHistory():
                self.send(self.journal, ReadProject(project_id=project_id))
            case fx.RunDirectForProject(request=request, reply_to=reply_to):
                self.send(core.runner, RunDirect(request=request, reply_to=reply_to))
            case fx.PeerChanged(peer="journal"):
                self.appends.resend()
                for address in (core.runner, *core.live.values()):
                    self.send(self.to(address), JournalMoved(journal=self.journal))
            case fx.PeerChanged(peer=peer, lost=lost):
                update: Message = (
                    RunnerRestarted(runner=core.runner, lost=lost)
                    if peer == TOOLRUNNER
                    else PolicyRestarted(policy=core.policy)
                )
                for address in core.live.values():
                    self.send(self.to(address), update)
            case fx.Crash(to=to):
                self.host.crash(to)
            case fx.EscalateChild(child=child, error=error):
                self.send(
                    self.supervisor, Escalate(project_id=project_id, child=child, error=error)
                )

    def _spawn(self, spawn: fx.Spawn) -> None:
        """Create the child ``spawn`` names and send it its set-up (:data:`_CHILDREN`)."""
        assert self.setup is not None
        actor, set_up = _CHILDREN.get(spawn.name, (ConversationActor, ProjectActor._conversation))
        message = set_up(self, spawn, self.setup)
        address = self.host.create(actor, spawn.name)
        self.ready.spawned(spawn.name, address)
        self.send(address, message)

    def _policy(self, spawn: fx.Spawn, setup: SetupProject) -> Message:
        return SetupPolicy(
            project_id=setup.project_id,
            root=setup.root,
            options=setup.options,
            registry=self.registry,
        )

    def _runner(self, spawn: fx.Spawn, setup: SetupProject) -> Message:
        return SetupRunner(
            project_id=setup.project_id,
            root=setup.root,
            options=setup.options,
            registry=self.registry,
            journal=self.journal,
        )

    def _conversation(self, spawn: fx.Spawn, setup: SetupProject) -> Message:
        return SetupConversation(
            project_id=setup.project_id,
            root=setup.root,
            options=setup.options,
            conversation_id=spawn.name.split(":", 1)[1],
            journal=self.journal,
            policy=self.ready.policy,
            runner=self.ready.runner,
            tools=self.tools,
            new=spawn.new,
            history=spawn.history,
            recovering=spawn.recovering,
            reply_to=spawn.reply_to,
            waiters=spawn.waiters,
            correlation_id=spawn.correlation_id,
            fold_tools=self.fold_tools,
        )


_SetUp = Callable[[ProjectActor, fx.Spawn, SetupProject], Message]

_CHILDREN: dict[str, tuple[type, _SetUp]] = {
    POLICY: (PolicyActor, ProjectActor._policy),
    TOOLRUNNER: (ToolRunnerActor, ProjectActor._runner),
}
"""A child's name -> its actor class and its set-up; any other name is a conversation's."""


def _listed(
    registry: ToolRegistry, setup: SetupProject, source: Any = None
) -> list[dict[str, Any]]:
    """``list_tools``: what the project's one registry lets clients (or ``source``) see."""
    import msgspec  # noqa: PLC0415

    from runtime.execution.pipeline import offered_tools  # noqa: PLC0415

    if source is None:
        return registry.list_tools(setup.options)
    return [msgspec.to_builtins(spec) for spec in offered_tools(registry, setup.options, source)]
