"""Which destinations the server may dial on a stranger's say-so: the address rules, as pure
functions. Webhook deliveries and Client ID Metadata Document fetches both apply them, to the
URL, to every address its host resolves to, and to the very address dialled (so a name that
resolves elsewhere a second later, DNS rebinding, gains nothing).

A host is refused when it is `localhost` (or under `.localhost`), a name on the deny list, or
when any of its addresses is not globally routable: private, loopback, link-local, CGNAT,
multicast, reserved, unspecified, documentation and benchmarking ranges; IPv4 embedded in IPv6
(IPv4-mapped, IPv4-compatible, NAT64, 6to4, Teredo) is judged by the IPv4 it carries. IPv4
spelled as a decimal, octal, hexadecimal or short number ("2130706433", "0177.0.0.1",
"0x7f.1", "127.1") is read as the address a resolver would make of it. `Policy` says which
rules development and tests may lift.

Relies on: nothing but the standard library (`ipaddress`, `urllib.parse`); no app, no Django."""

from __future__ import annotations

import functools
import ipaddress
import re
from dataclasses import dataclass
from typing import Iterable
from urllib.parse import urlsplit

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# Cloud metadata and platform-internal addresses that are (or can be) globally routable, so
# the range rules alone would not catch them. Operators extend it (CONNECT_WEBHOOK_DENY_NETWORKS).
DEFAULT_DENY_NETWORKS = (
    "169.254.169.254/32",  # AWS, GCP, Azure, OpenStack instance metadata
    "fd00:ec2::254/128",  # AWS metadata over IPv6
    "100.100.100.200/32",  # Alibaba Cloud metadata
    "192.0.0.192/32",  # Oracle Cloud metadata
    "168.63.129.16/32",  # Azure wire server (a public address)
)
DEFAULT_DENY_HOSTS = ("metadata.google.internal", "metadata.goog", "metadata", "instance-data")

MAX_URL_LENGTH = 2048

_NAT64 = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))
_SIX_TO_FOUR = ipaddress.ip_network("2002::/16")
_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")
_CGNAT = ipaddress.ip_network("100.64.0.0/10")

# What the development flag lets a receiver be: loopback, RFC 1918 and unique-local networks,
# and carrier-grade NAT (tailnets, some container networks). Nothing else.
LOCAL_NETWORKS = tuple(ipaddress.ip_network(n) for n in (
    "127.0.0.0/8", "::1/128", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7", "100.64.0.0/10",
))


class UnsafeDestination(ValueError):
    """The destination is refused; the message says why (for logs, never for the wire)."""


@dataclass(frozen=True)
class Policy:
    """`allow_private` (development and tests: each caller says which setting) lifts exactly three
    rules: https-only (http:// is allowed), the `localhost` names, and the loopback and private
    ranges of `LOCAL_NETWORKS`. Everything else still holds: the deny list (addresses and names,
    however spelled or embedded), link-local (where cloud metadata services live, 169.254.0.0/16
    and fe80::/10), multicast, unspecified, reserved and the other non-global ranges."""

    allow_private: bool = False  # development and tests only: http://, localhost, LOCAL_NETWORKS
    deny_networks: tuple[str, ...] = DEFAULT_DENY_NETWORKS
    deny_hosts: tuple[str, ...] = DEFAULT_DENY_HOSTS

    def networks(self) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
        return _parsed_networks(self.deny_networks)


@functools.lru_cache(maxsize=8)
def _parsed_networks(networks: tuple[str, ...]) -> tuple:
    return tuple(ipaddress.ip_network(n, strict=False) for n in networks)


@dataclass(frozen=True)
class Destination:
    scheme: str
    host: str  # lower-case, without brackets or a trailing dot
    port: int
    literal: IPAddress | None  # the host when it is an address, however it was spelled


def parse_ipv4_number(host: str) -> ipaddress.IPv4Address | None:
    """The IPv4 address a resolver (inet_aton, WHATWG URL) reads in `host`, or None when the
    host is a name. Parts may be decimal, octal (leading 0) or hex (0x); fewer than four parts
    fill the last one's low bits ("127.1" = 127.0.0.1, "2130706433" = 127.0.0.1)."""
    parts = host.split(".")
    if parts and parts[-1] == "":
        parts = parts[:-1]
    if not parts or len(parts) > 4:
        return None
    numbers = []
    for part in parts:
        if re.fullmatch(r"0[xX][0-9a-fA-F]*", part):
            numbers.append(int(part[2:] or "0", 16))
        elif re.fullmatch(r"0[0-7]+", part):
            numbers.append(int(part, 8))
        elif re.fullmatch(r"[0-9]+", part):
            if len(part) > 1 and part.startswith("0"):
                raise UnsafeDestination(f"{host!r} is a malformed octal address")
            numbers.append(int(part))
        else:
            # A name — unless its last label is numeric, which URL parsers treat as an
            # (invalid) address rather than a name.
            if re.fullmatch(r"(0[xX][0-9a-fA-F]*|[0-9]+)", parts[-1]):
                raise UnsafeDestination(f"{host!r} mixes a name with a numeric label")
            return None
    *head, last = numbers
    if any(n > 255 for n in head) or last >= 256 ** (5 - len(numbers)):
        raise UnsafeDestination(f"{host!r} is out of range for an IPv4 address")
    value = 0
    for n in head:
        value = value * 256 + n
    value = value * 256 ** (5 - len(numbers)) + last
    return ipaddress.IPv4Address(value)


def parse_host(host: str) -> tuple[str, IPAddress | None]:
    """Normalise a URL host and read it as an address when it is one."""
    host = host.strip().lower()
    if host.startswith("[") and host.endswith("]"):
        try:
            return host[1:-1], ipaddress.IPv6Address(host[1:-1].split("%")[0])
        except ValueError:
            raise UnsafeDestination(f"{host!r} is not an IPv6 address") from None
    host = host.rstrip(".")
    if not host:
        raise UnsafeDestination("empty host")
    if ":" in host:
        try:
            return host, ipaddress.IPv6Address(host.split("%")[0])
        except ValueError:
            raise UnsafeDestination(f"{host!r} is not a host") from None
    return host, parse_ipv4_number(host)


def embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries, for the forms that reach IPv4 hosts."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if any(address in net for net in _NAT64):
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address in _SIX_TO_FOUR:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]  # the client; the server is a public relay
    if address in _IPV4_COMPATIBLE and int(address) > 1:  # ::a.b.c.d (deprecated); :: and ::1 stay IPv6
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def _denied(address: IPAddress, policy: Policy) -> str | None:
    """Whether `address`, or the IPv4 address it carries, is on the deny list: never dialled,
    whatever the policy allows."""
    for net in policy.networks():
        if address.version == net.version and address in net:
            return "on the deny list"
    if isinstance(address, ipaddress.IPv6Address):
        inner = embedded_ipv4(address)
        if inner is not None and _denied(inner, policy):
            return f"carries {inner}, on the deny list"
    return None


def _local(address: IPAddress) -> bool:
    return any(address.version == net.version and address in net for net in LOCAL_NETWORKS)


def address_problem(address: IPAddress, policy: Policy = Policy()) -> str | None:
    """Why `address` may not be dialled, or None when it may."""
    denied = _denied(address, policy)
    if denied:
        return denied
    if isinstance(address, ipaddress.IPv6Address):
        inner = embedded_ipv4(address)
        if inner is not None:
            problem = address_problem(inner, policy)
            return f"carries {inner}, {problem}" if problem else None
    if policy.allow_private and _local(address):
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.is_site_local:
        return "site-local"
    for problem, hit in (
        ("unspecified", address.is_unspecified),
        ("loopback", address.is_loopback),
        ("link-local", address.is_link_local),
        ("multicast", address.is_multicast),
        ("private", address.is_private),
        ("reserved", address.is_reserved),
    ):
        if hit:
            return problem
    if isinstance(address, ipaddress.IPv4Address) and address in _CGNAT:
        return "carrier-grade NAT"
    if not address.is_global:
        return "not globally routable"
    return None


def check_address(address: IPAddress | str, policy: Policy = Policy()) -> IPAddress:
    address = ipaddress.ip_address(address.split("%")[0] if isinstance(address, str) else address)
    problem = address_problem(address, policy)
    if problem:
        raise UnsafeDestination(f"{address} is {problem}")
    return address


def check_host_name(host: str, policy: Policy = Policy()) -> None:
    if host in policy.deny_hosts:
        raise UnsafeDestination(f"{host} is on the deny list")
    if (host == "localhost" or host.endswith(".localhost")) and not policy.allow_private:
        raise UnsafeDestination("localhost")


def check_url(url: str, policy: Policy = Policy()) -> Destination:
    """The URL's shape: https (http only when private destinations are allowed), a host, no
    credentials; a literal address or a refused name fails here, before any lookup."""
    if not isinstance(url, str) or not url or len(url) > MAX_URL_LENGTH or any(c.isspace() for c in url):
        raise UnsafeDestination("not a URL")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise UnsafeDestination("not a URL") from None
    scheme = parts.scheme.lower()
    allowed = {"https", "http"} if policy.allow_private else {"https"}
    if scheme not in allowed:
        raise UnsafeDestination(f"scheme {scheme!r} is not allowed")
    if parts.username is not None or parts.password is not None:
        raise UnsafeDestination("credentials in the URL")
    netloc_host = parts.netloc.rpartition("@")[2]
    raw_host = netloc_host[: netloc_host.index("]") + 1] if netloc_host.startswith("[") else netloc_host.split(":")[0]
    host, literal = parse_host(raw_host)
    check_host_name(host, policy)
    if literal is not None:
        check_address(literal, policy)
    return Destination(scheme=scheme, host=host, port=port or (443 if scheme == "https" else 80), literal=literal)


def check_resolved(host: str, addresses: Iterable[str], policy: Policy = Policy()) -> list[IPAddress]:
    """Every address the host resolved to must pass: one bad answer refuses the host, so the
    choice of which one to dial never matters."""
    checked = [check_address(a, policy) for a in addresses]
    if not checked:
        raise UnsafeDestination(f"{host} resolves to no address")
    return checked
