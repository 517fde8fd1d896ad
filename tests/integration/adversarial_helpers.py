"""Shared parts of the adversarial suite: a module-wide daemon, a sentinel, a hit counter.

Every adversarial case checks three things besides the reason code:

- **nothing changed outside the workspace**: :class:`Sentinel` is a directory next to the
  project root (the target of the escapes); its files' bytes and mtimes are compared
  before and after;
- **nothing reached the network**: :class:`HitServer` is a loopback HTTP server in the
  test process that counts every request (it also answers ``/redirect?to=URL`` with a 302);
- **the decision is in the journal**: :func:`recorded` finds the call's events in the
  conversation's incident timeline by the correlation the test sent, and
  :func:`decision_listed` finds the decision in ``diagnostics()["recent_decisions"]``.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from runtime.client import Client
from runtime.daemon import start_daemon, stop_daemon
from runtime.guard.sandbox.layers import probe_layers
from tests.integration.conftest import Daemon, alive, daemon_env, make_root, tree

__all__ = [
    "Call",
    "Expect",
    "HitServer",
    "Sentinel",
    "World",
    "daemon_world",
    "decision_listed",
    "entries_of",
    "fill",
    "first",
    "needs_bwrap",
    "needs_netns",
    "recorded",
    "run_daemon",
    "start_projects",
    "wait_until",
]

LAYERS = probe_layers()
"""The isolation layers this machine offers (the daemon probes the same ones)."""

needs_netns = pytest.mark.skipif(
    not LAYERS["netns"]["available"],
    reason="no network namespace here (bwrap and unshare unavailable): commands fail closed",
)
"""For tests that run a command in a project that denies egress."""

needs_bwrap = pytest.mark.skipif(
    not LAYERS["bwrap"]["available"], reason="bubblewrap is not available here"
)
"""For tests of what only bubblewrap enforces (the read-only filesystem)."""

SENTINEL_FILES = {
    "secret.txt": "outside the workspace\n",
    "victim.txt": "must never change\n",
    "linked.txt": "hard-link target\n",
    "nested/deep.txt": "deep outside\n",
}
"""Files of the sentinel directory (relative path → content)."""


def fill(value: Any, places: dict[str, str]) -> Any:
    """``value`` with ``{name}`` placeholders replaced from ``places`` (strings at any depth)."""
    if isinstance(value, str):
        for key, place in places.items():
            value = value.replace("{" + key + "}", place)
        return value
    if isinstance(value, list):
        return [fill(v, places) for v in value]
    if isinstance(value, dict):
        return {k: fill(v, places) for k, v in value.items()}
    return value


def wait_until(
    predicate: Callable[[], Any], timeout_s: float = 15.0, what: str = "", interval: float = 0.02
) -> Any:
    """Return ``predicate()``'s first truthy value; fail after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what or predicate}")
        time.sleep(interval)


@contextlib.contextmanager
def run_daemon(home: Path, **env: str) -> Iterator[Daemon]:
    """Start a real daemon on ``home`` (``env`` added); stop it and assert its tree is gone."""
    pid = start_daemon(str(home), env=daemon_env(**env), timeout_s=60)
    running = Daemon(home=str(home), pid=pid)
    seen = running.processes()
    try:
        yield running
    finally:
        seen += tree(pid)
        stop_daemon(str(home), timeout_s=30)
        left = alive(seen)
        for proc in left:
            proc.kill()
        assert left == [], f"processes left behind: {left}"


class Sentinel:
    """A directory outside the workspace whose files must never change."""

    def __init__(self, path: Path) -> None:
        self.path = path
        for name, content in SENTINEL_FILES.items():
            target = path / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content)

    @classmethod
    def existing(cls, path: Path) -> Sentinel:
        """The sentinel already made at ``path`` (its files are not written again)."""
        sentinel = cls.__new__(cls)
        sentinel.path = path
        return sentinel

    def snapshot(self) -> dict[str, tuple[str, bytes | str, int]]:
        """``relative path → (kind, content or link target, mtime_ns)`` of everything in it."""
        out: dict[str, tuple[str, bytes | str, int]] = {}
        for dirpath, dirnames, filenames in os.walk(self.path):
            for name in [*dirnames, *filenames]:
                full = os.path.join(dirpath, name)
                st = os.lstat(full)
                rel = os.path.relpath(full, self.path)
                if os.path.islink(full):
                    out[rel] = ("link", os.readlink(full), st.st_mtime_ns)
                elif os.path.isdir(full):
                    out[rel] = ("dir", b"", st.st_mtime_ns)
                else:
                    out[rel] = ("file", Path(full).read_bytes(), st.st_mtime_ns)
        return out


@dataclass
class HitServer:
    """A loopback HTTP server counting requests; ``/redirect?to=URL`` answers 302."""

    hits: list[str] = field(default_factory=list)
    """Paths requested, in order."""

    def __post_init__(self) -> None:
        hits, lock = self.hits, threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                with lock:
                    hits.append(self.path)
                query = parse_qs(urlsplit(self.path).query)
                if urlsplit(self.path).path == "/redirect" and "to" in query:
                    self.send_response(302)
                    self.send_header("Location", query["to"][0])
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                body = b"hit-server says hello\n"
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_HEAD = _answer

            def log_message(self, format: str, *args: Any) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def port(self) -> int:
        """The port it listens on (on 127.0.0.1 only)."""
        return int(self._server.server_address[1])

    def url(self, path: str = "/", host: str = "127.0.0.1") -> str:
        """A URL of this server spelled with ``host``."""
        return f"http://{host}:{self.port}{path}"

    def count(self) -> int:
        """Requests received so far."""
        return len(self.hits)

    def close(self) -> None:
        """Stop serving and close the socket."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


@dataclass
class Call:
    """One tool call sent with ``run_tool`` in a conversation, with its own correlation."""

    project: str
    conversation: str
    name: str
    args: dict[str, Any]
    correlation: str = field(default_factory=lambda: f"corr-adv-{uuid.uuid4().hex[:16]}")

    def request(self) -> dict[str, Any]:
        """The ``run_tool`` request."""
        return {
            "name": self.name,
            "args": self.args,
            "meta": {"conversation_id": self.conversation, "correlation_id": self.correlation},
        }

    def run(self, client: Client) -> dict[str, Any]:
        """Run it and return the result dict."""
        return client.run_tool(self.project, self.request())


def entries_of(client: Client, project: str, conversation: str, correlation: str) -> list[Any]:
    """The incident-timeline entries of one correlation."""
    timeline = client.incident_timeline(
        project, conversation, limit=500, correlation_id=correlation
    )
    return list(timeline["entries"])


def first(entries: list[dict[str, Any]], event_type: str) -> dict[str, Any]:
    """The data of the first entry of ``event_type``; fail when there is none."""
    for entry in entries:
        if entry["type"] == event_type:
            return dict(entry["data"])
    raise AssertionError(f"no {event_type} in {[e['type'] for e in entries]}")


def recorded(client: Client, call: Call) -> list[dict[str, Any]]:
    """The call's timeline entries; each carries the correlation the test sent."""
    entries = entries_of(client, call.project, call.conversation, call.correlation)
    assert entries, f"nothing recorded for {call.correlation}"
    assert {e["correlation_id"] for e in entries} == {call.correlation}
    return entries


def decision_listed(
    client: Client, call: Call, decision: str, reason: str, source: str = "policy"
) -> dict[str, Any]:
    """The ``recent_decisions`` entry of ``call``; fail unless it says what is expected."""
    decisions = client.diagnostics(call.project)["recent_decisions"]
    mine = [d for d in decisions if d["correlation_id"] == call.correlation]
    assert len(mine) == 1, f"expected one decision for {call.correlation}, got {mine}"
    found = dict(mine[0])
    assert (found["decision"], found["reason"], found["source"]) == (decision, reason, source)
    assert (found["project_id"], found["conversation_id"], found["tool"]) == (
        call.project,
        call.conversation,
        call.name,
    )
    return found


@dataclass(frozen=True)
class Expect:
    """What a refused call must show: its code and fields, its signal, its decision."""

    code: str
    """``reason.code`` of the result and of ``tool.failed``."""
    fields: dict[str, Any] = field(default_factory=dict)
    """Fields the reason must carry with exactly these values."""
    signal: str | None = None
    """The security signal recorded before the decision (None: none expected)."""
    signal_fields: dict[str, Any] = field(default_factory=dict)
    """Fields the signal must carry with exactly these values."""
    decided: bool = True
    """A ``policy.denied`` records it (False: refused before the policy, e.g. the schema)."""
    decision_reason: str | None = None
    """The ``policy.denied`` reason when it is not ``code``."""


@dataclass
class World:
    """One module's daemon client, its sentinel and its hit server."""

    client: Client
    sentinel: Sentinel
    server: HitServer
    daemon: Daemon | None = None
    before: dict[str, tuple[str, bytes | str, int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.before = self.sentinel.snapshot()

    def untouched(self, hits_before: int = 0) -> None:
        """Nothing outside the workspace changed and nothing (more) reached the network."""
        assert self.sentinel.snapshot() == self.before
        assert self.server.hits[hits_before:] == []

    def refused(self, call: Call, expect: Expect) -> dict[str, Any]:
        """Run ``call``; assert it was refused as ``expect`` says, and recorded; return it."""
        hits_before = self.server.count()
        result = call.run(self.client)
        assert result["status"] == "error", result
        reason = result["reason"]
        assert reason["code"] == expect.code, reason
        assert {k: reason.get(k) for k in expect.fields} == expect.fields, reason
        assert (result["tool"], result["correlation_id"]) == (call.name, call.correlation)
        self.untouched(hits_before)
        entries = recorded(self.client, call)
        types = [e["type"] for e in entries]
        assert "policy.allowed" not in types and "tool.started" not in types, types
        failed = first(entries, "tool.failed")
        assert failed["reason"]["code"] == expect.code
        if expect.signal is not None:
            signal = first(entries, expect.signal)
            got = {k: signal.get(k) for k in expect.signal_fields}
            assert got == expect.signal_fields, signal
            assert types.index(expect.signal) < types.index("tool.failed")
        if expect.decided:
            why = expect.decision_reason or expect.code
            denied = first(entries, "policy.denied")
            assert (denied["tool"], denied["reason"], denied["source"]) == (
                call.name,
                why,
                "policy",
            )
            decision_listed(self.client, call, "deny", why)
        else:
            assert "policy.denied" not in types, types
            decisions = self.client.diagnostics(call.project)["recent_decisions"]
            assert [d for d in decisions if d["correlation_id"] == call.correlation] == []
        return result


@contextlib.contextmanager
def daemon_world(
    base: Path, sentinel: Sentinel, setup: Callable[[Client, HitServer], None], **env: str
) -> Iterator[World]:
    """A module's world: a daemon on ``base/home`` (``env`` added) and a hit server.

    ``setup(client, server)`` starts the module's projects and conversations; the sentinel
    is snapshotted after it. The server is closed and the daemon stopped (its whole tree
    gone, asserted) at the end.
    """
    server = HitServer()
    try:
        with run_daemon(base / "home", **env) as daemon, daemon.client(timeout_s=60) as client:
            setup(client, server)
            yield World(client, sentinel, server, daemon)
    finally:
        server.close()


def start_projects(
    client: Client,
    base: Path,
    projects: dict[str, dict[str, Any]],
    conversations: tuple[str, ...] = ("c",),
    prepare: Callable[[Path], None] | None = None,
) -> None:
    """Start each project on a fresh root under ``base`` (``prepare`` adds files to it),
    with ``conversations`` in each."""
    for project, options in projects.items():
        root = Path(make_root(base / project))
        if prepare is not None:
            prepare(root)
        client.start_project(str(root), project_id=project, options=options)
        for conversation in conversations:
            client.start_conversation(project, conversation_id=conversation)
