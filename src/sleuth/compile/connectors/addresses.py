"""Where a connector may connect (issue 27): public addresses only, unless the operator allows more.

A URL a client sends is hostile: `http://127.0.0.1:8088/api/…`, `http://169.254.169.254/` (a cloud's
metadata service) or `http://10.0.0.5/` would turn a sync into a request from inside the server's
network (SSRF). Every host a connector names is resolved, and every address it resolves to must be
global unicast; loopback, link-local, private, shared, reserved and multicast addresses are refused
unless `SLEUTH_CONNECTOR_ALLOW` names the host or a network holding the address. `file://` (a git
repository on this machine) is refused unless the allow list says `file`.

The check runs before each connection. A name that resolves differently a moment later (DNS
rebinding) is the limit of a check in front of a client: the web connector therefore connects to the
address it checked (`pinned`), and redirects are followed by hand, each one checked.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

from sleuth.compile.connectors.base import ConnectorConfigError, ConnectorError

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class AllowList:
    hosts: frozenset[str]
    networks: tuple[Network, ...]
    files: bool

    @classmethod
    def parse(cls, text: str) -> AllowList:
        hosts: set[str] = set()
        networks: list[Network] = []
        files = False
        for entry in (e.strip() for e in text.split(",")):
            if not entry:
                continue
            if entry == "file":
                files = True
                continue
            try:
                networks.append(ipaddress.ip_network(entry, strict=False))
            except ValueError:
                hosts.add(entry.casefold())
        return cls(frozenset(hosts), tuple(networks), files)

    def allows(self, host: str, address: Address) -> bool:
        return host.casefold() in self.hosts or any(address in n for n in self.networks)


def resolve(host: str, port: int) -> list[Address]:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise ConnectorError(f"cannot resolve {host!r}: {exc.strerror}") from None
    return [ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]) for info in infos]


def check_url(url: str, allow: AllowList, schemes: tuple[str, ...] = ("https", "http")) -> Address | None:
    """Refuse `url` unless its scheme is one of `schemes` and every address its host resolves to may
    be reached; the first such address (None for an allowed `file://`)."""
    parts = urlsplit(url)
    scheme = parts.scheme.casefold()
    if scheme == "file" and "file" in schemes:
        if not allow.files:
            raise ConnectorError("file:// URLs are refused: SLEUTH_CONNECTOR_ALLOW must say `file`")
        return None
    if scheme not in schemes:
        raise ConnectorConfigError(
            f"{url!r}: the URL must start with {' or '.join(s + '://' for s in schemes)}"
        )
    host = parts.hostname
    if not host:
        raise ConnectorConfigError(f"{url!r} names no host")
    if parts.username or parts.password:
        raise ConnectorConfigError(
            "credentials do not belong in the URL: give them as the connector's secret"
        )
    port = parts.port or (443 if scheme == "https" else 80)
    addresses = resolve(host, port)
    for address in addresses:
        for inner in (address, *embedded_ipv4(address)):
            if not public(inner) and not allow.allows(host, inner):
                shown = f"{address}" if inner == address else f"{address} (that is {inner})"
                raise ConnectorError(
                    f"{host} resolves to {shown}, a {_kind(inner)} address: refused (SLEUTH_CONNECTOR_ALLOW "
                    "names the hosts and networks connectors may reach beyond the public internet)"
                )
    return addresses[0]


_NAT64 = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))


def public(address: Address) -> bool:
    """On the public internet, and one machine: multicast counts as `is_global` to Python, not here."""
    return address.is_global and not address.is_multicast


def embedded_ipv4(address: Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address carries, which the network may deliver to: mapped
    (`::ffff:a.b.c.d`), IPv4-compatible (`::a.b.c.d`), 6to4 (`2002:AABB:CCDD::`), Teredo, and NAT64
    (`64:ff9b::a.b.c.d`, whose gateway connects to the IPv4 address inside)."""
    if not isinstance(address, ipaddress.IPv6Address):
        return []
    found: list[ipaddress.IPv4Address] = []
    if address.ipv4_mapped is not None:
        found.append(address.ipv4_mapped)
    if address.sixtofour is not None:
        found.append(address.sixtofour)
    if address.teredo is not None:
        found += list(address.teredo)
    packed = int(address)
    if any(address in net for net in _NAT64) or (packed >> 32 == 0 and packed > 1):
        found.append(ipaddress.IPv4Address(packed & 0xFFFFFFFF))
    return found


def _kind(address: Address) -> str:
    for name in ("loopback", "link_local", "private", "multicast", "reserved", "unspecified"):
        if getattr(address, f"is_{name}"):
            return name.replace("_", "-")
    return "non-public"
