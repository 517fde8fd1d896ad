"""Special addresses and names: what an egress target may not point at unless named.

Loopback, link-local, private, unspecified, multicast and reserved addresses in any
spelling (an IPv6 address that carries an IPv4 one is judged by that), and the names that
always mean this machine or the cloud metadata service (``docs/security-network.md``).
"""

from __future__ import annotations

import ipaddress

__all__ = ["IPAddress", "IPNetwork", "address_class", "embedded_ipv4", "special_name"]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


def _networks(*specs: str) -> tuple[IPNetwork, ...]:
    return tuple(ipaddress.ip_network(spec) for spec in specs)


_CLASSES: tuple[tuple[str, tuple[IPNetwork, ...]], ...] = (
    ("unspecified", _networks("0.0.0.0/8", "::/128")),
    ("loopback", _networks("127.0.0.0/8", "::1/128")),
    ("link_local", _networks("169.254.0.0/16", "fe80::/10")),
    (
        "private",
        _networks(
            "10.0.0.0/8",
            "172.16.0.0/12",
            "192.168.0.0/16",
            "100.64.0.0/10",
            "192.0.0.0/24",
            "198.18.0.0/15",
            "fc00::/7",
            "fec0::/10",
            "64:ff9b:1::/48",
            "2001:2::/48",
        ),
    ),
    ("multicast", _networks("224.0.0.0/4", "ff00::/8")),
    (
        "reserved",
        _networks(
            "240.0.0.0/4",
            "192.0.2.0/24",
            "198.51.100.0/24",
            "203.0.113.0/24",
            "192.88.99.0/24",
            "::/8",
            "100::/64",
            "2001:db8::/32",
            "2001:10::/28",
            "3fff::/20",
        ),
    ),
)
"""Address classes refused unless named, most specific reason first (IANA registries)."""

_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_SIIT = ipaddress.IPv6Network("::ffff:0:0:0/96")

_SPECIAL_NAMES: dict[str, str] = {
    "localhost": "localhost",
    "localhost.localdomain": "localhost",
    "ip6-localhost": "localhost",
    "ip6-loopback": "localhost",
    "metadata": "metadata",
    "metadata.google.internal": "metadata",
    "instance-data": "metadata",
    "instance-data.ec2.internal": "metadata",
}
"""Names that always mean this machine or the cloud metadata service."""


def embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one carries (mapped, 6to4, Teredo, NAT64, SIIT), if any."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]
    if address in _NAT64 or address in _SIIT:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def address_class(address: IPAddress) -> str | None:
    """Return why ``address`` is special (``loopback``, ``private``, ...) or ``None``.

    IPv6 forms that carry an IPv4 address (mapped, 6to4, Teredo, NAT64, SIIT) are judged
    by the IPv4 address they carry.
    """
    if isinstance(address, ipaddress.IPv6Address):
        embedded = embedded_ipv4(address)
        if embedded is not None:
            return address_class(embedded)
    for name, networks in _CLASSES:
        if any(address in network for network in networks):
            return name
    return None


def special_name(host: str) -> str | None:
    """``localhost`` or ``metadata`` when ``host`` (normalized) always means one, else None."""
    return _SPECIAL_NAMES.get(host)
