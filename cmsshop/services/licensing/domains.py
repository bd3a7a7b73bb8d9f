"""Domain normalisation and the environment (production / staging / local) of a site.

The server decides where an installation runs, never a client field: a runtime sends
whatever its CMS reports as the site URL and this module reduces it to one canonical
host name, then classifies it. Local and staging sites do not use a paid seat.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import re
from collections.abc import Iterable
from urllib.parse import urlsplit

import idna

PRODUCTION, STAGING, LOCAL = "production", "staging", "local"
ENVIRONMENTS = (PRODUCTION, STAGING, LOCAL)

# Reserved for testing, documentation and local networks (RFC 2606, RFC 6761, RFC 6762,
# RFC 8375): never a customer's public site. ``.dev`` is a real public TLD and is absent.
LOCAL_TLDS = frozenset({"localhost", "test", "example", "invalid", "local"})
LOCAL_SUFFIXES = (".home.arpa",)
DEFAULT_STAGING_PREFIXES = ("staging.", "stage.")
DEFAULT_STAGING_SUFFIXES: tuple[str, ...] = ()

MAX_INPUT_LENGTH = 2048
LABEL = re.compile(r"^(?!-)[a-z0-9-]{1,63}(?<!-)$")
# Already canonical ASCII (the usual case: a runtime sends back what it was given).
PLAIN_HOST = re.compile(r"^(?:(?!-)[a-z0-9-]{1,63}(?<!-)\.)*(?!-)[a-z0-9-]{1,63}(?<!-)$")


class InvalidDomain(ValueError):
    """The value is neither a host name, an IP address nor a URL with one."""


@dataclasses.dataclass(frozen=True)
class SeatRules:
    """Which host names count as staging (configurable per site)."""

    staging_prefixes: tuple[str, ...] = DEFAULT_STAGING_PREFIXES
    staging_suffixes: tuple[str, ...] = DEFAULT_STAGING_SUFFIXES

    @classmethod
    def from_lists(cls, prefixes: Iterable[str], suffixes: Iterable[str]) -> SeatRules:
        return cls(
            tuple(p.strip().lower() for p in prefixes if p.strip()),
            tuple(s.strip().lower() for s in suffixes if s.strip()),
        )


def _host_of(value: str) -> str:
    """The host part of a URL or bare host (``https://Shop.Example.com:8443/x`` -> ``Shop...``)."""
    text = value.strip()
    if not text or len(text) > MAX_INPUT_LENGTH:
        raise InvalidDomain("empty or too long")
    if any(ch.isspace() or ord(ch) < 0x20 or ord(ch) == 0x7F for ch in text):
        raise InvalidDomain("contains whitespace or control characters")
    if _ip_literal(text) is not None:  # a bare IPv6 address has colons but no port
        return text
    if "://" not in text:
        text = "//" + text.lstrip("/")
    try:
        parts = urlsplit(text)
        host = parts.hostname  # lower-cased, userinfo and port removed, [] stripped
        parts.port  # noqa: B018 - raises ValueError on a malformed port
    except ValueError as exc:
        raise InvalidDomain(str(exc)) from None
    if not host:
        raise InvalidDomain("no host name")
    return host


def _ip_literal(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return None


def normalise_domain(value: str) -> str:
    """One canonical host for a URL or host name.

    Lower-cased, IDNA (UTS 46) to ASCII, scheme, userinfo, port, path and a trailing dot
    stripped, a leading ``www.`` folded; IP literals in their compressed form.
    Raises :class:`InvalidDomain`.
    """
    host = _host_of(value)
    ip = _ip_literal(host)
    if ip is not None:
        return str(ip)
    host = host.rstrip(".")
    if not host:
        raise InvalidDomain("no host name")
    if len(host) <= 253 and PLAIN_HOST.match(host) and "xn--" not in host:
        return host[4:] if host.startswith("www.") and host.count(".") >= 2 else host
    try:
        ascii_host = idna.encode(host, uts46=True, transitional=False).decode("ascii")
    except (idna.IDNAError, UnicodeError, ValueError) as exc:
        raise InvalidDomain(f"not a valid host name: {exc}") from None
    ascii_host = ascii_host.lower()
    if ascii_host.startswith("www.") and ascii_host.count(".") >= 2:
        ascii_host = ascii_host[4:]
    if len(ascii_host) > 253 or not all(LABEL.match(label) for label in ascii_host.split(".")):
        raise InvalidDomain("not a valid host name")
    return ascii_host


def classify_environment(domain: str, rules: SeatRules | None = None) -> str:
    """``local``, ``staging`` or ``production`` for a normalised domain."""
    rules = rules or SeatRules()
    ip = _ip_literal(domain)
    if ip is not None:
        if ip.is_loopback or ip.is_private or ip.is_link_local or ip.is_unspecified:
            return LOCAL
        return PRODUCTION
    labels = domain.split(".")
    if len(labels) == 1 or labels[-1] in LOCAL_TLDS or domain.endswith(LOCAL_SUFFIXES):
        return LOCAL
    # A prefix names a subdomain: ``staging.shop.com`` is staging, ``staging.com`` is not.
    if any(
        domain.startswith(prefix) and "." in domain[len(prefix) :]
        for prefix in rules.staging_prefixes
    ):
        return STAGING
    if any(domain.endswith(suffix) for suffix in rules.staging_suffixes):
        return STAGING
    return PRODUCTION
