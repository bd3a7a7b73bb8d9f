"""Which webhook endpoint addresses may be called: the SSRF guard.

A shop's server usually sits next to things that trust it (a cloud metadata service, a
database, an admin panel on localhost): an endpoint URL must not turn the delivery
worker into a way to reach them. So, unless ``cmsshop.webhooks.allow_private_addresses``
is on (development and tests), an endpoint must be ``https`` and every address its host
stands for must be globally routable. The check runs when an endpoint is saved (to tell
the admin early) and again at each delivery against that moment's DNS answers, and the
delivery connects to the checked address itself (no second lookup), so a name that
answers a public address at save time and 127.0.0.1 later (DNS rebinding) is refused.

``url_problem`` says what is wrong with a URL, or None; ``resolve_checked`` gives the
addresses to connect to. Names are resolved by a :class:`Resolver`: the system's
(``socket.getaddrinfo``) or, with ``cmsshop.webhooks.nameservers``, those DNS servers
asked directly through dnspython.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Sequence
from typing import Protocol
from urllib.parse import SplitResult, urlsplit

import dns.exception
import dns.nameserver
import dns.resolver

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# Beyond what ipaddress calls non-global: ranges no public endpoint lives in.
_EXTRA_BLOCKED = tuple(
    ipaddress.ip_network(net)
    for net in (
        "0.0.0.0/8",  # "this network"
        "100.64.0.0/10",  # carrier-grade NAT, shared address space
        "192.0.0.0/24",  # IETF protocol assignments
        "198.18.0.0/15",  # benchmarking
        "224.0.0.0/4",  # multicast
        "240.0.0.0/4",  # reserved, broadcast
        "64:ff9b:1::/48",  # local-use NAT64
        "2002::/16",  # 6to4: embeds an IPv4 address of any kind
        "ff00::/8",  # multicast
    )
)


class ResolutionFailed(Exception):
    """The name has no address, or the DNS could not be asked."""


class Resolver(Protocol):
    def resolve(self, host: str, port: int) -> list[str]:
        """Every address ``host`` stands for (IPv4 and IPv6, as text)."""


class SystemResolver:
    """The operating system's resolver (``/etc/hosts``, then its DNS servers)."""

    def resolve(self, host: str, port: int) -> list[str]:
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except (OSError, UnicodeError) as exc:
            raise ResolutionFailed(f"cannot resolve {host}: {exc}") from exc
        return _unique(info[4][0] for info in infos)


class NameserverResolver:
    """Asks the named DNS servers directly (A and AAAA), ignoring ``/etc/hosts``."""

    def __init__(self, nameservers: Sequence[str], timeout: float = 5.0) -> None:
        self._resolver = dns.resolver.Resolver(configure=False)
        self._resolver.nameservers = [
            dns.nameserver.Do53Nameserver(*parse_nameserver(entry)) for entry in nameservers
        ]
        self._resolver.lifetime = timeout
        self._resolver.timeout = timeout

    def resolve(self, host: str, port: int) -> list[str]:
        found: list[str] = []
        errors = []
        for rdtype in ("A", "AAAA"):
            try:
                answer = self._resolver.resolve(host, rdtype, search=False)
            except (dns.resolver.NXDOMAIN, dns.resolver.NoAnswer) as exc:
                errors.append(exc)
                continue
            except (dns.exception.DNSException, ValueError) as exc:
                raise ResolutionFailed(f"cannot resolve {host}: {exc}") from exc
            found.extend(record.address for record in answer)
        if not found:
            raise ResolutionFailed(f"cannot resolve {host}: no address")
        return _unique(found)


def parse_nameserver(entry: str) -> tuple[str, int]:
    """("10.0.0.53", 53) from "10.0.0.53", "10.0.0.53:5353" or "[::1]:5353"."""
    entry = entry.strip()
    if entry.startswith("["):
        address, _, rest = entry[1:].partition("]")
        port = int(rest[1:]) if rest.startswith(":") else 53
    elif entry.count(":") == 1:
        address, _, port_text = entry.partition(":")
        port = int(port_text)
    else:
        address, port = entry, 53
    ipaddress.ip_address(address)  # a name here would need a resolver of its own
    return address, port


def make_resolver(settings) -> Resolver:
    """The resolver ``cmsshop.webhooks.nameservers`` asks for."""
    nameservers = settings.get("cmsshop.webhooks.nameservers") or []
    if nameservers:
        timeout = float(settings.get("cmsshop.webhooks.connect_timeout", 5.0))
        return NameserverResolver(nameservers, timeout=timeout)
    return SystemResolver()


def _unique(addresses) -> list[str]:
    return list(dict.fromkeys(addresses))


def address_problem(address: str | IPAddress) -> str | None:
    """Why an address may not be called in production, or None when it is public."""
    ip = ipaddress.ip_address(address) if isinstance(address, str) else address
    if isinstance(ip, ipaddress.IPv6Address):
        # An IPv4 address dressed as IPv6 (::ffff:127.0.0.1, NAT64 of it) is judged as
        # the IPv4 address it reaches.
        embedded = ip.ipv4_mapped or ip.sixtofour
        if embedded is None and ip in ipaddress.ip_network("64:ff9b::/96"):
            embedded = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        if embedded is not None:
            problem = address_problem(embedded)
            return problem and f"{ip} reaches {embedded}: {problem}"
    if ip.is_loopback:
        return f"{ip} is a loopback address"
    if ip.is_link_local:
        return f"{ip} is a link-local address"
    if ip.is_unspecified:
        return f"{ip} is unspecified"
    if ip.is_multicast:
        return f"{ip} is a multicast address"
    if ip.is_private:
        return f"{ip} is a private address"
    if ip.is_reserved:
        return f"{ip} is a reserved address"
    if any(ip in net for net in _EXTRA_BLOCKED if net.version == ip.version):
        return f"{ip} is not a public address"
    if not ip.is_global:
        return f"{ip} is not a public address"
    return None


def _parts(url: str) -> tuple[SplitResult | None, str | None]:
    try:
        parts = urlsplit(url.strip())
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError as exc:
        return None, f"not a valid URL: {exc}"
    return parts, None


def host_and_port(url: str) -> tuple[str, int]:
    """The host (without brackets) and port of a URL ``url_problem`` accepted."""
    parts = urlsplit(url.strip())
    port = parts.port or (443 if parts.scheme.lower() == "https" else 80)
    return parts.hostname or "", port


def _legacy_ipv4(host: str) -> bool:
    try:
        socket.inet_aton(host)
    except (OSError, ValueError):
        return False
    return True


def literal_ip(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def url_problem(url: str, *, allow_private: bool, resolver: Resolver | None = None) -> str | None:
    """What makes ``url`` unfit for a webhook endpoint, or None.

    Checks the form (an http(s) URL with a host, no user name or password, a port in
    range, https unless ``allow_private``) and, unless ``allow_private``, that the host
    is a public IP address or a name whose every address is public. With ``resolver``
    None, names are not looked up (the form alone is checked, with literal IPs).
    """
    if len(url) > 2048:
        return "the URL is longer than 2048 characters"
    parts, problem = _parts(url)
    if problem:
        return problem
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        return "the URL must start with https://"
    if scheme == "http" and not allow_private:
        return "the URL must use https"
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        return "the URL must not contain a user name or password"
    host = parts.hostname
    if not host:
        return "the URL has no host"
    if parts.port is not None and not 0 < parts.port < 65536:
        return "the port must be between 1 and 65535"
    if any(ch.isspace() for ch in url.strip()) or "\\" in parts.netloc:
        return "the URL must not contain spaces or backslashes"
    if allow_private:
        return None
    ip = literal_ip(host)
    if ip is not None:
        problem = address_problem(ip)
        return f"not allowed: {problem}" if problem else None
    if _legacy_ipv4(host):
        # "2130706433", "0x7f.1", "017700000001": C resolvers read them as 127.0.0.1.
        return f"not allowed: {host} is an IPv4 address in a legacy form"
    if host.rstrip(".").lower() == "localhost" or host.rstrip(".").lower().endswith(".localhost"):
        return "not allowed: localhost is a loopback name"
    if resolver is None:
        return None
    try:
        check_addresses(host, resolve_all(resolver, host, host_and_port(url)[1]))
    except AddressRefused as exc:
        return f"not allowed: {exc}"
    except ResolutionFailed as exc:
        return str(exc)
    return None


class AddressRefused(Exception):
    """An address the endpoint's host stands for is not public."""


def resolve_all(resolver: Resolver, host: str, port: int) -> list[str]:
    ip = literal_ip(host)
    if ip is not None:
        return [str(ip)]
    return resolver.resolve(host, port)


def check_addresses(host: str, addresses: Sequence[str]) -> None:
    """Raise AddressRefused when any of ``host``'s addresses is not public (one bad
    answer is enough: a client could be steered to it)."""
    for address in addresses:
        problem = address_problem(address.split("%", 1)[0])
        if problem:
            raise AddressRefused(f"{host} resolves to {address}: {problem}")


def resolve_checked(
    url: str, *, allow_private: bool, resolver: Resolver
) -> tuple[str, int, list[str]]:
    """(host, port, addresses to connect to) for a delivery to ``url``: resolved now,
    every address checked unless ``allow_private``. Raises AddressRefused or
    ResolutionFailed."""
    problem = url_problem(url, allow_private=allow_private, resolver=None)
    if problem:
        raise AddressRefused(problem)
    host, port = host_and_port(url)
    addresses = resolve_all(resolver, host, port)
    if not allow_private:
        check_addresses(host, addresses)
    return host, port, addresses
