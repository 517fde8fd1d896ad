"""What a host of entities needs of the actor it lives in (``actors.hosting``)."""

from __future__ import annotations

from typing import Any, Protocol

__all__ = ["HostOwner"]


class HostOwner(Protocol):
    """The actor that hosts entities (the Project)."""

    myAddress: Any

    def send(self, targetAddr: Any, msg: Any) -> bool:
        """Send an actor message (Thespian's)."""

    def wakeupAfter(self, timePeriod: Any, payload: Any = None) -> None:
        """Ask for a wakeup (Thespian's)."""

    def receiveMessage(self, message: Any, sender: Any) -> None:
        """Handle one message (Thespian's)."""

    def entity_exited(self, address: Any) -> None:
        """A hosted entity exited."""

    def host_queue(self) -> Any:
        """The owner's own Thespian mailbox."""
