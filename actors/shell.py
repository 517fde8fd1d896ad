"""What the Supervisor and Project shells share: carrying out a lifecycle core's effects.

A core (``runtime/lifecycle``) returns :mod:`effects <runtime.lifecycle.effects>`; a shell
runs them in order. The effects every shell runs the same way are here; each shell adds
the rest (which actor a :class:`~runtime.lifecycle.effects.Spawn` creates, who hears of
a :class:`~runtime.lifecycle.effects.PeerChanged`) in :meth:`CoreShell.carry_out`. The
messages both shells hand their core alike are served here too (``actors.dispatch``).
"""

from __future__ import annotations

import functools
from datetime import timedelta
from typing import Any

from thespian.actors import ActorExitRequest, ChildActorExited, WakeupMessage

from actors.base import RoostActor
from actors.dispatch import handles
from actors.messages import ActorStarted, Appended, AppendFailed, Reply, Request
from runtime.lifecycle import effects as fx

__all__ = ["CoreShell"]


class CoreShell(RoostActor):
    """A :class:`RoostActor` that carries out a lifecycle core's effects."""

    core: Any = None
    """The core (``SupervisorCore``, ``ProjectCore``): its ``address`` resolves children."""

    def address_of(self, name: str) -> Any:
        """The address of the child the core calls ``name``."""
        return self.core.address(name)

    @handles(Request)
    def _request(self, message: Request, sender: Any) -> None:
        self.run(self.core.request(message.call, message.reply_to, message))

    @handles(ActorStarted)
    def _actor_started(self, message: ActorStarted, sender: Any) -> None:
        self.core.actor_started(message.role, message.pid)

    @handles(ChildActorExited)
    def _child_exited(self, message: ChildActorExited, sender: Any) -> None:
        self.run(self.core.child_exited(message.childAddress))

    @handles(WakeupMessage)
    def _wakeup(self, message: WakeupMessage, sender: Any) -> None:
        self.run(self.core.wakeup(message.payload))

    def carry_out(self, effect: fx.Effect) -> None:
        """Run an effect that is the shell's own (subclasses)."""
        raise NotImplementedError

    def run(self, effects: list[fx.Effect]) -> None:
        """Carry out ``effects`` in order."""
        for effect in effects:
            match effect:
                case fx.Send(to=to, message=message):
                    if not self.send(self.to(to), message):
                        self.run(self.core.send_refused(effect))
                case fx.Answer(to=to, ok=ok, result=result, error=error):
                    self.send(to, Reply(ok=ok, result=result, error=error))
                case fx.Stop(to=to):
                    self.send(self.to(to), ActorExitRequest())
                case fx.AppendThen(events=events, then=then):
                    answered = None if then is None else functools.partial(self._answered, effect)
                    self.append(events, then=answered)
                case fx.Wakeup(delay_s=delay_s, payload=payload):
                    self.wakeupAfter(timedelta(seconds=delay_s), payload=payload)
                case fx.Log(level=level, event=event, fields=fields):
                    getattr(self.log, level)(event, **fields)
                case _:
                    self.carry_out(effect)

    def to(self, to: Any) -> Any:
        """An address, from an address or a :class:`~runtime.lifecycle.effects.Child`."""
        return self.address_of(to.name) if isinstance(to, fx.Child) else to

    def _answered(self, effect: fx.AppendThen, answer: Appended | AppendFailed) -> None:
        """Run what ``effect`` does on the journal's answer: ``then(None | error)``."""
        assert effect.then is not None
        self.run(effect.then(None if hasattr(answer, "envelopes") else answer.error))
