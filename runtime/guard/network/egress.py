"""Network egress policy: which targets a tool may reach, and why not.

The decisions are plain functions over a frozen :class:`NetworkPolicy` built from the
project's options (``network_egress_policy``, ``network_allowlist``,
``network_allowed_schemes``):

1. A target whose scheme is not allowed → ``network_protocol_denied``.
2. A target that does not parse (bad host, bad port, backslash, control character)
   → ``network_denied`` (``invalid_host`` / ``invalid_port``).
3. A special address — loopback, link-local, private, unspecified, multicast, reserved —
   in any spelling, and the names ``localhost`` / ``*.localhost`` / cloud metadata names
   → ``network_endpoint_denied``, whatever the egress policy, unless an allowlist entry
   names that exact host or address (or a CIDR entry covers the address).
4. The host not allowlisted (suffix match: ``example.com`` allows ``api.example.com``)
   → ``network_denied`` (``not_allowlisted``), under egress ``deny``, and under egress
   ``allow`` whenever ``network_allowlist`` has entries. Egress ``allow`` with an empty
   allowlist lets every public host through.

:func:`resolve_and_check` repeats rule 3 on every address a name resolves to, so a name
that passes the policy cannot point at an internal address (DNS rebinding); ``http.fetch``
then connects to exactly the address that was checked. Finding targets and parsing them
lives in :mod:`runtime.guard.network.targets`, the special addresses and names of rule 3 in
:mod:`runtime.guard.network.addresses`.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal

import msgspec

from events.catalog import SecurityNetworkDenied
from runtime.errors import ToolError
from runtime.guard.network.addresses import (
    IPAddress,
    address_class,
    embedded_ipv4,
    special_name,
)
from runtime.guard.network.targets import (
    ParsedTarget,
    TargetParseError,
    authority_of,
    extract_targets,
    parse_target,
    split_scheme,
)
from runtime.option_table import DEFAULTS

__all__ = [
    "NetworkDeniedError",
    "NetworkPolicy",
    "Resolver",
    "TargetDecision",
    "check_args",
    "denial_error",
    "extract_targets",
    "first_denial",
    "judge_target",
    "normalize_allowlist_entry",
    "resolve_and_check",
    "signal_for",
    "system_resolver",
]

_DEFAULT_SCHEMES: tuple[str, ...] = tuple(DEFAULTS["network_allowed_schemes"])

Resolver = Callable[[str, int], Sequence[str]]
"""``resolver(host, port) -> addresses``; :func:`system_resolver` uses ``getaddrinfo``."""


_MESSAGES: dict[str, str] = {
    "invalid_host": "its host is not a valid host name or address",
    "invalid_port": "its port is not a number from 0 to 65535",
    "scheme_not_allowed": "its scheme is not in network_allowed_schemes",
    "not_allowlisted": "its host is not in network_allowlist",
    "localhost": "it names this machine",
    "metadata": "it names the cloud metadata service",
}


def normalize_allowlist_entry(entry: str) -> str:
    """Normalize one ``network_allowlist`` entry; raise ``ValueError`` if it is no host.

    Names come back as lowercase IDNA ASCII without a trailing dot (``*.`` and a leading
    ``.`` are kept as ``*.``), addresses in canonical form, CIDR blocks as networks
    (``10.0.0.0/8``). A scheme, a port or a path in the entry is ignored.
    """
    text = entry.strip()
    if "/" in text and "://" not in text:
        try:
            return str(ipaddress.ip_network(text, strict=False))
        except ValueError:
            pass
    wildcard = text.startswith(("*.", "."))
    if wildcard:
        text = text.lstrip("*").lstrip(".")
    try:
        parsed = parse_target(text)
    except TargetParseError as e:
        raise ValueError(f"network_allowlist entry {entry!r}: {e}") from e
    if wildcard and not parsed.is_ip:
        return f"*.{parsed.host}"
    return parsed.host


class NetworkPolicy(msgspec.Struct, frozen=True, kw_only=True):
    """The project's egress rules, normalized once per project."""

    egress: Literal["allow", "deny"] = "deny"
    """``allow``: commands get the network, and with an empty allowlist any public host
    passes; ``deny``: only allowlisted hosts, commands without network."""
    restricted: bool = False
    """``network_allowlist`` has entries: only they pass, under egress ``allow`` too."""
    names: frozenset[str] = frozenset()
    """Allowlisted host names; each allows itself and its subdomains."""
    domains: frozenset[str] = frozenset()
    """Allowlisted ``*.`` domains; subdomains and the apex, never special endpoints."""
    addresses: frozenset[str] = frozenset()
    """Allowlisted addresses, canonical."""
    networks: tuple[str, ...] = ()
    """Allowlisted CIDR blocks."""
    allowed_schemes: tuple[str, ...] = _DEFAULT_SCHEMES
    """Lowercased allowed schemes, sorted."""

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> NetworkPolicy:
        """Build the policy from runtime options; anything unexpected fails closed."""
        egress: Literal["allow", "deny"] = (
            "allow" if options.get("network_egress_policy") == "allow" else "deny"
        )
        names: set[str] = set()
        domains: set[str] = set()
        addresses: set[str] = set()
        networks: list[str] = []
        for entry in options.get("network_allowlist") or ():
            if not isinstance(entry, str):
                continue
            try:
                normalized = normalize_allowlist_entry(entry)
            except ValueError:
                continue
            if "/" in normalized:
                networks.append(normalized)
            elif normalized.startswith("*."):
                domains.add(normalized[2:])
            elif _is_address(normalized):
                addresses.add(normalized)
            else:
                names.add(normalized)
        schemes = options.get("network_allowed_schemes")
        if schemes is None:
            schemes = _DEFAULT_SCHEMES
        return cls(
            egress=egress,
            # entries that did not normalize still count: a list of only malformed
            # entries allows nothing rather than everything
            restricted=bool(options.get("network_allowlist")),
            names=frozenset(names),
            domains=frozenset(domains),
            addresses=frozenset(addresses),
            networks=tuple(sorted(set(networks))),
            allowed_schemes=tuple(sorted({str(s).lower() for s in schemes})),
        )

    def names_address(self, address: IPAddress) -> bool:
        """Tell whether the allowlist names ``address`` (or the IPv4 it carries) or its block."""
        candidates: list[IPAddress] = [address]
        if isinstance(address, ipaddress.IPv6Address):
            embedded = embedded_ipv4(address)
            if embedded is not None:
                candidates.append(embedded)
        for candidate in candidates:
            if str(candidate) in self.addresses:
                return True
            if any(candidate in ipaddress.ip_network(net) for net in self.networks):
                return True
        return False

    def names_host(self, host: str) -> bool:
        """Tell whether the allowlist names exactly this host name."""
        return host in self.names

    def allows_host(self, host: str) -> bool:
        """Tell whether the allowlist covers this host name by suffix match."""
        labels = host.split(".")
        suffixes = {".".join(labels[i:]) for i in range(len(labels))}
        return bool(suffixes & self.names) or bool(suffixes & self.domains)


def _is_address(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


class TargetDecision(msgspec.Struct, frozen=True, kw_only=True):
    """The verdict on one network target."""

    target: str
    """The target as found."""
    host: str | None
    """Normalized host, when it parsed."""
    scheme: str | None
    """Lowercased scheme, when there was one."""
    port: int | None
    """Explicit or default port, when known."""
    allowed: bool
    """The target may be reached."""
    code: str | None = None
    """``network_denied``, ``network_endpoint_denied`` or ``network_protocol_denied``."""
    reason: str | None = None
    """Why: ``invalid_host``, ``not_allowlisted``, ``loopback``, ``resolved_private``, ..."""


def judge_target(policy: NetworkPolicy, target: str) -> TargetDecision:
    """Judge one target (a URL or a bare ``host[:port]``) against ``policy``."""
    scheme, _ = split_scheme(target)
    parsed: ParsedTarget | None
    try:
        parsed = parse_target(target)
        error = None
    except TargetParseError as e:
        parsed, error = None, e.reason

    def decide(code: str | None, reason: str | None) -> TargetDecision:
        return TargetDecision(
            target=target,
            host=parsed.host if parsed else None,
            scheme=scheme,
            port=parsed.port if parsed else None,
            allowed=code is None,
            code=code,
            reason=reason,
        )

    if scheme is not None and scheme not in policy.allowed_schemes:
        return decide("network_protocol_denied", "scheme_not_allowed")
    if parsed is None:
        return decide("network_denied", error)
    special = _special(parsed)
    if special is not None:
        if _named_exactly(policy, parsed):
            return decide(None, None)
        return decide("network_endpoint_denied", special)
    if policy.egress == "allow" and not policy.restricted:
        return decide(None, None)
    if parsed.is_ip:
        allowed = policy.names_address(ipaddress.ip_address(parsed.host))
    else:
        allowed = policy.allows_host(parsed.host)
    return decide(None, None) if allowed else decide("network_denied", "not_allowlisted")


def _special(parsed: ParsedTarget) -> str | None:
    if parsed.is_ip:
        return address_class(ipaddress.ip_address(parsed.host))
    if parsed.host.endswith(".localhost"):
        return "localhost"
    return special_name(parsed.host)


def _named_exactly(policy: NetworkPolicy, parsed: ParsedTarget) -> bool:
    if parsed.is_ip:
        return policy.names_address(ipaddress.ip_address(parsed.host))
    return policy.names_host(parsed.host)


def check_args(policy: NetworkPolicy, args: Any) -> list[TargetDecision]:
    """Judge every target :func:`extract_targets` finds in ``args``, in order."""
    return [judge_target(policy, target) for target in extract_targets(args)]


def first_denial(decisions: Iterable[TargetDecision]) -> TargetDecision | None:
    """Return the first refused decision, or ``None`` when all are allowed."""
    return next((decision for decision in decisions if not decision.allowed), None)


def system_resolver(host: str, port: int) -> list[str]:
    """Resolve ``host`` with ``socket.getaddrinfo`` (TCP); return the addresses."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


def resolve_and_check(
    policy: NetworkPolicy,
    host: str,
    port: int,
    *,
    resolver: Resolver | None = None,
    target: str | None = None,
) -> list[str]:
    """Resolve ``host`` and return its addresses, all of them checked.

    Raise :class:`NetworkDeniedError` (``network_endpoint_denied``, reason
    ``resolved_<class>``) when any address is special and neither that address nor the
    exact host name is allowlisted; raise ``ToolError("tool_error", kind="resolve_failed")``
    when the name does not resolve. ``host`` is a normalized host (``TargetDecision.host``).
    """
    label = target if target is not None else f"{host}:{port}"
    if _is_address(host):
        answers: Sequence[str] = [host]
    else:
        try:
            answers = (resolver or system_resolver)(host, port)
        except (OSError, UnicodeError) as e:
            raise ToolError(
                "tool_error", f"could not resolve {host!r}: {e}", kind="resolve_failed", host=host
            ) from e
    addresses: dict[str, None] = {}
    for answer in answers:
        address = ipaddress.ip_address(str(answer).partition("%")[0])
        special = address_class(address)
        if special is not None and not (policy.names_address(address) or policy.names_host(host)):
            prefix = "" if _is_address(host) else "resolved_"
            decision = TargetDecision(
                target=label,
                host=host,
                scheme=None,
                port=port,
                allowed=False,
                code="network_endpoint_denied",
                reason=f"{prefix}{special}",
            )
            raise denial_error(decision, address=str(address))
        addresses.setdefault(str(address), None)
    if not addresses:
        raise ToolError(
            "tool_error", f"{host!r} resolved to no address", kind="resolve_failed", host=host
        )
    return list(addresses)


class NetworkDeniedError(ToolError):
    """A network target was refused; ``decision`` says which and why."""

    def __init__(self, decision: TargetDecision, message: str, **fields: Any) -> None:
        super().__init__(decision.code or "network_denied", message, **fields)
        self.decision = decision


def display_target(target: str) -> str:
    """``target`` with any ``user:password@`` hidden and its length capped, for records."""
    scheme, rest = split_scheme(target)
    authority = authority_of(rest)
    userinfo, at, hostport = authority.rpartition("@")
    if at and userinfo:
        prefix = target[: len(target) - len(rest)] if scheme else ""
        target = f"{prefix}***@{hostport}{rest[len(authority) :]}"
    return target if len(target) <= 2048 else target[:2048] + "..."


def denial_error(decision: TargetDecision, **fields: Any) -> NetworkDeniedError:
    """Build the ``ToolError`` for a refused decision: ``{code, target, host, reason}``."""
    reason = decision.reason or "not_allowlisted"
    shown = display_target(decision.target)
    if reason.startswith("resolved_"):
        why = f"{decision.host} resolves to a {reason[9:].replace('_', '-')} address"
    elif reason in _MESSAGES:
        why = _MESSAGES[reason]
    else:
        why = f"it is a {reason.replace('_', '-')} address"
    fix = (
        "allow the scheme in network_allowed_schemes"
        if decision.code == "network_protocol_denied"
        else "fix the target"
        if reason in ("invalid_host", "invalid_port")
        else "name the exact host or address in network_allowlist to allow it"
    )
    return NetworkDeniedError(
        decision,
        f"network target {shown!r} is refused: {why}; {fix}",
        target=shown,
        host=decision.host,
        reason=reason,
        **fields,
    )


def signal_for(
    decision: TargetDecision, tool: str | None, call_id: str | None
) -> SecurityNetworkDenied:
    """Build the ``security.network_denied`` signal for a refused decision."""
    return SecurityNetworkDenied(
        target=display_target(decision.target),
        reason=decision.reason or decision.code or "network_denied",
        tool=tool,
        call_id=call_id,
    )
