"""What ``http.fetch`` accepts: its arguments, checked by rule tables, as its first request.

The checks are data (:mod:`runtime.tools.rules`), in the order they apply: ``url``,
``method``, ``headers`` as a whole, each header, then ``body``. A refused argument is
``invalid_tool_args`` naming it (``key``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import msgspec

from runtime.errors import ToolError
from runtime.guard.network.targets import split_scheme
from runtime.tools.rules import Check, check

__all__ = ["METHODS", "Outgoing", "first_request"]

METHODS: tuple[str, ...] = ("DELETE", "GET", "HEAD", "PATCH", "POST", "PUT")
"""HTTP methods ``http.fetch`` sends."""

_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_FORBIDDEN_HEADERS = frozenset(
    {
        "connection",
        "content-length",
        "host",
        "keep-alive",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    }
)
"""Headers the fetcher owns: overriding them would defeat pinning or framing."""


class Outgoing(msgspec.Struct, frozen=True, kw_only=True):
    """The request to send on one hop."""

    method: str
    """HTTP method."""
    headers: dict[str, str]
    """Caller's headers (validated)."""
    body: bytes | None
    """Body bytes, if any."""


_ARG_RULES = (
    Check(
        lambda url, **_: not isinstance(url, str) or not url.strip(),
        "url",
        "url must be a non-empty string, got {url!r}",
    ),
    Check(
        lambda url, **_: split_scheme(url)[0] is None,
        "url",
        "url must be an absolute http:// or https:// URL, got {url!r}",
    ),
    Check(
        lambda method, **_: (
            method is not None and (not isinstance(method, str) or method.upper() not in METHODS)
        ),
        "method",
        f"method must be one of {', '.join(METHODS)}, got {{method!r}}",
    ),
    Check(
        lambda headers, **_: headers is not None and not isinstance(headers, dict),
        "headers",
        "headers must be an object of strings, got {headers!r}",
    ),
)
"""What ``url``, ``method`` and ``headers`` must be."""

_HEADER_RULES = (
    Check(
        lambda name, **_: not isinstance(name, str) or _TOKEN.fullmatch(name) is None,
        "headers",
        "header name {name!r} is not a valid HTTP token",
    ),
    Check(
        lambda item, **_: not isinstance(item, str) or any(ch in item for ch in "\r\n\0"),
        "headers",
        "header {name!r} must be a string without CR, LF or NUL: {item!r}",
    ),
    Check(
        lambda name, **_: name.lower() in _FORBIDDEN_HEADERS,
        "headers",
        "header {name!r} is set by http.fetch; remove it",
    ),
)
"""What each request header must be."""

_BODY_RULES = (
    Check(
        lambda body, **_: body is not None and not isinstance(body, str),
        "body",
        "body must be a string, got {kind}",
    ),
)
"""What ``body`` must be."""


def _invalid(key: str, message: str) -> ToolError:
    return ToolError("invalid_tool_args", message, kind="invalid_type", key=key)


def _method(value: str | None) -> str:
    if value is None:
        return "GET"
    return value.upper()


def _headers(value: dict[str, str] | None) -> dict[str, str]:
    if value is None:
        return {}
    for name, item in value.items():
        check(_HEADER_RULES, _invalid, name=name, item=item)
    return dict(value)


def first_request(args: Mapping[str, Any]) -> tuple[str, Outgoing]:
    """The URL (trimmed) and the request of the first hop; ``invalid_tool_args`` if refused."""
    method, headers, body = args.get("method"), args.get("headers"), args.get("body")
    check(_ARG_RULES, _invalid, url=args.get("url"), method=method, headers=headers)
    checked = _headers(headers)
    check(_BODY_RULES, _invalid, body=body, kind=type(body).__name__)
    encoded = body.encode("utf-8") if body is not None else None
    outgoing = Outgoing(method=_method(method), headers=checked, body=encoded)
    url: str = args["url"]
    return url.strip(), outgoing
