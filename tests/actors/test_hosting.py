"""Entities hosted in a host actor (``actors.hosting``), driven without an actor system.

The host's owner is a small stand-in for the Project actor: it records what the host asks
of it (sends outside the host, wakeups, exits) and gives the host a real queue as its
mailbox. The entities are real :class:`actors.base.RoostActor` subclasses.
"""

from __future__ import annotations

import gc
import queue
import threading
import weakref
from datetime import timedelta
from typing import Any

from thespian.actors import ActorAddress, ActorExitRequest, WakeupMessage

from actors.base import STORM_LIMIT, RoostActor
from actors.host_collector import ExitCollector
from actors.hosting import Deferred, EntityHost, HostWake, is_entity
from actors.messages import Appended, AppendRequest, ReadProject, ReadResult


class Owner:
    """What the host needs of the actor hosting it."""

    def __init__(self) -> None:
        self.myAddress = ActorAddress("owner")
        self.sent: list[tuple[Any, Any]] = []
        self.wakeups: list[tuple[Any, Any]] = []
        self.exited: list[Any] = []
        self.received: list[tuple[Any, Any]] = []
        self.mailbox: queue.SimpleQueue[Any] = queue.SimpleQueue()

    def put(self, item: Any, *, local: bool = False) -> None:
        assert local  # a wake-up of its own loop, not a message between processes
        self.mailbox.put(item)

    def send(self, targetAddr: Any, msg: Any) -> bool:
        self.sent.append((targetAddr, msg))
        return True

    def wakeupAfter(self, timePeriod: Any, payload: Any = None) -> None:
        self.wakeups.append((timePeriod, payload))

    def receiveMessage(self, message: Any, sender: Any) -> None:
        self.received.append((message, sender))

    def entity_exited(self, address: Any) -> None:
        self.exited.append(address)

    def host_queue(self) -> Any:
        return self


class Recorder(RoostActor):
    """Records what it handles; ``("to", address, message)`` sends, ``"boom"`` raises."""

    kind = "recorder"
    log_all: list[tuple[str, Any]] = []

    def __init__(self) -> None:
        super().__init__()
        self.name = ""
        self.exits = 0

    def handle(self, message: Any, sender: Any) -> None:
        if isinstance(message, tuple) and message[0] == "name":
            self.name = message[1]
        elif isinstance(message, tuple) and message[0] == "to":
            self.send(message[1], message[2])
        elif message == "boom":
            raise RuntimeError("boom")
        Recorder.log_all.append((self.name, message))

    def on_exit(self) -> None:
        self.exits += 1


def host_with(*names: str) -> tuple[EntityHost, Owner, dict[str, Any]]:
    owner = Owner()
    host = EntityHost(owner)
    addresses = {}
    for name in names:
        address = host.create(Recorder, name)
        host.deliver(address, ("name", name), owner.myAddress)
        addresses[name] = address
    host.run()
    Recorder.log_all.clear()
    return host, owner, addresses


def entity(host: EntityHost, address: Any) -> Any:
    return host.entities[address.addressDetails].actor


def test_entities_take_turns_one_message_each() -> None:
    host, owner, a = host_with("a", "b")
    for i in range(3):
        host.deliver(a["a"], f"a{i}", owner.myAddress)
    host.deliver(a["b"], "b0", owner.myAddress)
    host.run()
    assert Recorder.log_all == [("a", "a0"), ("b", "b0"), ("a", "a1"), ("a", "a2")]
    assert is_entity(a["a"]) and host.owns(a["a"]) and not host.owns(owner.myAddress)


def test_a_send_between_entities_stays_in_memory_and_one_outside_goes_to_the_owner() -> None:
    host, owner, a = host_with("a", "b")
    outside = ActorAddress("journal")
    host.deliver(a["a"], ("to", a["b"], "hello"), owner.myAddress)
    host.deliver(a["a"], ("to", outside, "out"), owner.myAddress)
    host.deliver(a["a"], ("to", owner.myAddress, "up"), owner.myAddress)
    host.run()
    assert ("b", "hello") in Recorder.log_all
    assert owner.sent == [(outside, "out")]
    assert owner.received == [("up", a["a"])]


def test_an_error_storm_ends_one_entity_and_its_neighbour_goes_on() -> None:
    host, owner, a = host_with("a", "b")
    for _ in range(STORM_LIMIT + 1):
        host.deliver(a["a"], "boom", owner.myAddress)
    host.run()
    assert owner.exited == [a["a"]]
    assert not host.live(a["a"]) and host.live(a["b"])
    assert not host.deliver(a["a"], "late", owner.myAddress)  # dead letter
    host.deliver(a["b"], "still here", owner.myAddress)
    host.run()
    assert Recorder.log_all[-1] == ("b", "still here")


def test_a_crash_runs_the_exit_and_tells_the_owner() -> None:
    host, owner, a = host_with("a")
    actor = entity(host, a["a"])
    host.crash(a["a"])
    assert actor.exits == 1
    assert owner.exited == [a["a"]]
    assert host.count() == 0


def test_a_thread_posts_and_one_wake_message_reaches_the_owners_mailbox() -> None:
    host, owner, a = host_with("a")
    threads = [threading.Thread(target=host.post, args=(a["a"], f"t{i}")) for i in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wakes = []
    while not owner.mailbox.empty():
        wakes.append(owner.mailbox.get())
    assert len(wakes) == 1  # later posts found a wake already pending
    relay, (sender, target, message) = wakes[0]
    assert (relay, sender, target, type(message)) == (
        None,
        owner.myAddress,
        owner.myAddress,
        HostWake,
    )
    host.take_posted()
    host.run()
    assert sorted(m for _, m in Recorder.log_all) == sorted(f"t{i}" for i in range(20))
    host.post(a["a"], "again")  # the next post wakes the owner again
    assert owner.mailbox.get_nowait()[1][2] == HostWake()


def test_a_deferred_call_runs_in_the_entitys_turn() -> None:
    host, _owner, a = host_with("a")
    seen: list[Any] = []
    host.post(a["a"], Deferred(seen.append, "answer"))
    host.take_posted()
    host.run()
    assert seen == ["answer"]


def test_answers_to_an_entitys_journal_requests_come_back_to_it() -> None:
    host, owner, a = host_with("a", "b")
    journal = ActorAddress("journal")
    append = AppendRequest(key="k", events=[], token=7)
    host.deliver(a["a"], ("to", journal, append), owner.myAddress)
    host.deliver(a["b"], ("to", journal, ReadProject(project_id="p", token=7)), owner.myAddress)
    host.run()
    [(_, sent_append), (_, sent_read)] = owner.sent
    assert sent_append.token != 7 and sent_read.token != 7  # the host's own tokens
    assert host.route_answer(Appended(token=sent_append.token, envelopes=[]))
    assert host.route_answer(ReadResult(token=sent_read.token, events=[]))
    assert not host.route_answer(Appended(token=7, envelopes=[]))  # the owner's own
    host.run()
    assert ("a", Appended(token=7, envelopes=[])) in Recorder.log_all
    assert ("b", ReadResult(token=7, events=[])) in Recorder.log_all


def test_an_entitys_wakeup_goes_through_the_owner_and_back() -> None:
    host, owner, a = host_with("a")
    entity(host, a["a"]).wakeupAfter(timedelta(seconds=1), payload="tick")
    [(period, payload)] = owner.wakeups
    assert host.wakeup(WakeupMessage(period, payload))
    assert not host.wakeup(WakeupMessage(period, "the owner's own"))
    host.run()
    [(_, message)] = Recorder.log_all
    assert isinstance(message, WakeupMessage) and message.payload == "tick"


def test_stopping_the_host_runs_every_exit() -> None:
    host, owner, a = host_with("a", "b")
    actors = [entity(host, a["a"]), entity(host, a["b"])]
    host.stop_all()
    assert [x.exits for x in actors] == [1, 1]
    assert host.count() == 0
    host.deliver(a["a"], ActorExitRequest(), owner.myAddress)  # nothing left to deliver to


def test_what_an_exited_entity_left_in_cycles_is_freed_by_the_host() -> None:
    host, owner, a = host_with("a", "b")
    actor = entity(host, a["a"])
    actor.me = actor  # a cycle, as an actor and its core's bound methods make
    gone = weakref.ref(actor)
    del actor
    gc.disable()  # only the host's own pass may free it
    try:
        host.deliver(a["a"], ActorExitRequest(), owner.myAddress)
        host.run()
        assert gone() is None
        assert host.collector.passes == 1
    finally:
        gc.enable()


def test_a_pass_is_due_once_the_exits_are_a_quarter_of_the_live_entities() -> None:
    calls: list[int] = []
    collector = ExitCollector(lambda: calls.append(1))
    collector.collect_if_due()
    collector.exited(live=7)  # 1 exit, 7 live: not yet
    collector.collect_if_due()
    assert calls == []
    collector.exited(live=6)  # 2 exits, 6 live
    collector.collect_if_due()
    collector.collect_if_due()
    assert calls == [1]
    collector.exited(live=0)  # the last one: always
    collector.collect_if_due()
    assert calls == [1, 1] and collector.exits == 0
