"""Adjustments to Thespian's ``multiprocQueueBase``, applied before any actor is forked.

Each one fixes something we measured or broke under load; each is a small patch of one
Thespian name. Thespian is pinned to the exact version these were written against
(``pyproject.toml``), ``tests/runtime/test_thespian_tuning.py`` checks what each one does
in a running actor system (so an upgrade that renames what a patch relies on fails
there), and ``scripts/thespian_suite.py`` runs Thespian's own test suite with them applied.

- ``actors.thespian.mailbox``: mailboxes whose writes survive a writer killed mid-send, with a
  bounded backlog per sender (they replace Thespian's bound of 10 messages per mailbox).
- :func:`dead_mailboxes_closed`: a parent closes its copy of a dead child's mailbox.
- :func:`labelled_mailboxes`: each mailbox knows its reader's address (for overflow reports).
- :func:`prompt_child_checks`: a busy parent learns of a dead child at its next message.
- :func:`indexed_routing`: routing tables and dead-address lists looked up by hash, not by
  a linear scan per message.
- :func:`short_identities`: the text Thespian builds for its debug log on every send and
  receive no longer renders the whole message.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from actors.thespian import mailbox

__all__ = [
    "AddressList",
    "IndexedAssocList",
    "apply",
    "dead_mailboxes_closed",
    "indexed_routing",
    "labelled_mailboxes",
    "prompt_child_checks",
    "short_identities",
]


def apply() -> None:
    """Every adjustment below."""
    mailbox.install()
    dead_mailboxes_closed()
    labelled_mailboxes()
    prompt_child_checks()
    indexed_routing()
    short_identities()


def _replace_once(owner: Any, name: str, marker: str, wrap: Callable[[Any], Any]) -> None:
    """Set ``owner.name`` to ``wrap(original)``, marked with ``marker``, unless it is already.

    Applying a patch twice (a second :func:`apply`) leaves its one replacement in place.
    """
    original = getattr(owner, name)
    if getattr(original, marker, False):
        return
    replacement = wrap(original)
    setattr(replacement, marker, True)
    setattr(owner, name, replacement)


def dead_mailboxes_closed() -> None:
    """Make a parent close its copy of a child's mailbox when the child has exited.

    The parent created the child's mailbox, so it holds the pipe's read end too: with the
    child dead, a backlog the parent still had for it (the pipe full, 64 KiB) would wait
    for room for ever, and the parent's process could never exit. Thespian forgets the
    child's mailbox when it handles ``ChildActorExited`` (``set_address_to_dead``); this
    also discards it (:meth:`actors.thespian.mailbox.MailboxQueue.discard`) unless another address
    still routes to it.
    """
    from thespian.system.transport.MultiprocessQueueTransport import (  # noqa: PLC0415
        MultiprocessQueueTCore_Common as core,
    )

    def wrap(original: Any) -> Any:
        def set_address_to_dead(self: Any, child_addr: Any) -> None:
            mailbox_queue = self._queues.find(child_addr)
            original(self, child_addr)
            if isinstance(mailbox_queue, mailbox.MailboxQueue) and not any(
                q is mailbox_queue for q in self._queues.values()
            ):
                mailbox_queue.discard()

        return set_address_to_dead

    _replace_once(core, "set_address_to_dead", "roost_discard", wrap)


def labelled_mailboxes() -> None:
    """Label each child's mailbox with the child's address when the parent connects it.

    A sender whose backlog for a mailbox overflows reports whose mailbox it is; the label
    travels with the queue object into every process forked afterwards.
    """
    from thespian.system.transport.MultiprocessQueueTransport import (  # noqa: PLC0415
        MultiprocessQueueTransport as transport,
    )

    def wrap(original: Any) -> Any:
        def connect(self: Any, endpoint: Any) -> Any:
            child_address, child_queue = endpoint.args[1], endpoint.args[2]
            if isinstance(child_queue, mailbox.MailboxQueue):
                child_queue.peer = child_address
            return original(self, endpoint)

        return connect

    _replace_once(transport, "connectEndpoint", "roost_label", wrap)


def prompt_child_checks() -> None:
    """Make a busy parent notice a dead child at its next message.

    Thespian's SIGCHLD handler only sets a flag, which its queue transport reads when the
    mailbox has been empty for 2 s: a Supervisor or Project that keeps receiving requests
    would never learn that a child was killed. This wraps the hook every incoming message
    passes through so a pending flag is served first (``childDied`` synthesizes the
    ``ChildActorExited`` messages, exactly as Thespian does when idle).
    """
    from thespian.system.multiprocCommon import MultiProcReplicator  # noqa: PLC0415

    def wrap(original: Any) -> Any:
        def handle(self: Any, envelope: Any) -> Any:
            core = getattr(self.transport, "_QCore", None)
            if core is not None and getattr(core, "_checkChildren", False):
                core._checkChildren = False
                self.childDied()
            return original(self, envelope)

        return handle

    _replace_once(MultiProcReplicator, "_handleReplicatorMessages", "roost_prompt", wrap)


def _queue_key(address: Any) -> str | None:
    """The hashable identity of a queue-transport address, or None for any other kind.

    Two addresses whose details are queue addresses are equal exactly when their queue
    names are (``QueueActorAddress.__eq__``, reached first by ``ActorAddress.__eq__`` and
    by the address manager's override), so the name can stand for the address.
    """
    from thespian.system.transport.MultiprocessQueueTransport import (  # noqa: PLC0415
        QueueActorAddress,
    )

    details = getattr(address, "addressDetails", address)
    if isinstance(details, QueueActorAddress):
        return str(details._qaddr)
    return None


class IndexedAssocList:
    """Thespian's ``AssocList`` (address → value) with lookups by hash.

    Thespian scans the whole list, comparing addresses with a Python ``__eq__``, for every
    message a relay forwards; a Supervisor that has relayed for thousands of conversations
    spent most of its time there. Queue addresses are kept in a dict; any other kind (a
    local address not yet resolved) in a list scanned as before.
    """

    def __init__(self) -> None:
        self._by_key: dict[str, tuple[Any, Any]] = {}
        self._other: list[tuple[Any, Any]] = []

    def find(self, addr: Any) -> Any:
        """The value for ``addr``, or None."""
        key = _queue_key(addr)
        if key is not None:
            hit = self._by_key.get(key)
            if hit is not None:
                return hit[1]
            candidates: Iterator[tuple[Any, Any]] = iter(self._other)
        else:
            candidates = iter(self.items())
        for stored, value in candidates:
            if stored == addr:
                return value
        return None

    def add(self, addr: Any, val: Any) -> None:
        """Associate ``addr`` with ``val``, replacing any earlier association."""
        self.rmv(addr)
        key = _queue_key(addr)
        if key is None:
            self._other.append((addr, val))
        else:
            self._by_key[key] = (addr, val)

    def rmv(self, addr: Any) -> None:
        """Forget ``addr``."""
        key = _queue_key(addr)
        if key is not None:
            self._by_key.pop(key, None)
        else:
            self._by_key = {k: (a, v) for k, (a, v) in self._by_key.items() if a != addr}
        self._other = [(a, v) for a, v in self._other if a != addr]

    def rmv_value(self, val: Any) -> None:
        """Forget every address associated with ``val``."""
        self._by_key = {k: (a, v) for k, (a, v) in self._by_key.items() if v != val}
        self._other = [(a, v) for a, v in self._other if v != val]

    def values(self) -> list[Any]:
        """Every value."""
        return [v for _, v in self.items()]

    def items(self) -> list[tuple[Any, Any]]:
        """Every (address, value) pair."""
        return [*self._by_key.values(), *self._other]

    def fmap(self, func: Any) -> None:
        """Thespian's own ``fmap`` (a lazy ``map`` that does nothing), kept for parity."""

    def __len__(self) -> int:
        return len(self._by_key) + len(self._other)


class AddressList:
    """The address manager's list of dead addresses, with membership by hash.

    Thespian tests every incoming sender and every outgoing target against this list, and
    appends to it each time a child dies; with passivation, conversations die all the
    time, so the scan grew with the daemon's age. Supports exactly what Thespian uses:
    ``in``, ``append``, ``remove``, ``index`` and ``del [...]`` by that index.
    """

    def __init__(self) -> None:
        self._by_key: dict[str, Any] = {}
        self._other: list[Any] = []

    def _match(self, address: Any) -> Any:
        key = _queue_key(address)
        if key is not None and key in self._by_key:
            return ("key", key)
        pool = self._other if key is not None else [*self._by_key.values(), *self._other]
        for stored in pool:
            if stored == address:
                other_key = _queue_key(stored)
                return ("key", other_key) if other_key is not None else ("other", stored)
        return None

    def __contains__(self, address: Any) -> bool:
        return self._match(address) is not None

    def append(self, address: Any) -> None:
        """Record a dead address."""
        key = _queue_key(address)
        if key is None:
            self._other.append(address)
        else:
            self._by_key.setdefault(key, address)

    def index(self, address: Any) -> Any:
        """A token for ``del self[token]`` (Thespian's ``del l[l.index(a)]``)."""
        found = self._match(address)
        if found is None:
            raise ValueError("address not in list")
        return found

    def __delitem__(self, token: Any) -> None:
        kind, value = token
        if kind == "key":
            self._by_key.pop(value, None)
        else:
            self._other = [a for a in self._other if a is not value]

    def remove(self, address: Any) -> None:
        """Forget a dead address (it was reused)."""
        del self[self.index(address)]

    def __len__(self) -> int:
        return len(self._by_key) + len(self._other)

    def __iter__(self) -> Iterator[Any]:
        return iter([*self._by_key.values(), *self._other])


def indexed_routing() -> None:
    """Replace Thespian's linear-scan routing tables and dead-address lists."""
    from thespian.system import addressManager  # noqa: PLC0415
    from thespian.system.transport import MultiprocessQueueTransport as transport  # noqa: PLC0415

    transport.AssocList = IndexedAssocList

    def wrap(original: Any) -> Any:
        def init(self: Any, *args: Any, **kwargs: Any) -> None:
            original(self, *args, **kwargs)
            self._deadAddrs = AddressList()

        return init

    _replace_once(addressManager.ActorAddressManager, "__init__", "roost_indexed", wrap)


def short_identities() -> None:
    """Make the log text of a message envelope or a send intent cheap to build.

    Thespian passes ``envelope.identify()`` / ``intent.identify()`` to its debug log on
    every receive and send; the argument is built even when debug logging is off, and it
    is ``str(message)``: the repr of every event in an append. The short form names the
    message's type and the address, which is what a log line needs.
    """
    from thespian.system import transport  # noqa: PLC0415

    def envelope_identity(self: Any) -> str:
        return f"ReceiveEnvelope(from: {self.sender}, msg: {type(self.message).__name__})"

    def intent_identity(self: Any) -> str:
        state = "pending" if self.result is None else f"={self.result}"
        return f"TransportIntent({self.targetAddr}-{state}-{type(self.message).__name__})"

    transport.ReceiveEnvelope.identify = envelope_identity
    transport.TransmitIntent.identify = intent_identity
