"""A peer whose ``/proc`` entries cannot be read is refused as ``unverifiable``.

Its namespace link (hidden, or ``/proc`` of another namespace), this process's own, or
either ancestry: each one unreadable is enough. The reads are replaced here; the other
refusals are checked on real processes in ``test_peers.py``.
"""

from __future__ import annotations

import os

import pytest

from runtime.guard.sandbox import peers
from runtime.guard.sandbox.peers import PeerRefusal, peer_refusal
from runtime.wire.transport import PeerCredentials

ME = PeerCredentials(pid=os.getpid(), uid=os.getuid(), gid=os.getgid())


def _namespaces(monkeypatch: pytest.MonkeyPatch, own: str | None, theirs: str | None) -> None:
    monkeypatch.setattr(peers, "pid_namespace", lambda pid: own if pid == "self" else theirs)


def test_a_peer_whose_namespace_cannot_be_read_but_is_there_is_unverifiable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _namespaces(monkeypatch, "pid:[1]", None)
    assert peer_refusal(ME, server_uid=os.getuid()) == PeerRefusal.UNVERIFIABLE


def test_a_server_that_cannot_read_its_own_namespace_refuses_as_unverifiable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _namespaces(monkeypatch, None, "pid:[1]")
    assert peer_refusal(ME, server_uid=os.getuid()) == PeerRefusal.UNVERIFIABLE


@pytest.mark.parametrize("unreadable", ["theirs", "own"])
def test_an_ancestry_that_cannot_be_read_is_unverifiable(
    monkeypatch: pytest.MonkeyPatch, unreadable: str
) -> None:
    peer = PeerCredentials(pid=1, uid=os.getuid(), gid=os.getgid())
    _namespaces(monkeypatch, "pid:[1]", "pid:[1]")
    gone = 1 if unreadable == "theirs" else os.getpid()
    monkeypatch.setattr(peers, "ancestry", lambda pid: None if pid == gone else [pid])
    assert peer_refusal(peer, server_uid=os.getuid()) == PeerRefusal.UNVERIFIABLE


def test_another_uid_is_refused_first_whatever_else_is_unreadable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _namespaces(monkeypatch, None, None)
    other = PeerCredentials(pid=os.getpid(), uid=os.getuid() + 1, gid=os.getgid())
    assert peer_refusal(other, server_uid=os.getuid()) == PeerRefusal.OTHER_UID
