"""The pinned HTTP client SDKs are given: every request judged, every connection pinned.

A real HTTP server on loopback answers; the resolver is a test double (a name that resolves
to it), so no DNS is asked. The server records the requests it got, to show a refusal
never reached it.
"""

from __future__ import annotations

import asyncio
import http.server
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from runtime.guard.network.egress import NetworkDeniedError, NetworkPolicy
from runtime.guard.network.pinning import denial_in, pinned_client
from runtime.policy.options import validate_options


class _Server(http.server.ThreadingHTTPServer):
    seen: list[str]


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        server = self.server
        assert isinstance(server, _Server)
        server.seen.append(str(self.headers.get("Host")))
        body = b"hello"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[_Server]:
    srv = _Server(("127.0.0.1", 0), _Handler)
    srv.seen = []
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()


def _policy(**options: Any) -> NetworkPolicy:
    return NetworkPolicy.from_options(validate_options(options))


def _get(policy: NetworkPolicy, url: str, resolver: Any = None) -> httpx.Response:
    async def go() -> httpx.Response:
        async with pinned_client(policy, timeout_s=10, resolver=resolver) as client:
            return await client.get(url)

    return asyncio.run(go())


def test_a_name_is_resolved_once_per_connection_and_the_checked_address_is_dialled(
    server: _Server,
) -> None:
    port = server.server_address[1]
    asked: list[str] = []

    def resolver(host: str, port: int) -> list[str]:
        asked.append(host)
        return ["127.0.0.1"]

    policy = _policy(network_allowlist=["agent.test"])
    response = _get(policy, f"http://agent.test:{port}/card", resolver)
    assert response.status_code == 200 and response.text == "hello"
    assert asked == ["agent.test"]
    assert server.seen == [f"agent.test:{port}"]  # the name still goes in the Host header


def test_a_name_that_resolves_to_loopback_is_refused_before_connecting(server: _Server) -> None:
    port = server.server_address[1]
    policy = _policy(network_allowlist=["example.test"])  # a suffix: not the exact name
    with pytest.raises(NetworkDeniedError) as caught:
        _get(policy, f"http://api.example.test:{port}/", lambda h, p: ["127.0.0.1"])
    assert caught.value.code == "network_endpoint_denied"
    assert caught.value.details["reason"] == "resolved_loopback"
    assert server.seen == []


def test_a_url_the_allowlist_does_not_name_is_refused_before_any_request(
    server: _Server,
) -> None:
    port = server.server_address[1]
    with pytest.raises(NetworkDeniedError) as caught:
        _get(_policy(), f"http://127.0.0.1:{port}/")
    assert caught.value.code == "network_endpoint_denied"
    assert caught.value.details["reason"] == "loopback"
    assert server.seen == []


def test_a_scheme_the_policy_does_not_allow_is_refused(server: _Server) -> None:
    port = server.server_address[1]
    policy = _policy(network_allowlist=["127.0.0.1"], network_allowed_schemes=["https"])
    with pytest.raises(NetworkDeniedError) as caught:
        _get(policy, f"http://127.0.0.1:{port}/")
    assert caught.value.code == "network_protocol_denied"
    assert server.seen == []


def test_denial_in_finds_the_refusal_under_wrappers() -> None:
    policy = _policy()
    try:
        _get(policy, "http://10.0.0.1/")
    except NetworkDeniedError as e:
        denial = e
    wrapped = RuntimeError("sdk error")
    wrapped.__cause__ = ExceptionGroup("group", [ValueError("x"), denial])
    assert denial_in(wrapped) is denial
    assert denial_in(RuntimeError("nothing")) is None
