"""Tests for ``http.fetch`` against real loopback HTTP(S) servers that count their hits."""

from __future__ import annotations

import json
import shutil
import socket
import ssl
import subprocess
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from events.catalog import SecurityNetworkDenied
from runtime.errors import ToolError
from runtime.tools.base import ToolContext
from runtime.tools.http import MAX_REDIRECTS, SPECS, TOOLS, http_fetch


@dataclass
class Loopback:
    """A running test server and what it saw."""

    server: ThreadingHTTPServer
    host: str
    requests: list[dict[str, Any]] = field(default_factory=list)
    sni: list[str | None] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    @property
    def hits(self) -> int:
        with self.lock:
            return len(self.requests)

    def url(self, path: str = "/", host: str | None = None) -> str:
        return f"http://{host or self.host}:{self.port}{path}"


def _handler(state: Loopback) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            return

        def _reply(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
            self.send_response(status)
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _handle(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length).decode() if length else ""
            split = urlsplit(self.path)
            query = {k: v[0] for k, v in parse_qs(split.query).items()}
            seen = {
                "method": self.command,
                "path": self.path,
                "headers": {k.lower(): v for k, v in self.headers.items()},
                "body": body,
            }
            with state.lock:
                state.requests.append(seen)
            if split.path == "/redirect":
                code = int(query.get("code", "302"))
                self._reply(code, b"", {"Location": query["to"]})
            elif split.path == "/loop":
                self._reply(302, b"", {"Location": "/loop"})
            elif split.path == "/big":
                self._reply(200, b"a" * int(query["n"]))
            elif split.path == "/echo":
                self._reply(200, json.dumps(seen).encode(), {"Content-Type": "application/json"})
            elif split.path == "/hang":
                state.release.wait(30)
                self._reply(200, b"late")
            else:
                self._reply(200, "héllo".encode(), {"X-Test": "yes", "Set-Cookie": "a=1"})

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _handle

    return Handler


class QuietServer(ThreadingHTTPServer):
    """A threading HTTP server that does not print clients hanging up on it."""

    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        return


def _serve(host: str, tls: ssl.SSLContext | None = None) -> Iterator[Loopback]:
    state = Loopback(server=None, host=host)  # type: ignore[arg-type]
    server = QuietServer((host, 0), _handler(state))
    if tls is not None:

        def record_sni(sock: Any, name: str | None, context: Any) -> None:
            state.sni.append(name)

        tls.sni_callback = record_sni
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    state.server = server
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield state
    finally:
        state.release.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@pytest.fixture
def server_a() -> Iterator[Loopback]:
    yield from _serve("127.0.0.1")


@pytest.fixture
def server_b() -> Iterator[Loopback]:
    yield from _serve("127.0.0.2")


def context(tmp_path: Path, timeout_s: float = 10.0, **options: Any) -> ToolContext:
    return ToolContext(root=str(tmp_path), options=options, call_id="call-7", timeout_s=timeout_s)


def allow_loopback(tmp_path: Path, *extra: str, **options: Any) -> ToolContext:
    return context(
        tmp_path,
        network_egress_policy="allow",
        network_allowlist=["127.0.0.1", *extra],
        **options,
    )


def resolver_to(*answers: str, calls: list[str] | None = None) -> Callable[[str, int], list[str]]:
    def resolve(host: str, port: int) -> list[str]:
        if calls is not None:
            calls.append(host)
        return list(answers)

    return resolve


# --- refusals before any byte is sent ------------------------------------------------------


def test_loopback_is_refused_by_default_and_the_server_is_never_hit(
    tmp_path: Path, server_a: Loopback
) -> None:
    ctx = context(tmp_path, network_egress_policy="allow")
    with pytest.raises(ToolError) as info:
        http_fetch(ctx, {"url": server_a.url()})
    assert (info.value.code, info.value.details["reason"]) == (
        "network_endpoint_denied",
        "loopback",
    )
    assert server_a.hits == 0
    assert ctx.signals == [
        SecurityNetworkDenied(
            target=server_a.url(), reason="loopback", tool="http.fetch", call_id="call-7"
        )
    ]


@pytest.mark.parametrize(
    "host", ["localhost", "2130706433", "0x7f.0.0.1", "127.1", "[::ffff:7f00:1]"]
)
def test_other_spellings_of_loopback_are_refused_without_a_hit(
    tmp_path: Path, server_a: Loopback, host: str
) -> None:
    ctx = context(tmp_path, network_egress_policy="allow")
    with pytest.raises(ToolError) as info:
        http_fetch(ctx, {"url": server_a.url(host=host)})
    assert info.value.code == "network_endpoint_denied"
    assert server_a.hits == 0


def test_egress_deny_refuses_a_host_that_is_not_allowlisted(tmp_path: Path) -> None:
    ctx = context(tmp_path)
    with pytest.raises(ToolError) as info:
        http_fetch(ctx, {"url": "https://not-listed.example/"}, resolver=resolver_to("8.8.8.8"))
    assert (info.value.code, info.value.details["reason"]) == ("network_denied", "not_allowlisted")


def test_a_scheme_http_fetch_cannot_speak_is_refused_even_when_allowed(tmp_path: Path) -> None:
    ctx = context(tmp_path, network_egress_policy="allow", network_allowed_schemes=["ftp", "http"])
    with pytest.raises(ToolError) as info:
        http_fetch(ctx, {"url": "ftp://files.example/x"}, resolver=resolver_to("8.8.8.8"))
    assert (info.value.code, info.value.details["reason"]) == (
        "network_protocol_denied",
        "scheme_not_supported",
    )


def test_a_url_without_a_scheme_is_an_invalid_argument(tmp_path: Path) -> None:
    with pytest.raises(ToolError) as info:
        http_fetch(allow_loopback(tmp_path), {"url": "127.0.0.1:80/x"})
    assert (info.value.code, info.value.details) == (
        "invalid_tool_args",
        {"kind": "invalid_type", "key": "url"},
    )


@pytest.mark.parametrize(
    "headers",
    [
        {"X-A": "v\r\nX-Injected: 1"},
        {"X-A": "v\nX-Injected: 1"},
        {"X-A\r\nX-Injected": "1"},
        {"Host": "evil.example"},
        {"Transfer-Encoding": "chunked"},
        {"X-A": 1},
    ],
)
def test_header_injection_and_owned_headers_are_rejected_without_a_hit(
    tmp_path: Path, server_a: Loopback, headers: dict[str, Any]
) -> None:
    with pytest.raises(ToolError) as info:
        http_fetch(allow_loopback(tmp_path), {"url": server_a.url(), "headers": headers})
    assert (info.value.code, info.value.details) == (
        "invalid_tool_args",
        {"kind": "invalid_type", "key": "headers"},
    )
    assert server_a.hits == 0


def test_an_unsupported_method_is_an_invalid_argument(tmp_path: Path, server_a: Loopback) -> None:
    with pytest.raises(ToolError, match=r"^method must be one of DELETE, GET, HEAD, PATCH, POST"):
        http_fetch(allow_loopback(tmp_path), {"url": server_a.url(), "method": "TRACE"})
    assert server_a.hits == 0


# --- allowed requests ----------------------------------------------------------------------


def test_an_allowlisted_loopback_server_is_fetched(tmp_path: Path, server_a: Loopback) -> None:
    result = http_fetch(allow_loopback(tmp_path), {"url": server_a.url("/hello")})
    assert result["status_code"] == 200
    assert result["body"] == "héllo"
    assert result["headers"]["x-test"] == "yes"
    assert result["headers"]["set-cookie"] == "a=1"
    assert (result["url"], result["redirects"]) == (server_a.url("/hello"), [])
    assert server_a.hits == 1


def test_the_registry_exposes_http_fetch_as_network_capable() -> None:
    assert TOOLS["http.fetch"] is http_fetch
    assert [(s.name, s.network_capable, s.read_only) for s in SPECS] == [
        ("http.fetch", True, False)
    ]
    assert SPECS[0].input_schema["required"] == ["url"]


def test_method_headers_and_body_are_sent(tmp_path: Path, server_a: Loopback) -> None:
    result = http_fetch(
        allow_loopback(tmp_path),
        {"url": server_a.url("/echo"), "method": "put", "headers": {"X-Trace": "t1"}, "body": "hi"},
    )
    seen = json.loads(result["body"])
    assert (seen["method"], seen["body"], seen["headers"]["x-trace"]) == ("PUT", "hi", "t1")
    assert seen["headers"]["host"] == f"127.0.0.1:{server_a.port}"


def test_head_returns_an_empty_body(tmp_path: Path, server_a: Loopback) -> None:
    result = http_fetch(allow_loopback(tmp_path), {"url": server_a.url(), "method": "HEAD"})
    assert (result["status_code"], result["body"]) == (200, "")


def test_the_body_read_stops_one_byte_past_the_output_cap(
    tmp_path: Path, server_a: Loopback
) -> None:
    ctx = allow_loopback(tmp_path, tool_max_output_bytes=100)
    result = http_fetch(ctx, {"url": server_a.url("/big?n=50000")})
    assert result["body"] == "a" * 101


def test_a_slow_server_fails_the_call_with_timeout(tmp_path: Path, server_a: Loopback) -> None:
    with pytest.raises(ToolError) as info:
        http_fetch(allow_loopback(tmp_path, timeout_s=0.3), {"url": server_a.url("/hang")})
    assert info.value.code == "timeout"


def test_a_closed_port_fails_with_connect_failed(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(ToolError) as info:
        http_fetch(allow_loopback(tmp_path), {"url": f"http://127.0.0.1:{port}/"})
    assert (info.value.code, info.value.details["kind"]) == ("tool_error", "connect_failed")


# --- redirects -----------------------------------------------------------------------------


def test_a_redirect_within_the_allowed_server_is_followed_and_recorded(
    tmp_path: Path, server_a: Loopback
) -> None:
    start = server_a.url("/redirect?to=/echo&code=303")
    result = http_fetch(allow_loopback(tmp_path), {"url": start, "method": "POST", "body": "x"})
    assert json.loads(result["body"])["method"] == "GET"
    assert result["url"] == server_a.url("/echo")
    assert result["redirects"] == [
        {"url": start, "status_code": 303, "location": server_a.url("/echo")}
    ]


@pytest.mark.parametrize("spelling", ["127.0.0.2", "2130706434", "0x7f.0.0.2", "localhost"])
def test_a_redirect_to_a_host_that_is_not_allowlisted_is_refused_at_the_hop(
    tmp_path: Path, server_a: Loopback, server_b: Loopback, spelling: str
) -> None:
    ctx = allow_loopback(tmp_path)
    to = server_b.url("/", host=spelling)
    with pytest.raises(ToolError) as info:
        http_fetch(ctx, {"url": server_a.url(f"/redirect?to={to}")})
    assert (info.value.code, info.value.details["hop"]) == ("network_endpoint_denied", 1)
    assert (server_a.hits, server_b.hits) == (1, 0)
    assert [s.target for s in ctx.signals if isinstance(s, SecurityNetworkDenied)] == [to]


def test_a_redirect_to_a_disallowed_scheme_is_refused(tmp_path: Path, server_a: Loopback) -> None:
    with pytest.raises(ToolError) as info:
        http_fetch(
            allow_loopback(tmp_path), {"url": server_a.url("/redirect?to=file:///etc/passwd")}
        )
    assert (info.value.code, info.value.details["reason"]) == (
        "network_protocol_denied",
        "scheme_not_allowed",
    )


def test_a_cross_origin_redirect_drops_credentials(
    tmp_path: Path, server_a: Loopback, server_b: Loopback
) -> None:
    ctx = allow_loopback(tmp_path, "127.0.0.2")
    to = server_b.url("/echo")
    args = {
        "url": server_a.url(f"/redirect?to={to}&code=307"),
        "headers": {"Authorization": "Bearer t", "X-Keep": "1"},
    }
    seen = json.loads(http_fetch(ctx, args)["body"])
    assert "authorization" not in seen["headers"]
    assert seen["headers"]["x-keep"] == "1"
    assert server_a.requests[0]["headers"]["authorization"] == "Bearer t"


def test_more_than_five_redirects_fail_the_call(tmp_path: Path, server_a: Loopback) -> None:
    with pytest.raises(ToolError) as info:
        http_fetch(allow_loopback(tmp_path), {"url": server_a.url("/loop")})
    assert (info.value.code, info.value.details["kind"]) == ("tool_error", "too_many_redirects")
    assert server_a.hits == MAX_REDIRECTS + 1


# --- DNS rebinding and pinning -------------------------------------------------------------


def test_a_name_allowed_by_domain_that_resolves_to_loopback_is_refused(
    tmp_path: Path, server_a: Loopback
) -> None:
    ctx = context(tmp_path, network_allowlist=["roost-test.invalid"])
    url = server_a.url(host="rebind.roost-test.invalid")
    with pytest.raises(ToolError) as info:
        http_fetch(ctx, {"url": url}, resolver=resolver_to("127.0.0.1"))
    assert (info.value.code, info.value.details["reason"]) == (
        "network_endpoint_denied",
        "resolved_loopback",
    )
    assert server_a.hits == 0
    assert [s.reason for s in ctx.signals if isinstance(s, SecurityNetworkDenied)] == [
        "resolved_loopback"
    ]


def test_the_rebinding_name_is_fetched_once_its_address_is_allowlisted(
    tmp_path: Path, server_a: Loopback
) -> None:
    ctx = context(tmp_path, network_allowlist=["roost-test.invalid", "127.0.0.1"])
    url = server_a.url("/echo", host="rebind.roost-test.invalid")
    result = http_fetch(ctx, {"url": url}, resolver=resolver_to("127.0.0.1"))
    seen = json.loads(result["body"])
    assert seen["headers"]["host"] == f"rebind.roost-test.invalid:{server_a.port}"
    assert result["url"] == url


def test_an_exactly_named_internal_host_may_resolve_to_a_private_address(
    tmp_path: Path, server_a: Loopback
) -> None:
    ctx = context(tmp_path, network_allowlist=["intranet.roost-test.invalid"])
    url = server_a.url(host="intranet.roost-test.invalid")
    assert http_fetch(ctx, {"url": url}, resolver=resolver_to("127.0.0.1"))["status_code"] == 200


def test_the_connection_goes_to_the_checked_address_with_one_lookup_per_hop(
    tmp_path: Path, server_a: Loopback
) -> None:
    calls: list[str] = []
    ctx = context(tmp_path, network_allowlist=["roost-test.invalid", "127.0.0.1"])
    url = server_a.url("/redirect?to=/echo", host="pinned.roost-test.invalid")
    result = http_fetch(ctx, {"url": url}, resolver=resolver_to("127.0.0.1", calls=calls))
    assert result["status_code"] == 200
    assert calls == ["pinned.roost-test.invalid", "pinned.roost-test.invalid"]
    assert server_a.hits == 2


def test_every_resolved_address_is_checked_not_only_the_first(
    tmp_path: Path, server_a: Loopback
) -> None:
    ctx = context(
        tmp_path,
        network_egress_policy="allow",
        network_allowlist=["roost-test.invalid", "127.0.0.1"],
    )
    url = server_a.url(host="multi.roost-test.invalid")
    with pytest.raises(ToolError) as info:
        http_fetch(ctx, {"url": url}, resolver=resolver_to("127.0.0.1", "169.254.169.254"))
    assert info.value.details["reason"] == "resolved_link_local"
    assert server_a.hits == 0


# --- HTTPS: SNI and certificate name follow the URL, the socket follows the pin -----------


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is needed to make a test certificate")
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
            "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "1",
            "-subj", "/CN=pinned.roost-test.invalid",
            "-addext", "subjectAltName=DNS:pinned.roost-test.invalid",
            "-addext", "basicConstraints=critical,CA:TRUE",
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )  # fmt: skip
    return cert, key


@pytest.fixture
def tls_server(certificate: tuple[Path, Path]) -> Iterator[Loopback]:
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(*certificate)
    yield from _serve("127.0.0.1", tls)


def test_https_to_a_pinned_address_sends_sni_and_verifies_the_name(
    tmp_path: Path, tls_server: Loopback, certificate: tuple[Path, Path]
) -> None:
    trust = ssl.create_default_context(cafile=str(certificate[0]))
    ctx = context(tmp_path, network_allowlist=["pinned.roost-test.invalid", "127.0.0.1"])
    url = f"https://pinned.roost-test.invalid:{tls_server.port}/echo"
    result = http_fetch(ctx, {"url": url}, resolver=resolver_to("127.0.0.1"), verify=trust)
    assert result["status_code"] == 200
    assert tls_server.sni == ["pinned.roost-test.invalid"]
    assert json.loads(result["body"])["headers"]["host"] == (
        f"pinned.roost-test.invalid:{tls_server.port}"
    )


def test_https_refuses_a_certificate_for_another_name(
    tmp_path: Path, tls_server: Loopback, certificate: tuple[Path, Path]
) -> None:
    trust = ssl.create_default_context(cafile=str(certificate[0]))
    ctx = context(tmp_path, network_allowlist=["roost-test.invalid", "127.0.0.1"])
    url = f"https://other.roost-test.invalid:{tls_server.port}/"
    with pytest.raises(ToolError) as info:
        http_fetch(ctx, {"url": url}, resolver=resolver_to("127.0.0.1"), verify=trust)
    assert (info.value.code, info.value.details["kind"]) == ("tool_error", "connect_failed")
    assert tls_server.hits == 0
