"""Which addresses the hub may open a connection to (docs/protocol.md "Outbound targets").

An administrator names the hosts the hub calls (tool providers' ``base_url``, approval webhook URLs),
so without a rule a config file could turn the hub into a way into the networks around it: the cloud
metadata service on a link-local address, an internal admin port on a private range. The rule, for
every address a target is or resolves to:

==============  ====================================================================  ==============
kind            addresses                                                             allowed
==============  ====================================================================  ==============
``loopback``    127.0.0.0/8, ::1                                                      always
``public``      everything not listed below                                           always
``private``     RFC 1918, CGNAT 100.64.0.0/10, benchmarking 198.18.0.0/15, fc00::/7   only inside
                                                                                      ``BAILING_OUTBOUND_
                                                                                      ALLOWED_NETWORKS``
``link_local``  169.254.0.0/16, fe80::/10 (the metadata services live here)           never
``unspecified`` 0.0.0.0/8, ::                                                         never
``multicast``   224.0.0.0/4, ff00::/8                                                 never
``broadcast``   255.255.255.255                                                       never
``reserved``    240.0.0.0/4, documentation and protocol ranges, IPv6 outside 2000::/3  never
                and fc00::/7 (site-local fec0::/10, discard 100::/64, 2001::/23 …)
==============  ====================================================================  ==============

An IPv6 address that carries an IPv4 address — mapped ``::ffff:a.b.c.d``, NAT64 ``64:ff9b::a.b.c.d``
and 6to4 ``2002:ab:cd::`` — is judged as that IPv4 address: ``::ffff:169.254.169.254`` is link-local.
The tables are written out here rather than taken from ``ipaddress``'s ``is_private``/``is_global``,
whose lists change between Python releases.

Pure functions on addresses and networks: no Django, no network.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Iterable

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

LOOPBACK = "loopback"
PUBLIC = "public"
PRIVATE = "private"
LINK_LOCAL = "link_local"
UNSPECIFIED = "unspecified"
MULTICAST = "multicast"
BROADCAST = "broadcast"
RESERVED = "reserved"
# Kinds no setting can allow.
NEVER_ALLOWED = frozenset({LINK_LOCAL, UNSPECIFIED, MULTICAST, BROADCAST, RESERVED})

_N = ipaddress.ip_network
# First match wins: the more specific networks come first.
_V4_TABLE: tuple[tuple[ipaddress.IPv4Network, str], ...] = (
    (_N("255.255.255.255/32"), BROADCAST),
    (_N("0.0.0.0/8"), UNSPECIFIED),  # "this network": 0.0.0.0 reaches the host itself on Linux
    (_N("127.0.0.0/8"), LOOPBACK),
    (_N("169.254.0.0/16"), LINK_LOCAL),
    (_N("224.0.0.0/4"), MULTICAST),
    (_N("240.0.0.0/4"), RESERVED),
    (_N("192.0.0.0/24"), RESERVED),  # IETF protocol assignments
    (_N("192.0.2.0/24"), RESERVED),  # documentation (TEST-NET-1..3)
    (_N("198.51.100.0/24"), RESERVED),
    (_N("203.0.113.0/24"), RESERVED),
    (_N("192.88.99.0/24"), RESERVED),  # the deprecated 6to4 relay anycast
    (_N("10.0.0.0/8"), PRIVATE),
    (_N("172.16.0.0/12"), PRIVATE),
    (_N("192.168.0.0/16"), PRIVATE),
    (_N("100.64.0.0/10"), PRIVATE),  # carrier-grade NAT
    (_N("198.18.0.0/15"), PRIVATE),  # benchmarking: lab networks
)
_V6_MAPPED = _N("::ffff:0:0/96")
_V6_NAT64 = _N("64:ff9b::/96")
_V6_6TO4 = _N("2002::/16")
_V6_GLOBAL_UNICAST = _N("2000::/3")
_V6_TABLE: tuple[tuple[ipaddress.IPv6Network, str], ...] = (
    (_N("::/128"), UNSPECIFIED),
    (_N("::1/128"), LOOPBACK),
    (_N("fe80::/10"), LINK_LOCAL),
    (_N("ff00::/8"), MULTICAST),
    (_N("fec0::/10"), RESERVED),  # deprecated site-local
    (_N("fc00::/7"), PRIVATE),  # unique local addresses
    (_N("2001:db8::/32"), RESERVED),  # documentation
    (_N("3fff::/20"), RESERVED),  # documentation
    (_N("2001::/23"), RESERVED),  # IETF protocol assignments (Teredo, ORCHID, …)
    (_N("5f00::/16"), RESERVED),  # SRv6 segment identifiers
)
# Legacy IPv4 spellings that resolvers accept as addresses ("0251.0376.0251.0376", "2130706433").
_LEGACY_IPV4 = re.compile(r"(?:0x[0-9a-f]*|[0-9]+)(?:\.(?:0x[0-9a-f]*|[0-9]+)){0,3}", re.IGNORECASE)


def judged_address(address: IPAddress) -> IPAddress:
    """The address the rule is applied to: the IPv4 address an IPv6 one carries, else itself."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.scope_id:
            address = ipaddress.IPv6Address(str(address).split("%", 1)[0])
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped
        if address in _V6_NAT64:
            return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
        if address.sixtofour is not None:
            return address.sixtofour
    return address


def address_kind(address: IPAddress | str) -> str:
    """The kind of ``address`` (one of the module's kind constants), embedded IPv4 judged as such."""
    judged = judged_address(ipaddress.ip_address(address) if isinstance(address, str) else address)
    if isinstance(judged, ipaddress.IPv4Address):
        for network, kind in _V4_TABLE:
            if judged in network:
                return kind
        return PUBLIC
    for network, kind in _V6_TABLE:
        if judged in network:
            return kind
    return PUBLIC if judged in _V6_GLOBAL_UNICAST else RESERVED


def address_problem(address: IPAddress | str, allowed: Iterable[IPNetwork] = ()) -> str | None:
    """Why the hub must not connect to ``address`` (its kind), or None when it may."""
    kind = address_kind(address)
    if kind in (LOOPBACK, PUBLIC):
        return None
    if kind == PRIVATE:
        judged = judged_address(ipaddress.ip_address(address) if isinstance(address, str) else address)
        if any(judged.version == network.version and judged in network for network in allowed):
            return None
    return kind


def literal_address(host: str) -> IPAddress | None:
    """``host`` as an IP address when it is written as one (IPv6 without brackets), else None.

    Legacy IPv4 spellings count as addresses: resolvers accept ``2130706433`` or ``0x7f.1`` and
    connect to the address they stand for, so they are judged like ``127.0.0.1`` is.
    """
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    if _LEGACY_IPV4.fullmatch(host):
        try:
            return ipaddress.IPv4Address(socket.inet_aton(host))
        except OSError:
            return None
    return None


def network_problem(network: IPNetwork) -> str | None:
    """Why ``network`` cannot be listed in ``BAILING_OUTBOUND_ALLOWED_NETWORKS``, or None.

    The list opens private ranges only; a network that overlaps addresses no setting may allow
    (link-local above all) is refused rather than silently half-applied.
    """
    if isinstance(network, ipaddress.IPv4Network):
        for never, kind in _V4_TABLE:
            if kind in NEVER_ALLOWED and network.overlaps(never):
                return kind
        return None
    for never, kind in _V6_TABLE:
        if kind in NEVER_ALLOWED and network.overlaps(never):
            return kind
    if network.overlaps(_V6_MAPPED) or network.overlaps(_V6_NAT64) or network.overlaps(_V6_6TO4):
        return "embeds IPv4 addresses (list the IPv4 network instead)"
    if network.subnet_of(_N("::1/128")) or network.subnet_of(_N("fc00::/7")):
        return None
    if not network.subnet_of(_V6_GLOBAL_UNICAST):
        return RESERVED
    return None


def parse_allowed_networks(entries: Iterable[str]) -> tuple[IPNetwork, ...]:
    """The networks of ``BAILING_OUTBOUND_ALLOWED_NETWORKS``; raises ``ValueError`` naming the
    entry for one that is not a network or that ``network_problem`` refuses."""
    networks = []
    for raw in entries:
        entry = raw.strip()
        if not entry:
            continue
        try:
            network = ipaddress.ip_network(entry, strict=False)
        except ValueError:
            raise ValueError(f"{entry!r} is not an IP network (CIDR)") from None
        problem = network_problem(network)
        if problem:
            raise ValueError(f"{entry!r} covers {problem} addresses, which are never allowed")
        networks.append(network)
    return tuple(networks)
