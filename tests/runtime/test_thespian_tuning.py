"""The Thespian adjustments: what each one does in a running actor system (with the
patch, and without it as a control), the names they patch, and the indexed tables
agreeing with Thespian's own on every lookup."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from importlib.metadata import version
from typing import Any

import pytest
from thespian.actors import ActorAddress
from thespian.system import addressManager, multiprocCommon
from thespian.system.transport import MultiprocessQueueTransport as transport
from thespian.system.utilis import AssocList

from actors.thespian.patches import AddressList, IndexedAssocList
from tests.runtime.daemon_helpers import REPO_ROOT


def _probe(scenario: str, *args: str) -> dict[str, Any]:
    """Run a scenario of ``tests/runtime/thespian_probe.py`` in a process of its own."""
    done = subprocess.run(
        [sys.executable, "-m", "tests.runtime.thespian_probe", scenario, *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_thespian_is_the_version_the_patches_were_written_for() -> None:
    assert version("thespian") == "4.0.1"


@pytest.mark.slow
def test_a_busy_parent_hears_of_a_killed_child_at_its_next_message() -> None:
    seen = _probe("prompt")["seen_after_s"]
    assert seen is not None and seen < 1.0
    assert _probe("prompt", "--without", "prompt_child_checks")["seen_after_s"] is None


@pytest.mark.slow
def test_a_dead_childs_mailbox_is_closed_even_while_something_still_holds_it() -> None:
    """Its backlog's thread ends, its two descriptors close, the parent exits at once."""
    result = _probe("dead_child")
    assert result["kept"] == "MailboxQueue"
    assert result["feeders"] == [0, 1, 0]
    before, after = result["fds"]
    assert after == before
    assert result["parent_exit_s"] < 5
    control = _probe("dead_child", "--without", "dead_mailboxes_closed")
    assert control["feeders"] == [0, 1, 1]
    assert control["fds"][1] == control["fds"][0] + 2
    assert control["parent_exit_s"] >= 9  # only the bounded flush at exit let it go


@pytest.mark.slow
def test_an_overflow_names_the_child_whose_mailbox_it_is() -> None:
    result = _probe("overflow", "--bound", str(256 * 1024))
    assert result["refused"] > 0
    assert result["overflows"] == [["full", 1, True]]
    control = _probe("overflow", "--bound", str(256 * 1024), "--without", "labelled_mailboxes")
    assert control["overflows"] == [["full", 1, False]]


def test_a_large_message_goes_through_two_relays_whole_over_indexed_tables() -> None:
    result = _probe("relay")
    del result["parent_exit_s"]
    assert result == {
        "intact": True,
        "routing_table": "IndexedAssocList",
        "dead_addresses": "AddressList",
        "mailbox": "MailboxQueue",
    }


def _addr(name: str) -> ActorAddress:
    return ActorAddress(transport.QueueActorAddress(name))


def test_every_patched_thespian_name_still_exists() -> None:
    from thespian.system import transport as base

    assert callable(multiprocCommon.get_multiproc_context)
    assert callable(transport.MultiprocessQueueTCore_Common.set_address_to_dead)
    assert callable(transport.MultiprocessQueueTransport.connectEndpoint)
    assert hasattr(transport, "AssocList")
    assert hasattr(multiprocCommon.MultiProcReplicator, "_handleReplicatorMessages")
    manager = addressManager.ActorAddressManager(_addr("admin"), _addr("me"))
    assert isinstance(manager._deadAddrs, list | AddressList)
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
