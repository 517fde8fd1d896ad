"""Scenarios that show what each Thespian patch does in a running ``multiprocQueueBase``.

Run as ``python -m tests.runtime.thespian_probe SCENARIO [--without PATCH ...]``: it
applies ``actors.thespian.patches`` (minus the patches named), starts an actor system,
plays the scenario and prints one JSON line of observations. A process of its own, so
the patches never leak into the test process; ``--without`` runs the control.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

from thespian.actors import Actor, ActorExitRequest, ActorSystem, ChildActorExited

from actors.thespian import mailbox
from actors.thespian import patches as thespian_tuning

BLOCK = b"b" * 4000


def _core(actor: Actor) -> Any:
    return actor._myRef.transport._QCore


class Probe(Actor):  # type: ignore[misc]
    """A parent that does what the driver tells it and reports what it saw."""

    def __init__(self) -> None:
        super().__init__()
        self.child: Any = None
        self.exited_at: float | None = None
        self.refused: list[Any] = []
        self.kept: Any = None

    def receiveMessage(self, message: Any, sender: Any) -> None:
        if isinstance(message, ChildActorExited):
            self.exited_at = time.time()
            return
        if not isinstance(message, tuple):
            return
        verb, *args = message
        if verb == "child":
            self.child = self.createActor(args[0])
            self.send(self.child, ("pid", sender))
        elif verb == "flood":
            for _ in range(args[0]):
                before = mailbox.refusals()
                self.send(self.child, ("block", BLOCK))
                if mailbox.refusals() != before:
                    self.refused.append(True)
            self.send(sender, ("flooded", len(self.refused)))
        elif verb == "keep":  # hold the child's mailbox, as any lingering reference would
            self.kept = _core(self)._queues.find(self.child)
            self.send(sender, ("kept", type(self.kept).__name__))
        elif verb == "status":
            self.send(sender, ("status", self._status()))
        elif verb in ("relay", "echo"):
            self.send(self.child, (verb, sender, *args))

    def _status(self) -> dict[str, Any]:
        core = _core(self)
        overflows = mailbox.take_overflows()
        return {
            "pid": os.getpid(),
            "exited_at": self.exited_at,
            "feeders": sum(t.name == "MailboxFeeder" for t in threading.enumerate()),
            "fds": len(os.listdir("/proc/self/fd")),
            "refused": len(self.refused),
            "overflows": [
                [o.phase, o.refused, o.peer is not None and o.peer == self.child] for o in overflows
            ],
            "routing_table": type(core._queues).__name__,
            "dead_addresses": type(self._myRef._addrManager._deadAddrs).__name__,
            "mailbox": type(core.mainLocalInputQueueEndpoint()).__name__,
        }


class Child(Actor):  # type: ignore[misc]
    """Tells its pid; echoes; can start a grandchild to relay through."""

    def __init__(self) -> None:
        super().__init__()
        self.grandchild: Any = None

    def receiveMessage(self, message: Any, sender: Any) -> None:
        if not isinstance(message, tuple):
            return
        verb, *args = message
        if verb == "pid":
            self.send(args[0], ("pid", os.getpid()))
        elif verb == "echo":
            self.send(args[0], ("echo", args[1]))
        elif verb == "relay":
            if self.grandchild is None:
                self.grandchild = self.createActor(Child)
            self.send(self.grandchild, ("echo", args[0], args[1]))


def _ask(system: ActorSystem, address: Any, message: Any, timeout: float = 10.0) -> Any:
    answer = system.ask(address, message, timeout)
    if answer is None:
        raise SystemExit(f"no answer to {message[0]!r} within {timeout} s")
    return answer[1]


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def prompt(system: ActorSystem, parent: Any) -> dict[str, Any]:
    """Kill a busy parent's child; when does the parent hear of it?"""
    pid = _ask(system, parent, ("child", Child))
    os.kill(pid, signal.SIGKILL)
    killed = time.time()
    seen = None
    while time.time() - killed < 4.0:  # a message every 50 ms: never idle for 2 s
        status = _ask(system, parent, ("status",))
        if status["exited_at"] is not None:
            seen = status["exited_at"] - killed
            break
        time.sleep(0.05)
    return {"seen_after_s": seen}


def dead_child(system: ActorSystem, parent: Any) -> dict[str, Any]:
    """A parent with a backlog for a child that dies: its thread, descriptors, exit."""
    before = _ask(system, parent, ("status",))
    pid = _ask(system, parent, ("child", Child))
    kept = _ask(system, parent, ("keep",))
    os.kill(pid, signal.SIGSTOP)  # the child stops reading
    _ask(system, parent, ("flood", 100))  # 400 KB: the pipe (64 KiB) fills, the rest waits
    flooded = _ask(system, parent, ("status",))
    os.kill(pid, signal.SIGKILL)
    deadline = time.time() + 10
    while _ask(system, parent, ("status",))["exited_at"] is None:
        if time.time() > deadline:
            raise SystemExit("the parent never heard that its child exited")
        time.sleep(0.05)
    time.sleep(0.7)  # the feeder notices within one wait slice (0.5 s)
    after = _ask(system, parent, ("status",))
    return {
        "kept": kept,
        "feeders": [before["feeders"], flooded["feeders"], after["feeders"]],
        "fds": [before["fds"], after["fds"]],
    }


def overflow(system: ActorSystem, parent: Any) -> dict[str, Any]:
    """A parent floods a child that stopped reading, past a 256 KiB bound."""
    pid = _ask(system, parent, ("child", Child))
    os.kill(pid, signal.SIGSTOP)
    try:
        refused = _ask(system, parent, ("flood", 200), timeout=20)  # 800 KB
        status = _ask(system, parent, ("status",))
    finally:
        os.kill(pid, signal.SIGKILL)
    return {"refused": refused, "overflows": status["overflows"]}


def relay(system: ActorSystem, parent: Any) -> dict[str, Any]:
    """A 1 MiB message down to a grandchild and back, and what the tables are."""
    _ask(system, parent, ("child", Child))
    payload = os.urandom(1 << 20)
    back = _ask(system, parent, ("relay", payload))
    status = _ask(system, parent, ("status",))
    return {
        "intact": back == payload,
        "routing_table": status["routing_table"],
        "dead_addresses": status["dead_addresses"],
        "mailbox": status["mailbox"],
    }


SCENARIOS: dict[str, Callable[[ActorSystem, Any], dict[str, Any]]] = {
    "prompt": prompt,
    "dead_child": dead_child,
    "overflow": overflow,
    "relay": relay,
}
PATCHES = [
    "dead_mailboxes_closed",
    "labelled_mailboxes",
    "prompt_child_checks",
    "indexed_routing",
    "short_identities",
]


def main() -> None:
    """Apply the patches, play one scenario, print its observations and the shutdown."""
    parser = argparse.ArgumentParser()
    parser.add_argument("scenario", choices=sorted(SCENARIOS))
    parser.add_argument("--without", action="append", default=[], choices=PATCHES)
    parser.add_argument("--bound", type=int, default=0, help="MAX_BACKLOG_BYTES")
    options = parser.parse_args()
    mailbox.install()
    for name in PATCHES:
        if name not in options.without:
            getattr(thespian_tuning, name)()
    if options.bound:
        mailbox.MAX_BACKLOG_BYTES = options.bound
        mailbox.OVERFLOW_WAIT_S = 0.2
    system = ActorSystem("multiprocQueueBase", transientUnique=True)
    parent = system.createActor(Probe)
    parent_pid = _ask(system, parent, ("status",))["pid"]
    try:
        result = SCENARIOS[options.scenario](system, parent)
    finally:
        started = time.time()
        system.tell(parent, ActorExitRequest())
        system.shutdown()
        while _alive(parent_pid) and time.time() - started < 30:
            time.sleep(0.05)
    result["parent_exit_s"] = round(time.time() - started, 2)
    print(json.dumps(result), flush=True)
    os._exit(0)


if __name__ == "__main__":
    main()
