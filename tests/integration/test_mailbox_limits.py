"""A real daemon at the mailboxes' limits: an actor that stops reading, a full disk.

- A conversation that stops reading (SIGSTOP) while large requests keep coming: its
  Project's backlog for it reaches the bound, the next request is answered `overloaded`
  at once instead of waiting out its timeout, the overflow is an `actor.mailbox_overflow`
  event, and once the conversation is killed and restarted everything works again.
- `ROOST_HOME` on a full 3 MB filesystem (a tmpfs, so root only): appends fail with
  `journal_error`, large requests too (actor messages never touch the disk), the daemon
  keeps answering, and it works again by itself once space is back.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from actors.thespian.mailbox import MAX_BACKLOG_BYTES
from events.envelope import Envelope
from runtime.client import Client
from runtime.daemon import start_daemon, stop_daemon
from runtime.errors import OverloadedError, RequestError
from runtime.journal.store import Journal
from tests.integration.conftest import Daemon, alive, daemon_env
from tests.runtime.daemon_helpers import SocketProxy, wait_for

BIG = 6 * 1024 * 1024
"""A request this large: three of them are more than the bound (16 MiB)."""


def overflows(journal: Journal, project_id: str) -> list[Envelope]:
    """The project's ``actor.mailbox_overflow`` events, in seq order."""
    return [e for e in journal.read_project(project_id) if e.type == "actor.mailbox_overflow"]


def test_a_conversation_that_stops_reading_makes_requests_overloaded_and_is_recorded(
    daemon: Daemon, project_root: str, tmp_path: Path
) -> None:
    with daemon.client(timeout_s=30) as c, Journal.open(daemon.home) as journal:
        c.start_project(project_root, project_id="p1")
        c.start_conversation("p1", "c1")
        c.send_message("p1", "c1", "hello", correlation_id="corr-before", wait=True)
        pid = c.diagnostics("p1")["actors"]["conversation:c1"]
        proxy = SocketProxy(str(tmp_path / "proxy"), os.path.join(daemon.home, "roost.sock"))
        outcomes: list[str] = []

        def send_big(n: int) -> None:
            with Client.connect(proxy.home, timeout_s=30) as big:
                try:
                    big.send_message("p1", "c1", "x" * BIG, correlation_id=f"corr-big-{n}")
                    outcomes.append("acknowledged")
                except RequestError as e:
                    outcomes.append(e.code)

        os.kill(pid, signal.SIGSTOP)
        senders = [threading.Thread(target=send_big, args=(n,)) for n in range(4)]
        try:
            for sender in senders:
                sender.start()
            wait_for(lambda: overflows(journal, "p1"), 60, "the overflow to be recorded")
            with pytest.raises(OverloadedError) as refused:
                c.send_message("p1", "c1", "one more", correlation_id="corr-refused")
            assert refused.value.details == {"reason": "mailbox_full", "actor": "conversation:c1"}
            assert refused.value.message == (
                "the mailbox of conversation:c1 is full (it is not reading); retry later"
            )
        finally:
            os.kill(pid, signal.SIGKILL)
            proxy.close()
            for sender in senders:
                sender.join(30)
        assert "acknowledged" not in outcomes
        assert "overloaded" in outcomes
        wait_for(lambda: len(overflows(journal, "p1")) == 2, 30, "the overflow to clear")
        full, cleared = overflows(journal, "p1")
        assert (full.conversation_id, cleared.conversation_id) == (None, None)
        assert full.data == {
            "actor": "conversation:c1",
            "sender": "project",
            "phase": "full",
            "backlog_bytes": full.data["backlog_bytes"],
            "limit_bytes": MAX_BACKLOG_BYTES,
            "refused": 1,
            "duration_ms": 0,
        }
        assert full.data["backlog_bytes"] >= MAX_BACKLOG_BYTES
        assert (cleared.data["phase"], cleared.data["backlog_bytes"]) == ("cleared", 0)
        assert cleared.data["refused"] >= 2  # the big one that waited, and "one more"
        after = c.send_message("p1", "c1", "read notes.txt", correlation_id="corr-after", wait=True)
        assert after["outcome"] == "llm.completed"
        committed = {e.correlation_id for e in journal.read_project("p1")}
        assert "corr-refused" not in committed
        timeline = c.incident_timeline("p1", "c1")
        assert "actor.mailbox_overflow" in [entry["type"] for entry in timeline["entries"]]
        verified = c.verify("p1")
        assert (verified["ok"], verified["mismatches"]) == (True, [])


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 3 MB tmpfs (root only; skipped with the reason otherwise), unmounted afterwards."""
    if os.geteuid() != 0:
        pytest.skip("mounting a 3 MB tmpfs to fill needs root")
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=3m,mode=0700", "tmpfs", str(disk)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def fill(path: Path) -> None:
    """Write ``path`` until the filesystem is full."""
    with open(path, "wb") as out:
        with contextlib.suppress(OSError):
            while True:
                out.write(b"\0" * 65536)
                out.flush()
        with contextlib.suppress(OSError):
            os.fsync(out.fileno())


def test_a_full_disk_gives_journal_errors_and_the_daemon_recovers_when_space_returns(
    small_disk: Path, project_root: str
) -> None:
    home = str(small_disk / "home")
    running = Daemon(home=home, pid=start_daemon(home, env=daemon_env(), timeout_s=60))
    seen = running.processes()
    try:
        with Client.connect(home, timeout_s=30) as c:
            # Each failed append restarts the conversation; keep that from escalating here.
            c.start_project(project_root, project_id="p1", options={"max_restarts": 50})
            c.start_conversation("p1", "c1")
            c.send_message("p1", "c1", "before", correlation_id="corr-before", wait=True)
            acked = [e["seq"] for e in c.incident_timeline("p1", "c1")["entries"]]
            filler = small_disk / "filler"
            fill(filler)
            errors: list[str] = []
            for n in range(20):  # the journal may still have room for a few pages
                try:
                    acked.append(c.send_message("p1", "c1", f"small {n}")["seq"])
                except RequestError as e:
                    errors.append(f"{e.code}: {e.message}")
                    break
            assert errors == ["journal_error: append failed: database or disk is full"]
            # At once, small and larger than one pipe write (never spilled to the disk):
            # each is answered with the append's error, also those that waited behind a
            # failed append in a conversation that then restarted.
            codes: list[str] = []

            def send(text: str) -> None:
                with Client.connect(home, timeout_s=30) as other:
                    try:
                        other.send_message("p1", "c1", text)
                        codes.append("acknowledged")
                    except RequestError as e:
                        codes.append(e.code)

            senders = [
                threading.Thread(target=send, args=(text,))
                for text in ("a", "b", "c", "y" * 20000, "z" * 200_000)
            ]
            for sender in senders:
                sender.start()
            for sender in senders:
                sender.join(90)
            assert codes == ["journal_error"] * 5
            assert [p["project_id"] for p in c.list_projects()] == ["p1"]
            assert c.status()["projects"] == 1
            filler.unlink()

            def works() -> bool:
                try:
                    acked.append(c.send_message("p1", "c1", "after")["seq"])
                except RequestError:
                    return False
                return True

            wait_for(works, 60, "the daemon to append again")
            turn = c.send_message("p1", "c1", "read notes.txt", wait=True)
            assert turn["outcome"] == "llm.completed"
            seqs = {e["seq"] for e in c.incident_timeline("p1", "c1", limit=500)["entries"]}
            assert set(acked) <= seqs  # nothing acknowledged was lost
            verified = c.verify("p1")
            assert (verified["ok"], verified["mismatches"]) == (True, [])
        seen += running.processes()
    finally:
        stop_daemon(home, timeout_s=30)
        left = alive(seen)
        for proc in left:
            proc.kill()
    assert left == []
