"""Passivation on a real daemon: idle conversations stop, memory stays bounded, and a
passivated conversation comes back from the journal exactly as it was.

The memory figures are the whole daemon's process tree (the daemon, Thespian's admin and
logger, and every actor process: ``runtime.daemon.processes.daemon_processes``), summed with
psutil. The bounds and the figures measured on the reference machine are in
``docs/operations.md`` ("Recovery").
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import msgspec
import psutil
import pytest

from runtime.client import Client
from runtime.daemon.processes import daemon_processes
from runtime.journal.store import Journal
from tests.integration.conftest import READ_TURN, Daemon
from tests.integration.test_fault_injection import (
    PROJECTIONS,
    of_turn,
    replayed,
)
from tests.runtime.daemon_helpers import wait_for

CONVERSATIONS = 1000
CLIENT_THREADS = 6
RSS_GROWTH_BOUND = 64 * 2**20
"""Growth of the tree's RSS allowed after 1,000 conversations were created and passivated."""
USS_GROWTH_BOUND = 96 * 2**20
"""The same for USS (memory unique to the tree's processes)."""


class TreeMemory(msgspec.Struct, frozen=True, kw_only=True):
    """The daemon's process tree at one moment."""

    processes: int
    """How many processes."""
    rss: int
    """Sum of their resident set sizes, bytes."""
    uss: int
    """Sum of their unique set sizes, bytes."""


def tree_memory(home: str) -> TreeMemory:
    """Measure the daemon's whole process tree."""
    processes = rss = uss = 0
    for proc in daemon_processes(home):
        try:
            info = proc.memory_full_info()
        except psutil.NoSuchProcess:
            continue
        processes += 1
        rss += info.rss
        uss += info.uss
    return TreeMemory(processes=processes, rss=rss, uss=uss)


def create_conversations(home: str, project_id: str, ids: list[str]) -> None:
    """Start the conversations ``ids`` from a few client threads, one connection each."""
    local = threading.local()
    clients: list[Client] = []
    lock = threading.Lock()

    def start(conversation_id: str) -> str:
        client = getattr(local, "client", None)
        if client is None:
            client = local.client = Client.connect(home, timeout_s=10)
            with lock:
                clients.append(client)
        return client.start_conversation(project_id, conversation_id)

    try:
        with ThreadPoolExecutor(CLIENT_THREADS) as pool:
            assert list(pool.map(start, ids)) == ids
    finally:
        for client in clients:
            client.close()


@pytest.mark.timeout(240)
def test_a_thousand_passivated_conversations_stay_under_the_memory_bound_and_rehydrate_intact(
    daemon: Daemon, project_root: str
) -> None:
    ids = [f"c{i:04d}" for i in range(CONVERSATIONS)]
    sample = ids[:: CONVERSATIONS // 4]
    with daemon.client(timeout_s=30) as c, Journal.open(daemon.home, "sqlite") as journal:
        c.start_project(project_root, project_id="p1", options={"idle_passivation_ms": 50})
        before = tree_memory(daemon.home)
        create_conversations(daemon.home, "p1", ids)
        timelines = {}
        for conversation_id in sample:
            c.send_message("p1", conversation_id, "read notes.txt", wait=True)
            timelines[conversation_id] = c.get_projection("p1", conversation_id, "timeline")
        wait_for(
            lambda: c.diagnostics("p1")["active_conversations"] == [],
            timeout_s=60,
            what="every conversation to be passivated",
        )
        wait_for(
            lambda: len(daemon_processes(daemon.home)) == before.processes,
            timeout_s=30,
            what="the passivated conversations' processes to exit",
        )
        after = tree_memory(daemon.home)
        growth = (after.rss - before.rss, after.uss - before.uss)
        print(f"before {before}, after {after}, growth rss/uss {growth}")
        assert after.processes == before.processes
        assert growth[0] < RSS_GROWTH_BOUND, growth
        assert growth[1] < USS_GROWTH_BOUND, growth
        diagnostics = c.diagnostics("p1")
        assert diagnostics["conversations"] == ids
        assert sorted(diagnostics["actors"]) == ["policy", "project", "toolrunner"]

        for conversation_id in sample:
            old = timelines[conversation_id]
            correlation = f"corr-back-{conversation_id}"
            done = c.send_message(
                "p1", conversation_id, "read README.md", correlation_id=correlation, wait=True
            )
            assert done["outcome"] == "llm.completed"
            now = c.get_projection("p1", conversation_id, "timeline")
            assert now[: len(old)] == old
            assert [e["type"] for e in now[len(old) :]] == READ_TURN
            assert {e["correlation_id"] for e in now[len(old) :]} == {correlation}
            events = journal.read_project("p1")
            assert [e.type for e in of_turn(events, correlation)] == READ_TURN
            for key in PROJECTIONS:
                assert c.get_projection("p1", conversation_id, key) == replayed(
                    events, conversation_id, key
                ), key
        verified = c.verify("p1")
        assert (verified["ok"], verified["mismatches"]) == (True, [])
