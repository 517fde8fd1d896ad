"""The Thespian adjustments: the names they patch exist, and the indexed tables agree
with Thespian's own on every lookup."""

from __future__ import annotations

import random

from thespian.actors import ActorAddress
from thespian.system import addressManager, multiprocCommon
from thespian.system.transport import MultiprocessQueueTransport as transport
from thespian.system.utilis import AssocList

from actors.thespian.patches import AddressList, IndexedAssocList


def _addr(name: str) -> ActorAddress:
    return ActorAddress(transport.QueueActorAddress(name))


def test_every_patched_thespian_name_still_exists() -> None:
    assert hasattr(transport, "MAX_ACTOR_QUEUESIZE")
    assert hasattr(transport, "MAX_ADMIN_QUEUESIZE")
    assert hasattr(transport, "AssocList")
    assert callable(multiprocCommon.get_multiproc_context)
    assert hasattr(multiprocCommon.MultiProcReplicator, "_handleReplicatorMessages")
    manager = addressManager.ActorAddressManager(_addr("admin"), _addr("me"))
    assert isinstance(manager._deadAddrs, list | AddressList)
    from thespian.system import transport as base

    assert callable(base.ReceiveEnvelope.identify) and callable(base.TransmitIntent.identify)


def test_short_identities_name_the_type_not_the_contents() -> None:
    from thespian.system import transport as base

    from actors.thespian.patches import short_identities

    before = (base.ReceiveEnvelope.identify, base.TransmitIntent.identify)
    try:
        short_identities()
        envelope = base.ReceiveEnvelope(_addr("~.a"), {"secret": "x" * 10000})
        text = envelope.identify()
        assert "dict" in text and "secret" not in text and len(text) < 200
    finally:
        base.ReceiveEnvelope.identify, base.TransmitIntent.identify = before  # type: ignore[method-assign]


def test_indexed_assoc_list_answers_like_thespians_under_random_operations() -> None:
    rng = random.Random(7)
    names = [f"~.{i}" for i in range(30)]
    ours, theirs = IndexedAssocList(), AssocList()
    for _ in range(3000):
        op, name, value = (
            rng.choice(["add", "rmv", "rmv_value", "find"]),
            rng.choice(names),
            rng.randrange(5),
        )
        if op == "add":
            ours.add(_addr(name), value)
            theirs.add(_addr(name), value)
        elif op == "rmv":
            ours.rmv(_addr(name))
            theirs.rmv(_addr(name))
        elif op == "rmv_value":
            ours.rmv_value(value)
            theirs.rmv_value(value)
        assert ours.find(_addr(name)) == theirs.find(_addr(name))
        assert len(ours) == len(theirs)
        assert sorted(ours.values()) == sorted(theirs.values())


def test_indexed_assoc_list_finds_non_queue_keys_by_equality() -> None:
    table = IndexedAssocList()
    odd = ActorAddress("some-local-name")
    table.add(odd, "v")
    assert table.find(ActorAddress("some-local-name")) == "v"
    assert table.find(_addr("~.1")) is None
    table.rmv(ActorAddress("some-local-name"))
    assert len(table) == 0


def test_address_list_supports_what_the_address_manager_does_with_dead_addresses() -> None:
    dead = AddressList()
    a, b = _addr("~.a"), _addr("~.b")
    dead.append(a)
    assert a in dead and _addr("~.a") in dead and b not in dead
    del dead[dead.index(_addr("~.a"))]
    assert a not in dead and len(dead) == 0
    dead.append(b)
    dead.remove(_addr("~.b"))
    assert b not in dead


def test_the_address_manager_uses_the_indexed_list_once_tuned() -> None:
    from actors.thespian.patches import indexed_routing

    original_init = addressManager.ActorAddressManager.__init__
    original_assoc = transport.AssocList
    try:
        indexed_routing()
        manager = addressManager.ActorAddressManager(_addr("admin"), _addr("me"))
        assert isinstance(manager._deadAddrs, AddressList)
        manager.deadAddress(_addr("~.x"))
        assert manager.isDeadAddress(_addr("~.x"))
        manager.importAddr(_addr("~.x"))  # a reused address is alive again
        assert not manager.isDeadAddress(_addr("~.x"))
        assert transport.AssocList is IndexedAssocList
    finally:
        addressManager.ActorAddressManager.__init__ = original_init  # type: ignore[method-assign]
        transport.AssocList = original_assoc
