"""``http.fetch``: one HTTP(S) request inside the project's egress policy.

Every hop — the first URL and each redirect — is judged by :mod:`runtime.guard.network.egress`, its
host resolved once and every address checked, and the connection made to the checked
address itself (the URL's host replaced by the address; the original name sent as the
``Host`` header and, for HTTPS, as SNI and the name the certificate must match). A second
DNS answer therefore cannot move the request somewhere the policy did not see. Redirects
are followed by hand, at most :data:`MAX_REDIRECTS`. The body read is bounded by
``tool_max_output_bytes`` + 1 bytes; the ToolRunner enforces the cap itself.
"""

from __future__ import annotations

import base64
import ssl
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import unquote, urljoin

import httpx

from runtime.errors import ToolError
from runtime.guard.network.egress import (
    NetworkDeniedError,
    NetworkPolicy,
    Resolver,
    TargetDecision,
    denial_error,
    judge_target,
    resolve_and_check,
    signal_for,
)
from runtime.guard.network.targets import DEFAULT_PORTS, ParsedTarget, parse_target
from runtime.tools.base import ToolContext, ToolFn, ToolSpec
from runtime.tools.http_args import METHODS, Outgoing, first_request
from runtime.tools.http_decode import BoundedDecoder, DecodeError
from runtime.tools.results import HttpFetch, HttpRedirect

__all__ = ["MAX_REDIRECTS", "METHODS", "SPECS", "TOOLS", "http_fetch"]

TOOL = "http.fetch"
MAX_REDIRECTS = 5
"""Redirect hops followed before the call fails with ``too_many_redirects``."""

_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_CREDENTIAL_HEADERS = frozenset({"authorization", "cookie", "proxy-authorization"})
"""Headers dropped when a redirect leaves the origin."""

SPECS: list[ToolSpec] = [
    ToolSpec(
        name=TOOL,
        description=(
            "Send one HTTP(S) request and return the status, headers and body; the project's "
            "network policy decides which hosts are reachable."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "url": {"type": "string", "description": "Absolute http:// or https:// URL."},
                "method": {
                    "type": "string",
                    "description": "One of " + ", ".join(METHODS) + " (default GET).",
                },
                "headers": {
                    "type": "object",
                    "additionalProperties": {"type": "string"},
                    "description": "Request headers (no Host, framing or CR/LF).",
                },
                "body": {"type": "string", "description": "Request body, sent as UTF-8."},
            },
            "required": ["url"],
            "additionalProperties": False,
        },
        network_capable=True,
        path_args=(),
        data_args=("body",),
    )
]
"""The specs of the tools in this module."""


def _deny(ctx: ToolContext, error: NetworkDeniedError, **fields: Any) -> NetworkDeniedError:
    ctx.signals.append(signal_for(error.decision, TOOL, ctx.call_id))
    error.details.update(fields)
    return error


def _admit(
    ctx: ToolContext, policy: NetworkPolicy, url: str, resolver: Resolver | None, hop: int
) -> tuple[ParsedTarget, list[str]]:
    """Judge ``url``, resolve its host and check every address; record any refusal."""
    decision = judge_target(policy, url)
    if not decision.allowed:
        raise _deny(ctx, denial_error(decision), hop=hop)
    parsed = parse_target(url)
    if parsed.scheme not in ("http", "https"):
        refused = TargetDecision(
            target=url,
            host=parsed.host,
            scheme=parsed.scheme,
            port=parsed.port,
            allowed=False,
            code="network_protocol_denied",
            reason="scheme_not_supported",
        )
        raise _deny(ctx, denial_error(refused), hop=hop)
    port = parsed.port if parsed.port is not None else DEFAULT_PORTS[parsed.scheme]
    try:
        addresses = resolve_and_check(policy, parsed.host, port, resolver=resolver, target=url)
    except NetworkDeniedError as e:
        raise _deny(ctx, e, hop=hop) from None
    return parsed, addresses


def _host_header(parsed: ParsedTarget) -> str:
    host = f"[{parsed.host}]" if ":" in parsed.host else parsed.host
    return f"{host}:{parsed.port}" if parsed.explicit_port else host


def _remaining(ctx: ToolContext) -> float:
    """The time left; stops a fetch (between hops and reads) that is out of time or cancelled."""
    remaining = ctx.remaining_s()
    if remaining <= 0:
        raise ToolError("timeout", f"http.fetch ran out of time ({ctx.timeout_s:g} s)")
    if ctx.cancelled.is_set():
        raise ToolError("conversation_cancelled", "http.fetch was cancelled")
    return remaining


def _send(
    ctx: ToolContext,
    client: httpx.Client,
    parsed: ParsedTarget,
    address: str,
    outgoing: Outgoing,
) -> httpx.Response:
    """Send one request to the pinned ``address``; return the streaming response."""
    literal = f"[{address}]" if ":" in address else address
    path = parsed.path if parsed.path.startswith("/") else "/" + parsed.path
    pinned = f"{parsed.scheme}://{literal}:{parsed.port}{path}"
    headers = outgoing.headers
    send_headers = {"Accept-Encoding": "identity", **headers, "Host": _host_header(parsed)}
    if parsed.userinfo and not any(k.lower() == "authorization" for k in headers):
        token = base64.b64encode(unquote(parsed.userinfo).encode()).decode("ascii")
        send_headers["Authorization"] = f"Basic {token}"
    extensions: dict[str, str] = {}
    if parsed.scheme == "https" and not parsed.is_ip:
        extensions["sni_hostname"] = parsed.host
    request = client.build_request(
        outgoing.method,
        pinned,
        headers=send_headers,
        content=outgoing.body,
        timeout=httpx.Timeout(_remaining(ctx)),
        extensions=extensions,
    )
    return client.send(request, stream=True)


def _read(ctx: ToolContext, response: httpx.Response, limit: int) -> bytes:
    """Read at most ``limit`` decoded bytes of the body, watching the deadline and cancellation.

    The raw bytes are decoded here, never by ``httpx`` (:mod:`runtime.tools.http_decode`):
    a compressed answer is inflated at most ``limit`` bytes at a time.
    """
    decoder = BoundedDecoder(response.headers.get("content-encoding", ""), limit)
    chunks: list[bytes] = []
    size = 0
    for raw in response.iter_raw():
        data = decoder.feed(raw)
        while True:
            chunks.append(data)
            size += len(data)
            if size >= limit:
                return b"".join(chunks)[:limit]
            _remaining(ctx)
            if not decoder.pending():
                break
            data = decoder.feed(b"")
    return b"".join(chunks)[:limit]


_BECOMES_GET: tuple[tuple[frozenset[int], Callable[[str], bool]], ...] = (
    (frozenset({303}), lambda method: method != "HEAD"),
    (frozenset({301, 302}), lambda method: method == "POST"),
)
"""``(statuses, methods)`` whose redirect is followed with ``GET`` (RFC 9110 15.4)."""


def _redirected(method: str, status: int) -> str:
    for statuses, changes in _BECOMES_GET:
        if status in statuses and changes(method):
            return "GET"
    return method


def _origin(parsed: ParsedTarget) -> tuple[str | None, str, int | None]:
    return parsed.scheme, parsed.host, parsed.port


def http_fetch(
    ctx: ToolContext,
    args: Mapping[str, Any],
    *,
    resolver: Resolver | None = None,
    verify: ssl.SSLContext | bool = True,
) -> HttpFetch:
    """Run ``http.fetch {url, method?, headers?, body?}``.

    Return ``{status_code, headers, body, url, redirects}``; ``resolver`` replaces DNS and
    ``verify`` the TLS trust (both for tests and embedding).
    """
    url, outgoing = first_request(args)
    policy = NetworkPolicy.from_options(ctx.options)
    limit = ctx.settings.tool_max_output_bytes + 1
    redirects: list[HttpRedirect] = []
    current = url
    with httpx.Client(verify=verify, trust_env=False, follow_redirects=False) as client:
        for hop in range(MAX_REDIRECTS + 1):
            parsed, addresses = _admit(ctx, policy, current, resolver, hop)
            response = _connect(ctx, client, parsed, addresses, outgoing)
            try:
                location = response.headers.get("location")
                if response.status_code in _REDIRECTS and location:
                    if hop == MAX_REDIRECTS:
                        raise ToolError(
                            "tool_error",
                            f"http.fetch stopped after {MAX_REDIRECTS} redirects at {current!r}",
                            kind="too_many_redirects",
                            max=MAX_REDIRECTS,
                        )
                    following = urljoin(current, location.strip())
                    redirects.append(
                        {"url": current, "status_code": response.status_code, "location": following}
                    )
                    outgoing = _next_request(outgoing, response.status_code, parsed, following)
                    current = following
                    continue
                content = b"" if outgoing.method == "HEAD" else _read_mapped(ctx, response, limit)
                return {
                    "status_code": response.status_code,
                    "headers": _response_headers(response),
                    "body": content.decode("utf-8", errors="replace"),
                    "url": current,
                    "redirects": redirects,
                }
            finally:
                response.close()
    raise AssertionError("unreachable: the redirect loop always returns or raises")


def _next_request(
    outgoing: Outgoing, status: int, parsed: ParsedTarget, following: str
) -> Outgoing:
    """Build the next hop's request: method and body per RFC 9110, credentials per origin."""
    method, body = outgoing.method, outgoing.body
    headers = dict(outgoing.headers)
    changed = _redirected(method, status)
    if changed != method:
        method, body = changed, None
        headers = {k: v for k, v in headers.items() if k.lower() != "content-type"}
    if not _same_origin(parsed, following):
        headers = {k: v for k, v in headers.items() if k.lower() not in _CREDENTIAL_HEADERS}
    return Outgoing(method=method, headers=headers, body=body)


def _same_origin(parsed: ParsedTarget, url: str) -> bool:
    try:
        return _origin(parse_target(url)) == _origin(parsed)
    except ValueError:
        return False


def _connect(
    ctx: ToolContext,
    client: httpx.Client,
    parsed: ParsedTarget,
    addresses: list[str],
    outgoing: Outgoing,
) -> httpx.Response:
    """Try the checked addresses in order; map httpx failures to tool errors."""
    last: Exception | None = None
    for address in addresses:
        try:
            return _send(ctx, client, parsed, address, outgoing)
        except httpx.TimeoutException as e:
            raise ToolError("timeout", f"http.fetch timed out reaching {parsed.host!r}") from e
        except httpx.ConnectError as e:
            last = e
        except httpx.HTTPError as e:
            raise ToolError(
                "tool_error", f"http.fetch failed: {e}", kind="http_error", host=parsed.host
            ) from e
    raise ToolError(
        "tool_error",
        f"http.fetch could not connect to {parsed.host!r} ({', '.join(addresses)}): {last}",
        kind="connect_failed",
        host=parsed.host,
    ) from last


def _read_mapped(ctx: ToolContext, response: httpx.Response, limit: int) -> bytes:
    try:
        return _read(ctx, response, limit)
    except httpx.TimeoutException as e:
        raise ToolError("timeout", "http.fetch timed out reading the body") from e
    except (httpx.HTTPError, DecodeError) as e:
        raise ToolError("tool_error", f"http.fetch failed: {e}", kind="http_error") from e


def _response_headers(response: httpx.Response) -> dict[str, str]:
    headers: dict[str, str] = {}
    for name, value in response.headers.multi_items():
        key = name.lower()
        headers[key] = f"{headers[key]}, {value}" if key in headers else value
    return headers


TOOLS: dict[str, ToolFn] = {TOOL: http_fetch}
"""The tool implementations of this module, by name."""
