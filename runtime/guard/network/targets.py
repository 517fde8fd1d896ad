"""Network targets: finding them in tool arguments and parsing them into their parts.

Two halves, both pure:

- :func:`extract_targets` walks a tool's arguments and returns every string that names a
  network endpoint: values under URL-ish keys at any depth, JSON documents hidden in strings,
  and URLs, ``scp``-style remotes, ``key=value`` pairs, ``ip:port`` pairs and the operands
  of network commands (``curl``, ``wget``, ``nc``, ``ssh``, ...) in opaque text.
- :func:`parse_target` splits one target into scheme, host and port, with the host
  normalized the one way the policy judges it and the fetcher connects to it: IDNA to
  lowercase ASCII, no trailing dot, percent-decoded, IPv4 in every ``inet_aton`` spelling
  turned into its dotted-quad form, IPv6 in its compressed form. Anything ambiguous (a
  backslash or a control character in the authority, a label that ends in a number but is
  no address) is refused rather than guessed.
"""

from __future__ import annotations

import functools
import ipaddress
import re
import shlex
from collections.abc import Iterator, Sequence
from typing import Any
from urllib.parse import unquote

import msgspec

from runtime.guard.network.commands import command_operands
from runtime.guard.shapes.safe_json import json_document

__all__ = [
    "DEFAULT_PORTS",
    "ParsedTarget",
    "TargetParseError",
    "authority_of",
    "extract_targets",
    "normalize_host",
    "parse_ipv4",
    "parse_target",
    "split_scheme",
]

DEFAULT_PORTS: dict[str, int] = {
    "ftp": 21,
    "http": 80,
    "https": 443,
    "ssh": 22,
    "ws": 80,
    "wss": 443,
}
"""Ports implied by a scheme when the target names none."""

_SPECIAL_SCHEMES = frozenset({"ftp", "http", "https", "ws", "wss"})
"""Schemes whose slashes WHATWG URL parsers skip leniently (``http:/x``, ``http:x``)."""

_TARGET_KEYS = frozenset(
    {"url", "uri", "host", "hostname", "domain", "endpoint", "baseurl", "server", "address"}
    | {"proxy", "httpproxy", "httpsproxy", "allproxy", "ftpproxy"}
)
"""Key names (lowercased, without ``_`` and ``-``) whose values are targets.

The proxy keys are the environment variables clients read (``HTTPS_PROXY``): a proxy
sees every request sent through it. ``no_proxy`` lists hosts *not* proxied and is none."""

_KEY_SUFFIX = re.compile(
    r"(?i:(?:^|[_.\-])(?:url|uri|host|hostname|endpoint))$"
    r"|[a-z0-9](?:Url|URL|Uri|URI|Host|Hostname|Endpoint)$"
)
"""Keys such as ``callback_url``, ``proxy-host`` or ``baseUrl`` also hold targets."""

_MAX_DEPTH = 48
"""Nesting (objects, lists, JSON strings) walked before giving up on a branch."""

_URL = re.compile(r"(?<![A-Za-z0-9+.\-])([A-Za-z][A-Za-z0-9+.\-]*)://([^\s'\"<>`|]*)")
_SCP = re.compile(
    r"(?<![\w./:@\-])([A-Za-z0-9._\-]+)@([A-Za-z0-9.\-]+|\[[0-9A-Fa-f:.]+\]):(?!//)([^\s'\"`;&|]*)"
)
_KEY_VALUE = re.compile(
    r"(?<![\w\-])(?:--?)?(url|uri|host|hostname|domain|endpoint|base[_\-]?url|server|address"
    r"|(?:https?_|all_|ftp_)?proxy)"
    r"\s*=\s*['\"]?([^\s'\",;&|`]+)",
    re.IGNORECASE,
)
_FLAG_VALUE = re.compile(
    r"(?<![\w\-])--(url|uri|host|hostname|domain|endpoint|base[_\-]?url|server|address"
    r"|(?:https?_|all_|ftp_)?proxy)"
    r"\s+['\"]?([^\s'\",;&|`\-][^\s'\",;&|`]*)",
    re.IGNORECASE,
)
_IP_PORT = re.compile(
    r"(?<![\w.:/@\-])(\d{1,3}(?:\.\d{1,3}){3}|\[[0-9A-Fa-f:.]+\]):(\d{1,5})(?![\w.:])"
)
_DEV_TCP = re.compile(r"/dev/(?:tcp|udp)/([^/\s'\"]+)/(\d{1,5})")
_SOCAT = re.compile(
    r"(?<![\w\-])(?:tcp|udp|tcp4|tcp6|udp4|udp6|ssl|openssl)(?:-connect)?:([^\s:,'\"]+):(\d{1,5})",
    re.IGNORECASE,
)
_AUTHORITY_END = re.compile(r"[/?#]")
_AUTHORITY_CUT = re.compile(r"[;&(){},]")
_NUMERIC_LABEL = re.compile(r"[0-9]+|0[xX][0-9A-Fa-f]*")
_IPV4_PART = re.compile(r"0[xX](?P<hex>[0-9A-Fa-f]*)|(?P<octal>0[0-7]+)|(?P<decimal>0|[1-9][0-9]*)")
"""A numeric label as ``inet_aton`` reads it: ``0x`` hex, a leading ``0`` octal, else decimal."""
_IPV4_BASES = {"hex": 16, "octal": 8, "decimal": 10}
_HOST_LABEL = re.compile(r"[a-z0-9_](?:[a-z0-9_\-]{0,61}[a-z0-9_])?")
_PORT = re.compile(r"[0-9]{1,5}")
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*):")


class TargetParseError(ValueError):
    """A target could not be parsed; ``reason`` is ``invalid_host`` or ``invalid_port``."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class ParsedTarget(msgspec.Struct, frozen=True, kw_only=True):
    """One target split into the parts the policy judges and the fetcher uses."""

    scheme: str | None
    """Lowercased scheme, or ``None`` for a bare ``host[:port]``."""
    userinfo: str | None
    """What came before the last ``@`` of the authority, percent-encoded as found."""
    host: str
    """Normalized host: lowercase IDNA ASCII name, dotted-quad IPv4 or compressed IPv6."""
    is_ip: bool
    """The host is an address literal."""
    port: int | None
    """The explicit port, else the scheme's default port, else ``None``."""
    explicit_port: bool
    """The target named its port."""
    path: str
    """Everything after the authority (path and query), without the fragment."""


# --- parsing ------------------------------------------------------------------------------


def split_scheme(target: str) -> tuple[str | None, str]:
    """Split ``target`` into its lowercased scheme (or ``None``) and what follows ``//``.

    ``host:port`` has no scheme; ``http:/x`` and ``http:x`` are read as browsers read
    them (``http://x``) so that no spelling hides a host.
    """
    text = target.strip()
    match = _SCHEME.match(text)
    if match is None:
        return None, text.lstrip("/")
    scheme = match.group(1).lower()
    after = text[match.end() :]
    if scheme in _SPECIAL_SCHEMES:
        return scheme, after.lstrip("/\\")
    if after.startswith("//"):
        return scheme, after[2:]
    return None, text


def authority_of(rest: str) -> str:
    """The authority at the start of ``rest`` (what follows a scheme), up to ``/``, ``?``, ``#``."""
    return _AUTHORITY_END.split(rest, 1)[0]


def parse_target(target: str) -> ParsedTarget:
    """Parse a URL or a bare ``host[:port]``; raise :class:`TargetParseError` if unclear."""
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in target):
        raise TargetParseError("invalid_host", f"target {target!r} contains a control character")
    scheme, rest = split_scheme(target)
    authority = authority_of(rest)
    path = rest[len(authority) :].partition("#")[0]
    if "\\" in authority:
        raise TargetParseError("invalid_host", f"target {target!r} has a backslash in its host")
    userinfo: str | None
    userinfo, at, hostport = authority.rpartition("@")
    if not at:
        userinfo = None
    bracketed = hostport.startswith("[")
    port_text = ""
    if bracketed:
        close = hostport.find("]")
        if close == -1:
            raise TargetParseError("invalid_host", f"target {target!r} has an unclosed '['")
        raw_host, after = hostport[1:close], hostport[close + 1 :]
        if after:
            if not after.startswith(":"):
                raise TargetParseError("invalid_host", f"target {target!r} has text after ']'")
            port_text = after[1:]
    elif hostport.count(":") > 1 and scheme is None:
        raw_host = hostport
        bracketed = True
    else:
        raw_host, _, port_text = hostport.partition(":")
    port: int | None = None
    if port_text:
        if _PORT.fullmatch(port_text) is None or int(port_text) > 65535:
            raise TargetParseError("invalid_port", f"target {target!r} has port {port_text!r}")
        port = int(port_text)
    host, is_ip = normalize_host(unquote(raw_host), bracketed=bracketed)
    explicit = port is not None
    if port is None and scheme is not None:
        port = DEFAULT_PORTS.get(scheme)
    return ParsedTarget(
        scheme=scheme,
        userinfo=userinfo,
        host=host,
        is_ip=is_ip,
        port=port,
        explicit_port=explicit,
        path=path,
    )


def normalize_host(raw: str, *, bracketed: bool = False) -> tuple[str, bool]:
    """Return ``(host, is_ip)`` for a decoded host; raise :class:`TargetParseError`."""
    if bracketed or ":" in raw:
        address, _, _zone = raw.partition("%")
        try:
            return str(ipaddress.IPv6Address(address)), True
        except ValueError as e:
            raise TargetParseError("invalid_host", f"{raw!r} is not an IPv6 address") from e
    host = raw
    if not host.isascii():
        try:
            host = host.encode("idna").decode("ascii")
        except UnicodeError as e:
            raise TargetParseError("invalid_host", f"{raw!r} is not a valid IDNA name") from e
    host = host.lower().removesuffix(".")
    if not host:
        raise TargetParseError("invalid_host", f"host {raw!r} is empty")
    number = parse_ipv4(host)
    if number is not None:
        return str(ipaddress.IPv4Address(number)), True
    labels = host.split(".")
    if len(host) > 253 or not all(_HOST_LABEL.fullmatch(label) for label in labels):
        raise TargetParseError("invalid_host", f"{raw!r} is not a valid host name")
    return host, False


def parse_ipv4(host: str) -> int | None:
    """Parse ``host`` the way ``inet_aton`` does (1-4 parts, decimal, octal or hex).

    Return the address as an integer, ``None`` when ``host`` is a name (its last label is
    not a number), and raise :class:`TargetParseError` when it ends in a number yet is no
    valid address (``1.2.3.4.5``, ``08.1``, ``256.1.1.1``, ``example.1``).
    """
    parts = host.split(".")
    if _NUMERIC_LABEL.fullmatch(parts[-1]) is None:
        return None
    if len(parts) > 4 or not all(_NUMERIC_LABEL.fullmatch(part) for part in parts):
        raise TargetParseError("invalid_host", f"{host!r} ends in a number but is no address")
    values: list[int] = []
    for part in parts:
        if len(part) > 34:
            raise TargetParseError("invalid_host", f"{host!r} has an over-long number")
        spelled = _IPV4_PART.fullmatch(part)
        if spelled is None:  # a leading 0 and an 8 or a 9
            raise TargetParseError("invalid_host", f"{host!r} has a bad octal part")
        kind = str(spelled.lastgroup)
        values.append(int(spelled.group(kind) or "0", _IPV4_BASES[kind]))
    *head, last = values
    if any(value > 255 for value in head) or last >= 256 ** (4 - len(head)):
        raise TargetParseError("invalid_host", f"{host!r} is out of the IPv4 range")
    number = last
    for index, value in enumerate(head):
        number += value << (8 * (3 - index))
    return number


# --- extraction ---------------------------------------------------------------------------


def extract_targets(args: Any) -> list[str]:
    """Return the network targets in ``args``, deduplicated, in the order found.

    Looks in values under URL-ish keys (``url``, ``uri``, ``host``, ``hostname``,
    ``domain``, ``endpoint``, ``base_url``, ``server``, ``address`` and ``*_url``-style
    keys, case-insensitive) at any depth, inside JSON-encoded strings, and in opaque text.
    """
    found: dict[str, None] = {}
    for target in _walk(args, key_is_target=False, depth=0):
        cleaned = target.strip()
        if cleaned:
            found.setdefault(cleaned, None)
    return list(found)


def _is_target_key(key: str) -> bool:
    normalized = key.lower().replace("_", "").replace("-", "")
    return normalized in _TARGET_KEYS or _KEY_SUFFIX.search(key) is not None


def _walk(value: Any, *, key_is_target: bool, depth: int) -> Iterator[str]:
    if depth > _MAX_DEPTH:
        return
    yield from _walk_value(value, key_is_target, depth)


@functools.singledispatch
def _walk_value(value: object, key_is_target: bool, depth: int) -> Iterator[str]:
    """Targets in a value of a kind that holds none (``None``, a float, bytes)."""
    return iter(())


@_walk_value.register(dict)
def _walk_dict(value: dict[object, object], key_is_target: bool, depth: int) -> Iterator[str]:
    for key, item in value.items():
        yield from _walk(item, key_is_target=_is_target_key(str(key)), depth=depth + 1)


@_walk_value.register(list)
@_walk_value.register(tuple)
def _walk_items(value: Sequence[object], key_is_target: bool, depth: int) -> Iterator[str]:
    for item in value:
        yield from _walk(item, key_is_target=key_is_target, depth=depth + 1)


@_walk_value.register(str)
def _walk_str(value: str, key_is_target: bool, depth: int) -> Iterator[str]:
    if key_is_target:
        yield value
    decoded = json_document(value)
    if decoded is not None:
        yield from _walk(decoded, key_is_target=key_is_target, depth=depth + 1)
    else:
        yield from scan_text(value)


@_walk_value.register(int)
def _walk_int(value: int, key_is_target: bool, depth: int) -> Iterator[str]:
    """A port or a numeric host under a target key (``{"port": 8080}`` is no target)."""
    if key_is_target:
        yield str(value)


@_walk_value.register(bool)
def _walk_bool(value: bool, key_is_target: bool, depth: int) -> Iterator[str]:
    return iter(())


def scan_text(text: str) -> Iterator[str]:
    """Yield the targets in opaque text, in text order.

    URLs, ``scp``-style remotes, ``key=value`` and ``--key value`` pairs, ``ip:port`` pairs,
    ``/dev/tcp`` and ``socat`` addresses, and the operands of network commands.
    """
    found: list[tuple[int, str]] = []
    remainder = text
    for match in _URL.finditer(text):
        url = _clip_url(match.group(1), match.group(2))
        found.append((match.start(), url))
        start, end = match.start(), match.start() + len(url)
        remainder = remainder[:start] + " " * len(url) + remainder[end:]
    for match in _SCP.finditer(remainder):
        user, host, path = match.groups()
        found.append((match.start(), f"ssh://{user}@{host}/{path.lstrip('/')}"))
    for pattern in (_KEY_VALUE, _FLAG_VALUE):
        found.extend(
            (match.start(2), match.group(2))
            for match in pattern.finditer(remainder)
            # the value of `--url https://x` is the URL found above: the blank left in its
            # place is no gap to skip to the next word (`--url https://x build`)
            if not text[match.end(1) : match.start(2)].strip(" \t\r\n\\=\"'")
        )
    for pattern in (_IP_PORT, _DEV_TCP, _SOCAT):
        found.extend(
            (match.start(), f"{match.group(1)}:{match.group(2)}")
            for match in pattern.finditer(remainder)
        )
    offset = 0
    for line in remainder.replace("\\\n", "  ").splitlines(keepends=True):
        cursor = 0
        for operand in command_operands(_tokens(line)):
            host = operand.rpartition("://")[2].partition("/")[0].rpartition("@")[2]
            position = line.find(host, cursor)
            cursor = position + 1 if position != -1 else cursor
            found.append((offset + cursor, operand))
        offset += len(line)
    for _, target in sorted(found, key=lambda item: item[0]):
        yield target


def _clip_url(scheme: str, rest: str) -> str:
    cut = _AUTHORITY_CUT.search(rest, 0, len(authority_of(rest)))
    if cut is not None:
        return f"{scheme}://{rest[: cut.start()]}"
    return f"{scheme}://{rest}".rstrip(".,;:!?)]}")


def _tokens(text: str) -> list[str]:
    lexer = shlex.shlex(text, posix=True, punctuation_chars=";&|()<>")
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        return list(lexer)
    except ValueError:
        return re.findall(r"[;&|()<>]+|[^\s;&|()<>]+", text)
