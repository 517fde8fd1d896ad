"""A real daemon at the mailboxes' limits: an actor that stops reading, a full disk.

- A project's host that stops reading (SIGSTOP) while large requests keep coming: a
  request that cannot be written to its socket within two seconds is answered `overloaded`
  (`host_not_reading`), and so is every request for 2 s after, at once, instead of
  waiting out its timeout; once the host is killed and restarted everything works again.
  (A Thespian mailbox that fills is refused the same way and recorded as
  `actor.mailbox_overflow`: `tests/runtime/test_mailbox.py`.)
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

from runtime.client import Client
from runtime.daemon import start_daemon, stop_daemon
from runtime.errors import OverloadedError, RequestError
from runtime.journal.store import Journal
from tests.integration.conftest import Daemon, alive, daemon_env
from tests.runtime.daemon_helpers import SocketProxy, wait_for

BIG = 6 * 1024 * 1024
"""A request this large fills a host's socket that is not read."""


def test_a_host_that_stops_reading_makes_requests_overloaded_at_once(
    daemon: Daemon, project_root: str, tmp_path: Path
) -> None:
    with daemon.client(timeout_s=30) as c, Journal.open(daemon.home, "sqlite") as journal:
        c.start_project(project_root, project_id="p1")
        c.start_conversation("p1", "c1")
        c.send_message("p1", "c1", "hello", correlation_id="corr-before", wait=True)
        host = c.diagnostics("p1")["actors"]["project"]
        proxy = SocketProxy(str(tmp_path / "proxy"), os.path.join(daemon.home, "roost.sock"))
        outcomes: list[str] = []

        def send_big(n: int) -> None:
            with Client.connect(proxy.home, timeout_s=30) as big:
                try:
                    big.send_message("p1", "c1", "x" * BIG, correlation_id=f"corr-big-{n}")
                    outcomes.append("acknowledged")
                except RequestError as e:
                    outcomes.append(e.code)

        os.kill(host, signal.SIGSTOP)
        senders = [threading.Thread(target=send_big, args=(n,)) for n in range(4)]
        try:
            for sender in senders:
                sender.start()
            wait_for(lambda: "overloaded" in outcomes, 60, "a request to be refused")
            with pytest.raises(OverloadedError) as refused:
                # refused at once while the host is marked, or after its own 2 s wait
                c.send_message("p1", "c1", "y" * BIG, correlation_id="corr-refused")
            assert refused.value.details == {"reason": "host_not_reading", "actor": "project:p1"}
            assert refused.value.message.startswith("the host of project p1 is not reading")
            assert c.status()["host_links"]["refused"] >= 2
        finally:
            os.kill(host, signal.SIGKILL)  # the Supervisor restarts it from its events
            proxy.close()
            for sender in senders:
                sender.join(60)
        assert "acknowledged" not in outcomes

        def restarted() -> bool:
            try:  # refused for two seconds more, as the stopped host was
                return c.diagnostics("p1")["actors"].get("project") not in (None, host)
            except OverloadedError:
                return False

        wait_for(restarted, 30, "the host to be restarted")
        after = c.send_message("p1", "c1", "read notes.txt", correlation_id="corr-after", wait=True)
        assert after["outcome"] == "llm.completed"
        committed = {e.correlation_id for e in journal.read_project("p1")}
        assert "corr-refused" not in committed
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
